import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

import {
  ChainUnavailableError,
  DomainError,
  IdempotencyInFlightError,
  IdempotencyKeyReusedError,
  InvalidArgumentError,
  PermissionDeniedError,
  RecordedTradeError,
  SpendingLimitError,
  TradeExpiredError,
  TradePendingError,
} from "../errors.js";
import type { Caller } from "../access/policy.js";
import { acceptedEntry, refusedEntry } from "../audit.js";
import type { AuditEntry, AuditLog } from "../ports/audit.port.js";
import type { SignedTradeTx, Spending, TradeJournal, TradeRecord } from "../ports/journal.port.js";
import type { QuoteStore } from "../ports/quote.port.js";
import type { ReservedTrade, SentTrade, TradePort } from "../ports/trade.port.js";
import type { TradeKind, TradeOrder, TradeRequest, TransactionReceipt } from "../types.js";
import { parseQuoteId } from "../validation/quote-request.js";
import { parseTradeRequest, type TradeConfig } from "../validation/trade-request.js";
import { minTimeLeftMs, redeemQuote } from "./quote.use-case.js";
import { mayBeCorrected, settle } from "./settlement.js";
import { callerOf } from "../access/authorize.js";
import { authorizeStep, countProven, limitsNeedJournal, type TradeAccess } from "./trade-authorize.js";

/** Who is asking, and the key that makes a retry safe. */
export interface TradeContext {
  /** The caller's identity (a hash of its api key): idempotency keys are scoped by it. */
  scope?: string;
  /** The caller with its access-file entry (the authorize step's subject); without it, `scope` alone. */
  caller?: Caller;
  /** The Idempotency-Key header (gRPC metadata `idempotency-key`), when sent. */
  idempotencyKey?: string | undefined;
  /** The Quote-Id header (gRPC metadata `quote-id`): the quote the trade executes under, when sent. */
  quoteId?: string | undefined;
}

/** A trade operation as the transports call it: raw body in, receipt out. */
export type TradeUseCase = (input: unknown, context?: TradeContext) => Promise<TransactionReceipt>;

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
}

/** Idempotency keys: 1 to 255 visible ASCII characters, as the IETF draft suggests. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export function parseIdempotencyKey(value: string): string {
  if (!IDEMPOTENCY_KEY.test(value)) {
    throw new InvalidArgumentError("Idempotency-Key", "must be 1 to 255 visible ASCII characters");
  }
  return value;
}

/** Identifies a request by what it asks for: the same trade in other spellings ("1.0", lowercase) hashes the same. */
function requestHash(order: TradeOrder, quoteId: string | null): string {
  const fields = [order.kind, order.wallet, order.destinatary, order.amount.toString(), order.stable.address];
  // A trade naming a quote is another request than the same trade without one, or with another.
  const canonical = JSON.stringify(quoteId === null ? fields : [...fields, quoteId]);
  return bytesToHex(sha256(utf8ToBytes(canonical)));
}

/**
 * Builds the use case for one trade operation (sell, buy or remittance).
 *
 * Without a journal: validate, then hand the order to the port.
 * With a journal, every accepted trade is recorded before its transaction is broadcast,
 * and an Idempotency-Key makes a retry safe: the same key with the same request returns the
 * first outcome and never sends a second transaction; with a different request it is refused
 * (IdempotencyKeyReusedError); while the first is in flight a retry waits for it, then gets
 * IdempotencyInFlightError (or TradePendingError once its transaction is out).
 * A trade refused before signing leaves no record, so its key can be retried.
 *
 * A Quote-Id (journal only) names a quote the trade must match; the trade's record uses it
 * (QuoteStore.consumeQuote) before anything is signed, and executes with its minOut and expiry.
 * A keyed retry finds the first record and answers its outcome, never using the quote again; a
 * trade refused before signing gives its quote back, as it leaves no record.
 */
