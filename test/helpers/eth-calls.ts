/**
 * What a JSON-RPC call asks of the chain, for tests that count reads on the wire: an eth_call is
 * one call, unless it is the call batcher's (adapters/chain/rpc/call-batcher.ts), which carries a
 * tick's reads and proofs inside one eth_call of the simulator; those are listed one by one.
 */
import { Interface } from "ethers";

import { SIMULATOR_ADDRESS } from "../../adapters/chain/rpc/index.js";
import { callSimulatorAbi } from "../../gen/abi/index.js";

const simulator = new Interface(callSimulatorAbi);

export interface CarriedCall {
  from?: string;
  to?: string;
  data?: string;
  /** Set on a proof carried in a batch: the gas its call gets. */
  gas?: bigint;
}

/** Whether `method` and `params` are the batcher's eth_call of the simulator. */
export function isBatchedCall(method: string, params: unknown): boolean {
  const call = (params as Array<{ to?: string }> | undefined)?.[0];
  return method === "eth_call" && call?.to?.toLowerCase() === SIMULATOR_ADDRESS.toLowerCase();
}

/** The calls an eth_call carries (none for another method): the reads, then the proofs, of a batch. */
export function callsCarried(method: string, params: unknown): CarriedCall[] {
  if (method !== "eth_call") return [];
  const call = (params as CarriedCall[] | undefined)?.[0];
  if (call === undefined) return [];
  if (!isBatchedCall(method, params)) return [call];
  const [reads, proofs] = simulator.decodeFunctionData("simulate", call.data!) as unknown as [
    Array<{ target: string; data: string }>,
    Array<{ from: string; target: string; data: string; gas: bigint }>,
  ];
  return [
    ...reads.map((read) => ({ to: read.target, data: read.data })),
    ...proofs.map((proof) => ({ from: proof.from, to: proof.target, data: proof.data, gas: proof.gas })),
  ];
}
