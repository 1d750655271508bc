/**
 * What became of a transaction the service signed, asked of every endpoint that is up.
 *
 * A node's answer to a send can be late, lost or wrong: "nonce too low" may mean the node has
 * mined that very transaction, a timeout may hide an accepted send, and one endpoint may lag
 * behind another. So before a nonce slot is given up or a trade is signed again, its own
 * hashes are looked up everywhere (receipt and transaction), and the nonce counts as taken by
 * someone else only when an endpoint has mined past it and knows none of them.
 */
import type { JsonRpcApiProvider } from "ethers";

import { RpcProvider, type RpcOutcome } from "./rpc-provider.js";
import type { RpcReceipt } from "./web3-receipt.js";

export type Evidence =
  /** One of the hashes is mined (on some endpoint): its receipt. */
  | { state: "mined"; hash: string; receipt: RpcReceipt }
  /** A node holds one of them in its pool: it may still be mined. */
  | { state: "known"; hash: string }
  /** An endpoint has mined past the nonce and knows none of the hashes: another transaction took it. */
  | { state: "taken" }
  /** No endpoint knows them, and the nonce is not used as far as any of them says (or none answered). */
  | { state: "unknown" };

/**
 * Looks `hashes` (all signed at `nonce` of `wallet`) up on every endpoint that is up: each
 * one's receipt and transaction, and the wallet's mined nonce count. Never throws: an endpoint
 * that fails counts as having said nothing.
 */
export async function lookUpOwn(
  provider: JsonRpcApiProvider,
  wallet: string,
  nonce: number,
  hashes: readonly string[],
): Promise<Evidence> {
  const calls = [
    ...hashes.map((hash) => ({ method: "eth_getTransactionReceipt", params: [hash] })),
    ...hashes.map((hash) => ({ method: "eth_getTransactionByHash", params: [hash] })),
    { method: "eth_getTransactionCount", params: [wallet, "latest"] },
  ];
  const answers = await askEach(provider, calls);
  let known: string | undefined;
  let taken = false;
  for (const outcomes of answers) {
    if (outcomes instanceof Error) continue;
    const result = (i: number) => {
      const outcome = outcomes[i];
      return outcome !== undefined && "result" in outcome ? outcome.result : undefined;
    };
    for (let i = 0; i < hashes.length; i++) {
      const receipt = result(i);
      if (receipt !== null && typeof receipt === "object")
        return { state: "mined", hash: hashes[i]!, receipt: receipt as RpcReceipt };
      const tx = result(hashes.length + i);
      if (tx !== null && typeof tx === "object") known ??= hashes[i]!;
    }
    // Taken only on the word of an endpoint that answered every lookup: none of ours mined
    // there, none in its pool, and its chain past the nonce.
    const count = result(2 * hashes.length);
    const answeredAll = outcomes.length === calls.length && outcomes.every((outcome) => "result" in outcome);
    if (answeredAll && typeof count === "string" && Number(BigInt(count)) > nonce) taken = true;
  }
  if (known !== undefined) return { state: "known", hash: known };
  return taken ? { state: "taken" } : { state: "unknown" };
}

/** `calls` to every endpoint up (RpcProvider), or to the one endpoint of any other provider. */
async function askEach(
  provider: JsonRpcApiProvider,
  calls: ReadonlyArray<{ method: string; params: unknown[] }>,
): Promise<Array<RpcOutcome[] | Error>> {
  try {
    if (provider instanceof RpcProvider) return await provider.sendBatchToEach(calls);
    return [
      await Promise.all(
        calls.map(({ method, params }) =>
          provider.send(method, params).then(
            (result: unknown): RpcOutcome => ({ result }),
            (error: unknown): RpcOutcome => ({ error: error as Error }),
          ),
        ),
      ),
    ];
  } catch (error) {
    return [error as Error];
  }
}
