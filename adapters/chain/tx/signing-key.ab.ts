/**
 * The records bench's A/B switch for decision 0001 (docs/decisions/0001-wasm-signing-key.md):
 * loaded in place of signing-key.ts in the bench's service process only (adapters/shared/records.ab.ts
 * says how). With the switch on, a key signs with ethers' own `SigningKey.sign` (noble-curves),
 * as before the record; off, with libsecp256k1 as the service does. Either way each signature
 * is counted and timed: it runs synchronously on the event loop, so its time there is its cost.
 */
import { SigningKey, type BytesLike, type Signature } from "ethers";

import { tally, usesLibrary } from "../../shared/records.ab.js";
import { WasmSigningKey as Replacement } from "./signing-key.js";

export class WasmSigningKey extends Replacement {
  override sign(digest: BytesLike): Signature {
    const started = performance.now();
    const signature = usesLibrary("0001") ? SigningKey.prototype.sign.call(this, digest) : super.sign(digest);
    tally("0001 sign", 1, performance.now() - started);
    return signature;
  }
}
