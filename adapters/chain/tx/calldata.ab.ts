/**
 * The records bench's A/B switch for decision 0003 (docs/decisions/0003-calldata-encoder.md):
 * loaded in place of calldata.ts in the bench's service process only (adapters/shared/records.ab.ts
 * says how). With the switch on, each call is encoded by ethers' `Interface.encodeFunctionData`,
 * as before the record; off, by the encoder the service uses. Either way each encoding is counted
 * and timed (it is synchronous). The encoder is still made, so a function it refuses still stops
 * the start, as in the service.
 */
import type { Interface } from "ethers";

import { tally, usesLibrary } from "../../shared/records.ab.js";
import { staticCallEncoder as replacement, type StaticArg } from "./calldata.js";

export type { StaticArg };

export function staticCallEncoder(iface: Interface, name: string): (args: readonly StaticArg[]) => string {
  const encode = replacement(iface, name);
  return (args) => {
    const started = performance.now();
    const data = usesLibrary("0003") ? iface.encodeFunctionData(name, args) : encode(args);
    tally("0003 encode", 1, performance.now() - started);
    return data;
  };
}
