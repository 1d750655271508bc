/**
 * A trade's nonce slot in the ledger, as the trade adapter reads and writes it: what its receipt
 * waiter asks of it, the slot of a transaction no trade record carries, and a slot marked mined
 * as soon as the call that sent it sees its receipt.
 */
import {
  RecordedTradeError,
  TradeDroppedError,
  type DomainError,
  type NonceLedger,
  type SignedTradeTx,
  type TradeJournal,
} from "../../../core/index.js";
import type { NonceLookup, Outcome } from "../blocks/index.js";

/**
 * What the ledger and the journal hold for a trade's nonce now: its broadcasts, or the error its
 * trade ended with. A slot there that holds none of the trade's own transactions (`hash`, the one
 * its waiter was given) is another's (its own was released and the nonce used again): nothing.
 */
export function nonceLookup(
  journal: TradeJournal & NonceLedger,
  wallet: string,
  nonce: number,
  hash: string,
): NonceLookup {
  const own = hash.toLowerCase();
  return async () => {
    const slot = await journal.slot(wallet, nonce);
    if (slot === undefined || !slot.broadcasts.some((b) => b.hash.toLowerCase() === own)) return {};
    if (slot.state === "lost") return { error: new TradeDroppedError(wallet, nonce) };
    if (slot.tradeId !== null) {
      const record = await journal.get(slot.tradeId);
      const ended = record?.status === "failed" || record?.status === "expired" || record?.status === "cancelled";
      if (ended && record?.error) {
        return { error: new RecordedTradeError(record.error.code as DomainError["code"], record.error.message) };
      }
    }
    return { broadcasts: slot.broadcasts };
  };
}

/** A transaction no trade record carries (an approval, or a trade sent without a journal): its own slot, with what it holds back. */
export function recordSlotOf(ledger: NonceLedger, tx: SignedTradeTx, purpose: "trade" | "approval"): Promise<void> {
  const { wallet, nonce, txHash, rawTx, maxFeePerGas, maxPriorityFeePerGas } = tx;
  return ledger.recordSlot(
    {
      wallet,
      nonce,
      purpose,
      deadline: purpose === "trade" ? tx.deadline : null,
      ...(tx.reserves === undefined ? {} : { reserves: tx.reserves }),
    },
    { hash: txHash, rawTx, maxFeePerGas, maxPriorityFeePerGas, noop: false, sentAt: new Date() },
  );
}

/** Marks `wallet`'s slot at `nonce` mined with what was mined there; a failed write leaves it to the monitor. */
export async function markMined(
  ledger: NonceLedger,
  wallet: string,
  nonce: number,
  { receipt }: Outcome,
): Promise<void> {
  const mined = {
    hash: receipt.transactionHash,
    blockNumber: Number(receipt.blockNumber),
    blockHash: receipt.blockHash,
  };
  await ledger.markSlot(wallet, nonce, "mined", mined).catch(() => {});
}
