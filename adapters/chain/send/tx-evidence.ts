/**
 * What became of a transaction the service signed, asked of every endpoint that is up.
 *
 * A node's answer to a send can be late, lost or wrong: "nonce too low" may mean the node has
 * mined that very transaction, a timeout may hide an accepted send, and one endpoint may lag
 * behind another. So before a nonce slot is given up or a trade is signed again, its own
 * hashes are looked up everywhere (receipt and transaction). An endpoint that does not answer
 * proves nothing: only when every endpoint answered and none knows them are they `absent`.
 */
import type { JsonRpcApiProvider } from "ethers";

import { RpcProvider, type RpcOutcome } from "../rpc/index.js";
import type { RpcReceipt } from "../blocks/index.js";

export type Evidence =
  /** One of the hashes is mined (on some endpoint): its receipt, as that endpoint has it. */
  | { state: "mined"; hash: string; receipt: RpcReceipt }
  /** A node holds one of them in its pool: it may still be mined. */
  | { state: "known"; hash: string }
  /**
   * Every endpoint answered every lookup, none knows the hashes, and one has mined past the
   * nonce: another transaction may have taken it. An endpoint that did not answer may be the one
   * holding ours, so with one silent the answer is `unknown`, never `taken`.
   */
  | { state: "taken" }
  /** Every endpoint answered every lookup: none knows the hashes, none has mined past the nonce. */
  | { state: "absent" }
  /**
   * Some endpoint did not answer: nothing can be said for sure. `takenByTheRest`: every endpoint
   * that answered knows none of the hashes and at least one of them has mined past the nonce
   * (what `taken` says once the silent ones answer, or once they have been silent long enough
   * for the lifecycle monitor to stop waiting on them).
   */
  | { state: "unknown"; takenByTheRest: boolean };

/**
 * Looks `hashes` (all signed at `nonce` of `wallet`) up on every endpoint, those resting
 * included (the one that took a send and lost its answer has just been marked down): each
 * one's receipt and transaction, and the wallet's mined nonce count. Never throws: an endpoint
 * that fails counts as having said nothing, so it can only make the answer `unknown`.
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
  let silent = false;
  for (const outcomes of answers) {
    if (outcomes instanceof Error) {
      silent = true;
      continue;
    }
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
    // Only an endpoint that answered every lookup has a say: none of ours mined there, none in
    // its pool, and (for `taken`) its chain past the nonce.
    const answeredAll = outcomes.length === calls.length && outcomes.every((outcome) => "result" in outcome);
    if (!answeredAll) {
      silent = true;
      continue;
    }
    const count = result(2 * hashes.length);
    if (typeof count === "string" && Number(BigInt(count)) > nonce) taken = true;
  }
  if (known !== undefined) return { state: "known", hash: known };
  if (silent || answers.length === 0) return { state: "unknown", takenByTheRest: taken };
  return taken ? { state: "taken" } : { state: "absent" };
}

/** `calls` to every endpoint (RpcProvider), or to the one endpoint of any other provider. */
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
