/**
 * What each call of a request is answered (RpcProvider, rpc-provider.ts): the node's answer to it,
 * matched by id, as its result or as the error ethers would throw for it; a call the node left
 * out of its answer fails.
 */
import { makeError, type JsonRpcApiProvider, type JsonRpcError, type JsonRpcPayload, type JsonRpcResult } from "ethers";

/** One answer of `sendBatch`, in the order of the calls. */
export type RpcOutcome = { result: unknown } | { error: Error };

/** Each call's answer, matched by id: its result, or its error as ethers would throw it (`provider`'s getRpcError). */
export function outcomesOf(
  provider: Pick<JsonRpcApiProvider, "getRpcError">,
  payloads: readonly JsonRpcPayload[],
  answers: ReadonlyArray<JsonRpcResult | JsonRpcError>,
): RpcOutcome[] {
  const byId = new Map(answers.map((answer) => [answer.id, answer]));
  return payloads.map((payload) => {
    const answer = byId.get(payload.id);
    if (answer === undefined)
      return {
        error: makeError("the node did not answer this call of the batch", "BAD_DATA", { value: payload.method }),
      };
    if ("error" in answer) return { error: provider.getRpcError(payload, answer) };
    return { result: answer.result };
  });
}
