/**
 * What the send queue needs of a provider to broadcast a run of consecutive nonces: calls sent
 * in order, each answered on its own. The service's RpcProvider has it (`sendBatch`: one request,
 * one round trip); any other provider (a test's, an EIP-1193 bridge) gets it here as the calls
 * one at a time, in order, where a send that fails leaves the sends after it unsent (NotSentError):
 * a node would hold their later nonces behind the one that failed.
 */
import type { JsonRpcApiProvider } from "ethers";

import { isAlreadyKnown } from "./chain-errors.js";
import type { RpcOutcome } from "./request.js";

export interface BatchSender {
  sendBatch(calls: ReadonlyArray<{ method: string; params: unknown[] }>): Promise<RpcOutcome[]>;
}

/** A send not tried, because one before it in the same batch failed. */
export class NotSentError extends Error {
  constructor() {
    super("not sent: a transaction before it in the same batch failed");
    this.name = "NotSentError";
  }
}

/** The provider's own batch where it has one, else its calls one at a time (see the file's comment). */
export function batchSenderOf(provider: JsonRpcApiProvider): BatchSender {
  const own = provider as JsonRpcApiProvider & Partial<BatchSender>;
  if (typeof own.sendBatch === "function") return own as BatchSender;
  return {
    async sendBatch(calls) {
      const outcomes: RpcOutcome[] = [];
      let failed = false;
      for (const { method, params } of calls) {
        const isSend = method === "eth_sendRawTransaction";
        if (failed && isSend) {
          outcomes.push({ error: new NotSentError() });
          continue;
        }
        try {
          outcomes.push({ result: await provider.send(method, params) });
        } catch (error) {
          outcomes.push({ error: error as Error });
          // "already known": the node has it; the sends after it go on, as over a batch.
          if (isSend && !isAlreadyKnown(error)) failed = true;
        }
      }
      return outcomes;
    },
  };
}