export function tradeUseCase(
  kind: TradeKind,
  trade: TradePort,
  config: TradeConfig,
  journalling?: TradeJournalling,
  access?: TradeAccess,
): TradeUseCase {
  return async (input, context = {}) => {
    const order = parseTradeRequest(kind, input, config);
    const caller = callerOf(context);
    const request = pickRequest(input as TradeRequest);
    const audit = journalling?.audit;
    /** The refusal's record (its subject the trade's id once accepted), when the service keeps an audit log. */
    const refusal =
      audit === undefined
        ? undefined
        : (error: unknown, id: string | null, quoteId: string | null) =>
            refusedEntry(caller, error, { kind, request, quoteId, id });
    // Step 2, authorize: roles, scopes and the denylist here; the limits with the first write. A
    // refusal is recorded (the headers not yet read: it is answered whatever they hold).
    const spending = await authorizeStep(access, caller, order).catch(async (error: unknown) => {
      if (error instanceof PermissionDeniedError && refusal) await audit!.appendAudit(refusal(error, null, null));
      throw error;
    });
    const key = context.idempotencyKey === undefined ? null : parseIdempotencyKey(context.idempotencyKey);
    const quoteId = context.quoteId === undefined ? null : parseQuoteId(context.quoteId);
    if (quoteId !== null && journalling?.quotes === undefined)
      throw new InvalidArgumentError("Quote-Id", "is not supported: this service runs without a trade journal");
    if (!journalling) {
      if (key !== null)
        throw new InvalidArgumentError(
          "Idempotency-Key",
          "is not supported: this service runs without a trade journal",
        );
      if (spending !== undefined && spending.checks.length > 0) throw limitsNeedJournal();
      return tradeWithoutJournal(trade, order);
    }

    const { journal } = journalling;
    const hash = requestHash(order, quoteId);
    const accepting = audit === undefined ? undefined : acceptedEntry(caller, kind, request, quoteId);
    for (;;) {
      const { created, record } = await journal
        .open(
          { scope: caller.id, keyName: caller.key?.name, idempotencyKey: key, requestHash: hash, kind, request },
          spending,
          accepting,
        )
        .catch(async (error: unknown) => {
          // Refused by a limit inside open: nothing was written, so the refusal is appended alone.
          if (error instanceof SpendingLimitError && refusal) await audit!.appendAudit(refusal(error, null, quoteId));
          throw error;
        });
      if (created) {
        const id = record.id;
        const accepted = {
          order,
          id,
          spending,
          ...(refusal && { refused: (error: unknown) => refusal(error, id, quoteId) }),
        };
        if (quoteId === null) return execute(trade, journalling, accepted);
        return executeQuoted(trade, journalling, accepted, quoteId, caller.id);
      }
      if (record.requestHash !== hash) throw new IdempotencyKeyReusedError();
      const outcome = await awaitOutcome(trade, journalling, record);
      if (outcome !== "discarded") return outcome;
      // The first attempt was refused before signing and left no record: run this one afresh.
    }
  };
}

/** `execute` under the quote `quoteId`, which the trade's record `id` uses first; a refusal before signing gives it back. */
async function executeQuoted(
  trade: TradePort,
  journalling: TradeJournalling,
  accepted: AcceptedTrade,
  quoteId: string,
  scope: string,
): Promise<TransactionReceipt> {
  const { order, id, refused } = accepted;
  const quotes = journalling.quotes!;
  // Gives the quote back if this trade took it (a no-op otherwise: conditional on the trade's id).
  const release = () => quotes.releaseQuote(quoteId, id);
  let terms: NonNullable<TradeOrder["quote"]>;
  try {
    // At least two of the chain's blocks left (minTimeLeftMs), checked again when it is signed.
    const minLeft = minTimeLeftMs(trade.blockTimeMs());
    terms = await redeemQuote(quotes, quoteId, order, scope, id, Date.now(), minLeft);
  } catch (error) {
    // The quote may have been taken and the answer lost: given back, since nothing was signed.
    await forget(journalling.journal, id, release, refused?.(error));
    throw error;
  }
  return execute(trade, journalling, { ...accepted, order: { ...order, quote: terms } }, release);
}

/**
 * Forgets a trade that signed nothing, so its key works again; first gives its quote back, if it
 * named one. The quote goes back only while the journal shows the record still `accepted` (or
 * gone): a `markSigned` that was written but answered with an error leaves it `signed`, its bytes
 * for the lifecycle monitor to send, and its quote used. It goes back before the record does, so
 * a keyed retry that finds the record gone finds the quote free.
 */
