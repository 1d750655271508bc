/**
 * An approved trade's run (approvals.use-case.ts starts it, in the background, never inside the
 * approver's request): the rest of the trade pipeline from "price and prove" (trade-execute.ts),
 * priced and proven anew. Its deadline counts from now (the proof sets it), its minimum out is the
 * slippage from the price now or, when it named a quote, the quote's terms as copied when it was
 * held. It is authorized again against the policy in force (a key removed, a destinatary
 * denylisted since it was held, refuse it). A trade that cannot succeed fails with nothing sent:
 * its quote expired (quote_expired), the price moved past its minimum, a limit has no room for a
 * sell's proven payout.
 */
import { INTERRUPTED_ERROR } from "../approvals.js";
import { refusedEntry } from "../audit.js";
import { limitsFor, tradeRefusal } from "../access/authorize.js";
import type { AccessPolicy, Caller } from "../access/policy.js";
import { DomainError, PermissionDeniedError, QuoteExpiredError } from "../errors.js";
import type { Spending, TradeRecord } from "../ports/journal.port.js";
import type { TradePort } from "../ports/trade.port.js";
import { TradeTransitionError } from "../trade-states.js";
import type { TradeOrder } from "../types.js";
import { parseTradeRequest, type TradeConfig } from "../validation/trade-request.js";
import { minTimeLeftMs } from "./quote.use-case.js";
import type { TradeAccess } from "./trade-authorize.js";
import { execute, type TradeJournalling } from "./trade-execute.js";

/** What an approved trade runs with: the trade pipeline's own parts. */
export interface ApprovedRunner {
  trade: TradePort;
  config: TradeConfig;
  journalling: TradeJournalling;
  access?: TradeAccess;
}

/** The key that sent the trade, as the policy in force names it (absent when it is no longer there). */
function requesterOf(policy: AccessPolicy | undefined, record: TradeRecord): Caller {
  const key = policy?.keys.find((entry) => entry.name === record.keyName);
  return key === undefined ? { id: record.scope } : { id: record.scope, key };
}

/** The approved trade's order: its request as held, authorized again, under its quote's copied terms. */
function approvedOrder(runner: ApprovedRunner, record: TradeRecord, requester: Caller): TradeOrder {
  const order = parseTradeRequest(record.kind, record.request, runner.config);
  const policy = runner.access?.policy();
  const refusal = policy === undefined ? undefined : tradeRefusal(policy, requester, order);
  if (refusal !== undefined) throw new PermissionDeniedError(refusal.message, refusal.rule);
  const quote = record.approval?.quote;
  if (quote === null || quote === undefined) return order;
  const expiresAt = Date.parse(quote.expiresAt);
  const now = Date.now();
  const neededMs = minTimeLeftMs(runner.trade.blockTimeMs());
  if (expiresAt - neededMs <= now) throw new QuoteExpiredError(quote.quoteId, new Date(expiresAt), { now, neededMs });
  return { ...order, quote: { quoteId: quote.quoteId, minOut: BigInt(quote.minOut), expiresAt } };
}

/**
 * Runs the approved trade `record` to its outcome, which its record keeps (a keyed retry, GET
 * /api/v1/trades/{id} and the webhooks tell it). Never rejects: a refusal before anything was
 * signed fails the trade (with its audit record, in the same write); one after is the pipeline's.
 */
export async function runApproved(runner: ApprovedRunner, record: TradeRecord): Promise<void> {
  const { journal } = runner.journalling;
  const requester = requesterOf(runner.access?.policy(), record);
  const quoteId = record.approval?.quote?.quoteId ?? null;
  const fail = async (error: unknown): Promise<void> => {
    // Its signature refused because the upkeep failed it meanwhile (approval_interrupted, or
    // another instance's sweep): that outcome stands, and is not written over.
    if (error instanceof TradeTransitionError) return;
    // Approved still, or again: its only transaction refused and known nowhere, the ledger gave it
    // back to approved (TRADE_TRANSITIONS.releaseSlot), never to accepted, where it would be
    // forgotten. A journal that cannot be written now leaves it approved, for the upkeep.
    if ((await journal.get(record.id).catch(() => undefined))?.status !== "approved") return;
    const recorded =
      error instanceof DomainError
        ? { code: error.code, message: error.message }
        : {
            code: INTERRUPTED_ERROR.code,
            message: "the approved trade could not be run (internal error); nothing was paid",
          };
    const entry = refusedEntry(requester, error, {
      kind: record.kind,
      request: record.request,
      quoteId,
      id: record.id,
    });
    // A journal that cannot be written now leaves it approved: the upkeep fails it later (interrupted).
    await journal.markFailed(record.id, recorded, entry).catch(() => {});
  };
  let order: TradeOrder;
  try {
    order = approvedOrder(runner, record, requester);
  } catch (error) {
    await fail(error);
    return;
  }
  const policy = runner.access?.policy();
  const spend = {
    key: record.keyName ?? record.scope,
    wallet: order.wallet.toLowerCase(),
    destinatary: order.destinatary.toLowerCase(),
    // Not what the journal counts: a sell's proven payout then replaces its count, whatever it was.
    usd: -1n,
  };
  const spending: Spending | undefined = policy === undefined ? undefined : { spend, checks: limitsFor(policy, spend) };
  await execute(runner.trade, runner.journalling, { order, id: record.id, spending, unsigned: fail }).catch(() => {});
}
