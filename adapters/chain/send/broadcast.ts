/**
 * How a chunk of a send-queue round goes out (send-queue.ts): its signed transactions in order,
 * in one batch, with their receipts asked for alongside while the node mines on arrival.
 */
import type { JsonRpcApiProvider } from "ethers";

import type { RpcReceipt } from "../blocks/index.js";
import { batchSenderOf, isAlreadyKnown, isDefiniteRefusal, NotSentError, type BatchSender } from "../rpc/index.js";
import type { Outcome, Signed } from "./queued.js";

/** Batches sent without asking for receipts before asking again whether the node mines on arrival. */
const RECEIPTS_PROBE_EVERY = 64;

/** One wallet's broadcasts (its send queue's), and what they showed of the node. */
export class Broadcaster {
  /** How a round's transactions go out in order (batch-sender.ts). */
  readonly #batches: BatchSender;
  /** Whether the node was last seen to mine on arrival (a receipt came back with a send). */
  #minesOnArrival = true;
  /** Batches sent since receipts were last asked for with them. */
  #withoutReceipts = 0;

  constructor(provider: JsonRpcApiProvider) {
    this.#batches = batchSenderOf(provider);
  }

  /**
   * Sends the signed transactions in order, in one batch (batch-sender.ts: one JSON-RPC request
   * on the service's provider; else one call at a time, and after a failed send the rest are
   * `unsent`). Either way a bare eth_sendRawTransaction: ethers' broadcastTransaction would first
   * recover the sender from the signature (a secp256k1 recovery per trade) to build a response
   * unused here.
   *
   * While the node is seen to mine on arrival (automine), the batch asks for the transactions'
   * receipts after the sends: it has them by then, which saves the trade its wait for the next
   * look at the chain. A node that answered none of them mines in blocks: receipts are then
   * asked for once every RECEIPTS_PROBE_EVERY batches only, in case that changed. A null or
   * failed receipt call costs nothing more than that call: the trade waits as usual.
   */
  async broadcast(batch: readonly Signed[]): Promise<Outcome[]> {
    if (batch.length === 0) return [];
    const ask = this.#minesOnArrival || ++this.#withoutReceipts >= RECEIPTS_PROBE_EVERY;
    const answers = await this.#batches.sendBatch([
      ...batch.map(({ rawTx }) => ({ method: "eth_sendRawTransaction", params: [rawTx] })),
      ...(ask ? batch.map(({ txHash }) => ({ method: "eth_getTransactionReceipt", params: [txHash] })) : []),
    ]);
    if (ask) {
      this.#withoutReceipts = 0;
      // Only the null receipts of sends the node accepted tell that it mines in blocks: a
      // refused send has none anyway, and a failed receipt call tells nothing. A receipt tells
      // it mines on arrival. Nothing told: as it was.
      const told = batch.flatMap((_, i) => {
        const found = answers[batch.length + i];
        if (found === undefined || !("result" in found)) return [];
        if (found.result !== null) return [true];
        return "error" in answers[i]! ? [] : [false];
      });
      if (told.length > 0) this.#minesOnArrival = told.includes(true);
    }
    return batch.map((_, i): Outcome => {
      const answer = answers[i]!;
      if ("error" in answer && answer.error instanceof NotSentError) return { unsent: true };
      const found = answers[batch.length + i];
      const receipt = found !== undefined && "result" in found ? (found.result as RpcReceipt | null) : null;
      // A receipt beside a send error ("nonce too low" from a node that mined it): it is ours.
      // A JSON-RPC error is the node's answer about this transaction; anything else may not be.
      if ("error" in answer && !isAlreadyKnown(answer.error) && receipt === null)
        return { error: answer.error, definite: isDefiniteRefusal(answer.error) };
      return { accepted: true, receipt };
    });
  }
}
