/**
 * The trade pipeline from "price and prove" on (trade.use-case.ts): a trade the journal accepted
 * (or an approved one, core/use-cases/trade-approved.ts) proven, reserved, signed and journalled,
 * sent and settled.
 */
import {
  ChainUnavailableError,
  DomainError,
  TradeCancelledError,
  TradeExpiredError,
  TradePendingError,
} from "../errors.js";
import { noopCancelledError } from "./cancel-errors.js";
import type { ApprovalJournal } from "../ports/approval.port.js";
import type { AuditEntry, AuditLog } from "../ports/audit.port.js";
import type { SignedTradeTx, Spending, TradeJournal, TradeRecord } from "../ports/journal.port.js";
import type { QuoteStore } from "../ports/quote.port.js";
import type { ReservedTrade, SentTrade, TradePort } from "../ports/trade.port.js";
import type { TradeOrder, TransactionReceipt } from "../types.js";
import { countProven } from "./trade-authorize.js";
import { forget } from "./trade-forget.js";

export interface TradeJournalling {
  journal: TradeJournal;
  /** How long a retry waits for the first request with its key before answering 409 (or pending). */
  inFlightWaitMs: number;
  /** Where quotes are kept (the journal's storage); without it a Quote-Id is refused. */
  quotes?: QuoteStore;
  /**
   * The audit log (the journal's storage): with it, a trade accepted is recorded with its first
   * write, one refused after it was accepted with the write that discards it, and one refused by
   * authorization or a spending limit in an append of its own, before the refusal is answered.
   */
  audit?: AuditLog;
  /** The journal's approvals (its storage): without it, a trade an approval rule matches is refused. */
  approvals?: ApprovalJournal;
}

/**
 * A trade, step by step, with its journal writes between the steps:
 * 1. validate (parseTradeRequest, before the record is opened as `accepted`);
 * 2. authorize: the caller's roles and scopes and the denylist (authorizeStep, before the record
 *    is opened), and the spending limits, counted with the record's first write (`spending`);
 * 3. price and prove it on the chain (TradePort.prove); a sell's count becomes its proven payout;
 * 4. reserve what it spends (TradePort.reserve);
 * 5. sign, and journal it `signed` before anything is broadcast (signAndSend);
 * 6. send it; then `submitted` when a node holds it unmined;
 * 7. settle: its receipt, journalled `confirmed`; or its outcome (failed, expired), or pending.
 * What it reserved is released once the send is answered (its journalled slot holds it from then
 * on), or at once when it is refused before.
 */
export async function execute(
  trade: TradePort,
  journalling: TradeJournalling,
  { order, id, spending, refused, unsigned }: AcceptedTrade,
  releaseQuote?: () => Promise<void>,
): Promise<TransactionReceipt> {
  const { journal } = journalling;
  let signed: SignedTradeTx | undefined;
  try {
    const proven = await trade.prove(order);
    await countProven(journal, id, spending, order, proven.output);
    const reserved = await trade.reserve(proven);
    let sent: SentTrade;
    try {
      sent = await signAndSend(trade, journal, id, reserved, (tx) => (signed = tx));
    } finally {
      trade.release(reserved);
    }
    // The lifecycle monitor records it from the chain otherwise.
    if (sent.submitted) journal.markSubmitted(id).catch(() => {});
    const receipt = await trade.settle(sent);
    // The money moved: answer with the receipt even if the journal cannot be written now; the
    // lifecycle monitor records it from the chain once the journal is back.
    await journal.markConfirmed(id, receipt).catch(() => {});
    return receipt;
  } catch (error) {
    // Signed, then given back (its transaction was never sent, or refused and known nowhere:
    // the journal took the trade back to accepted, or cancelled it, when a cancel was asked of it
    // meanwhile): nothing of it can be mined, so it is forgotten like a trade refused before
    // signing (a cancelled one is kept, and answered so), never answered "pending" on a dead hash.
    if (signed !== undefined && givenBack(await journal.get(id).catch(() => undefined))) signed = undefined;
    if (signed === undefined) {
      // Nothing was signed, so nothing can be mined: forget the attempt, so its key works again
      // (and its quote, if it named one, can be used). A decision of the service's, recorded with
      // the discard; a trade that fails once signed is an outcome, which the trade's record keeps.
      // An approved trade is never forgotten: `unsigned` records its failure.
      if (unsigned !== undefined) await unsigned(error);
      else await forget(journal, id, releaseQuote, refused?.(error));
      // Cancelled by its sender or an admin while it ran: refused when it was to be journalled signed.
      const now = await journal.get(id).catch(() => undefined);
      if (now?.status === "cancelled") throw new TradeCancelledError(now.error?.message);
      throw error;
    }
    // Not mined in time: its lifecycle goes on in the background (re-sent, re-priced, or
    // replaced by a no-op at its deadline); a retry with the same key gets the outcome.
    if (error instanceof TradePendingError) throw error;
    if (error instanceof TradeExpiredError) {
      // A no-op took its nonce: the cancel's, when one was asked of it, else the deadline's.
      const now = await journal.get(id).catch(() => undefined);
      if (now?.cancel != null) {
        const cancelled = noopCancelledError(now);
        await journal.markCancelled(id, cancelled).catch(() => {});
        throw new TradeCancelledError(cancelled.message);
      }
      await journal.markExpired(id, { code: error.code, message: error.message }).catch(() => {});
      throw error;
    }
    if (error instanceof DomainError && !(error instanceof ChainUnavailableError)) {
      // A definite answer: the node refused the transaction, or it reverted when mined.
      await journal.markFailed(id, { code: error.code, message: error.message }).catch(() => {});
      throw error;
    }
    // Signed, then the node stopped answering (or a bug): only the chain knows whether it went
    // out. The lifecycle monitor finds out, and sends the journalled bytes again if it did not.
    throw new TradePendingError(signed.txHash);
  }
}

/** A trade whose only transaction the journal gave back (TRADE_TRANSITIONS.releaseSlot): nothing of it can be mined. */
function givenBack(record: TradeRecord | undefined): boolean {
  return (
    record?.txHash === null &&
    (record.status === "accepted" || record.status === "approved" || record.status === "cancelled")
  );
}

/** A trade the journal accepted: its order, its record's id, and what it counts against the limits. */
export interface AcceptedTrade {
  order: TradeOrder;
  id: string;
  spending: Spending | undefined;
  /** Its refusal's audit record, when the service keeps an audit log. */
  refused?: (error: unknown) => AuditEntry;
  /**
   * What is done with it when it is refused before anything was signed, instead of forgetting it
   * (an approved trade: failed, with its audit record, trade-approved.ts).
   */
  unsigned?: (error: unknown) => Promise<void>;
}

/**
 * Signs the reserved trade and journals it `signed` (its nonce slot with it) before the port
 * broadcasts it; a journal write that fails abandons it, unsent. A trade signed again at another
 * nonce (someone else's transaction took the first) is journalled again before that is sent.
 * `journalled` hears of each transaction once it is in the journal.
 */
async function signAndSend(
  trade: TradePort,
  journal: TradeJournal,
  id: string,
  reserved: ReservedTrade,
  journalled: (tx: SignedTradeTx) => void,
): Promise<SentTrade> {
  let signed = await trade.sign(reserved);
  for (;;) {
    try {
      await journal.markSigned(id, signed.tx);
    } catch (error) {
      trade.abandon(signed, error);
      throw error;
    }
    journalled(signed.tx);
    const sent = await trade.send(signed);
    if (!("again" in sent)) return sent;
    signed = sent.again;
  }
}