async function forget(
  journal: TradeJournal,
  id: string,
  release?: () => Promise<void>,
  audit?: AuditEntry,
): Promise<void> {
  if (release !== undefined) {
    const record = await journal.get(id).then(
      (found) => found ?? "gone",
      () => undefined, // the journal cannot say: the quote stays used (nothing is paid twice)
    );
    if (record === "gone" || record?.status === "accepted") await release().catch(() => {});
  }
  await discard(journal, id, audit);
}

/**
 * Forgets a trade that signed nothing, so its key works again. A journal failing for a moment is
 * asked again, 4 times in all over about 0.35 s; one that keeps failing leaves the record to
 * forgetUnsigned (adapters/startup/journal.ts).
 */
async function discard(journal: TradeJournal, id: string, audit?: AuditEntry): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await journal.discard(id, audit);
      return;
    } catch {
      if (attempt === 4) return;
      await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** (attempt - 1)));
    }
  }
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
async function execute(
  trade: TradePort,
  journalling: TradeJournalling,
  { order, id, spending, refused }: AcceptedTrade,
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
    // the journal took the trade back to accepted): nothing of it can be mined, so it is
    // forgotten like a trade refused before signing, never answered "pending" on a dead hash.
    if (signed !== undefined && (await journal.get(id).catch(() => undefined))?.status === "accepted")
      signed = undefined;
    if (signed === undefined) {
      // Nothing was signed, so nothing can be mined: forget the attempt, so its key works again
      // (and its quote, if it named one, can be used). A decision of the service's, recorded with
      // the discard; a trade that fails once signed is an outcome, which the trade's record keeps.
      await forget(journal, id, releaseQuote, refused?.(error));
      throw error;
    }
    // Not mined in time: its lifecycle goes on in the background (re-sent, re-priced, or
    // replaced by a no-op at its deadline); a retry with the same key gets the outcome.
    if (error instanceof TradePendingError) throw error;
    if (error instanceof TradeExpiredError) {
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

/** A trade the journal accepted: its order, its record's id, and what it counts against the limits. */
interface AcceptedTrade {
  order: TradeOrder;
  id: string;
  spending: Spending | undefined;
  /** Its refusal's audit record, when the service keeps an audit log. */
  refused?: (error: unknown) => AuditEntry;
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

/**
 * A trade without a journal of the caller's: the same steps, the port recording the transaction's
 * nonce slot itself (a service without a trade journal, and tools that trade on a chain adapter).
 */
export async function tradeWithoutJournal(trade: TradePort, order: TradeOrder): Promise<TransactionReceipt> {
  const reserved = await trade.reserve(await trade.prove(order));
  let sent: SentTrade;
  try {
    let signed = await trade.sign(reserved, { unjournalled: true });
    for (;;) {
      const answer = await trade.send(signed);
      if (!("again" in answer)) {
        sent = answer;
        break;
      }
      signed = answer.again;
    }
  } finally {
    trade.release(reserved);
  }
  return trade.settle(sent);
}

/**
 * Waits for the first request with a key to finish, asking the chain about it meanwhile (and
 * recording what it says). A confirmed trade is checked against the chain too, so a retry
 * never gets a receipt whose block a reorg removed.
 */
async function awaitOutcome(
  trade: TradePort,
  journalling: TradeJournalling,
  first: TradeRecord,
): Promise<TransactionReceipt | "discarded"> {
  const until = Date.now() + journalling.inFlightWaitMs;
  let record: TradeRecord | undefined = first;
  for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
    if (record === undefined) return "discarded";
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
      throw record.txHash && record.status !== "accepted"
        ? new TradePendingError(record.txHash)
        : new IdempotencyInFlightError();
    await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, until - Date.now()))));
    record = await journalling.journal.get(first.id);
  }
}

function recorded(record: TradeRecord | undefined): DomainError | undefined {
  if ((record?.status !== "failed" && record?.status !== "expired") || !record.error) return undefined;
  return new RecordedTradeError(record.error.code as DomainError["code"], record.error.message);
}

function pickRequest(input: TradeRequest): TradeRequest {
  return {
    userAddress: input.userAddress,
    destinatary: input.destinatary,
    amount: input.amount,
    usdAddress: input.usdAddress,
  };
}
