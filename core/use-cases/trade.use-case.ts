import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

import {
  IdempotencyKeyReusedError,
  InvalidArgumentError,
  PermissionDeniedError,
  SpendingLimitError,
} from "../errors.js";
import { acceptedEntry, refusedEntry } from "../audit.js";
import type { SentTrade, TradePort } from "../ports/trade.port.js";
import type { TradeKind, TradeOrder, TradeRequest, TransactionReceipt } from "../types.js";
import { parseQuoteId } from "../validation/quote-request.js";
import { parseTradeRequest, type TradeConfig } from "../validation/trade-request.js";
import { minTimeLeftMs, redeemQuote } from "./quote.use-case.js";
import { callerOf } from "../access/authorize.js";
import { authorizeStep, limitsNeedJournal, type TradeAccess } from "./trade-authorize.js";
import type { TradeContext } from "./trade-context.js";
import { type AcceptedTrade, execute, type TradeJournalling } from "./trade-execute.js";
import { forget } from "./trade-forget.js";
import { holdOf, holdTrade } from "./trade-hold.js";
import { awaitOutcome } from "./trade-outcome.js";

export type { TradeContext } from "./trade-context.js";
export type { TradeJournalling } from "./trade-execute.js";

/** A trade operation as the transports call it: raw body in, receipt out. */
export type TradeUseCase = (input: unknown, context?: TradeContext) => Promise<TransactionReceipt>;

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
 *
 * A trade an approval rule of the access policy matches (trade-hold.ts) is held once recorded (and
 * its quote used): nothing signed, answered TradeHeldError; approved, it runs in the background
 * (trade-approved.ts), and a keyed retry answers it held until then, its outcome after.
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
    const rules = holdOf(access, caller, spending, journalling);
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
        // Held by an approval rule, or run now.
        const run: Run =
          rules.length === 0
            ? (next, release) => execute(trade, journalling, next, release)
            : (next, release) => holdTrade(journalling, caller, next, record, rules, release);
        if (quoteId === null) return run(accepted);
        return runQuoted(trade, journalling, accepted, quoteId, caller.id, run);
      }
      if (record.requestHash !== hash) throw new IdempotencyKeyReusedError();
      const outcome = await awaitOutcome(trade, journalling, record);
      if (outcome !== "discarded") return outcome;
      // The first attempt was refused before signing and left no record: run this one afresh.
    }
  };
}

/** What runs an accepted trade (executes it, or holds it), given back its quote on a refusal before signing. */
type Run = (accepted: AcceptedTrade, releaseQuote?: () => Promise<void>) => Promise<TransactionReceipt>;

/** `run` under the quote `quoteId`, which the trade's record `id` uses first; a refusal before signing gives it back. */
async function runQuoted(
  trade: TradePort,
  journalling: TradeJournalling,
  accepted: AcceptedTrade,
  quoteId: string,
  scope: string,
  run: Run,
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
  return run({ ...accepted, order: { ...order, quote: terms } }, release);
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

function pickRequest(input: TradeRequest): TradeRequest {
  return {
    userAddress: input.userAddress,
    destinatary: input.destinatary,
    amount: input.amount,
    usdAddress: input.usdAddress,
  };
}
