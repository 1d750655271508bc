/** What a keyed retry answers (trade.use-case.ts): the first request's outcome, waited for. */
import {
  type DomainError,
  IdempotencyInFlightError,
  RecordedTradeError,
  TradeHeldError,
  TradePendingError,
} from "../errors.js";
import type { TradeRecord } from "../ports/journal.port.js";
import type { TradePort } from "../ports/trade.port.js";
import type { TransactionReceipt } from "../types.js";
import { mayBeCorrected, settle } from "./settlement.js";
import type { TradeJournalling } from "./trade-execute.js";
import { tradeView } from "./trade-status.use-case.js";

/**
 * Waits for the first request with a key to finish, asking the chain about it meanwhile (and
 * recording what it says). A confirmed trade is checked against the chain too, so a retry
 * never gets a receipt whose block a reorg removed. A trade held for an approval is answered
 * held at once (TradeHeldError: 202); an approved one is waited for as it runs, and answered held
 * while it is still unsigned when the wait ends.
 */
export async function awaitOutcome(
  trade: TradePort,
  journalling: TradeJournalling,
  first: TradeRecord,
): Promise<TransactionReceipt | "discarded"> {
  const until = Date.now() + journalling.inFlightWaitMs;
  let record: TradeRecord | undefined = first;
  for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
    if (record === undefined) return "discarded";
    if (record.status === "pending_approval") throw held(record);
    const failure = recorded(record);
    // Failed for a taken nonce: asked again, in case one of its transactions is mined after all.
    if (failure && !mayBeCorrected(record)) throw failure;
    if (record.broadcasts.length > 0) {
      // The chain may know the outcome before whoever is watching the trade does, and only the
      // chain can say whether a journalled receipt is still canonical: a confirmed trade whose
      // chain cannot be asked is answered 503, never with a receipt that may be orphaned.
      const settled = await settle(journalling.journal, trade, record).catch((error: unknown) => {
        if (record?.status === "confirmed") throw error;
        if (failure) throw failure; // the chain cannot be asked: the verdict recorded stands
        return undefined; // still pending: ask again on the next turn
      });
      if (settled !== undefined) {
        record = settled.record;
        if (record.status === "confirmed" && record.receipt && settled.resolution?.state === "mined")
          return record.receipt;
        const outcome = recorded(record);
        if (outcome) throw outcome;
      }
    } else if (record.status === "confirmed" && record.receipt) {
      return record.receipt; // journalled before transactions were (no broadcasts to look up)
    }
    if (Date.now() >= until)
      throw record.status === "approved"
        ? held(record)
        : record.txHash && record.status !== "accepted"
          ? new TradePendingError(record.txHash)
          : new IdempotencyInFlightError();
    await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, until - Date.now()))));
    record = await journalling.journal.get(first.id);
  }
}

/** The answer of a trade held for (or given) its approval and not signed: the trade as its view shows it. */
export function held(record: TradeRecord): TradeHeldError {
  const status = record.status === "approved" ? "approved" : "pending_approval";
  return new TradeHeldError(record.id, status, tradeView(record, null));
}

function recorded(record: TradeRecord | undefined): DomainError | undefined {
  const ended =
    record?.status === "failed" ||
    record?.status === "expired" ||
    record?.status === "rejected" ||
    record?.status === "cancelled";
  if (!ended || !record?.error) return undefined;
  return new RecordedTradeError(record.error.code as DomainError["code"], record.error.message);
}
