/**
 * The trade pipeline's authorize step (trade.use-case.ts, step 2) and the quote's view of it: the
 * access policy (core/access) applied to one caller and one order, before anything is reserved or
 * signed. The roles, the scopes and the denylist are checked here; the spending limits are counted
 * by the journal, atomically with the trade's first write (TradeJournal.open with `spending`).
 *
 * What a trade counts, in USD at LIMIT_USD_DECIMALS, exact: a buy or a remittance its `amount`
 * (one stable-coin unit is one USD); a sell its stable-coin payout, first at the price route's USD
 * rate when it is accepted, rounded up, then the payout it is proven at, checked again, before it
 * is signed (`countProven`), and last what its receipt says it paid, once mined (the journal,
 * Spend.payoutDecimals): the swap pays at the price of its block, which may have risen since the
 * proof, so a sell may pass a limit's room by that rise; the trades after it see what it paid.
 */
import {
  authorizeTrade,
  coinToLimitUsd,
  type LimitCheck,
  limitsFor,
  type Spend,
  sellEstimateUsd,
  tradeRefusal,
  usdText,
} from "../access/authorize.js";
import type { AccessPolicy, Caller } from "../access/policy.js";
import { SpendingLimitError } from "../errors.js";
import type { Spending, TradeJournal } from "../ports/journal.port.js";
import type { PricePort } from "../ports/price.port.js";
import type { QuoteIssue } from "../ports/quote.port.js";
import type { TradeOrder } from "../types.js";

/** What the authorize step reads: the policy in force (reloaded with its file), and the price, for a sell's first count. */
export interface TradeAccess {
  /** The access policy in force; undefined without an access file (every key a trader with no limits). */
  policy(): AccessPolicy | undefined;
  price: PricePort;
}

/** The decimals the price route's rates are exact at (adapters/chain/price: RATE_DECIMALS). */
const RATE_DECIMALS = 8;

/** The caller's key, or the spend's owner name: limits per key count by name. */
function spendOf(caller: Caller, order: TradeOrder, usd: bigint): Spend {
  return {
    key: caller.key?.name ?? caller.id,
    wallet: order.wallet.toLowerCase(),
    destinatary: order.destinatary.toLowerCase(),
    usd,
  };
}

/**
 * Step 2: whether the caller may send this trade (PermissionDeniedError otherwise), and what it
 * counts against the limits (for TradeJournal.open). Under an access policy every trade is
 * counted, whether or not a limit applies to it now, so that a limit a reload adds counts the
 * trades already in its window.
 * @throws PermissionDeniedError naming the key and what it may not do
 */
export async function authorizeStep(
  access: TradeAccess | undefined,
  caller: Caller,
  order: TradeOrder,
): Promise<Spending | undefined> {
  const policy = access?.policy();
  if (policy === undefined) return undefined;
  authorizeTrade(policy, caller, order);
  const probe = spendOf(caller, order, 0n);
  const checks = limitsFor(policy, probe);
  if (order.kind !== "sell")
    return { spend: { ...probe, usd: coinToLimitUsd(order.amount, order.stable.decimals) }, checks };
  const usd = await sellEstimate(access!.price, order);
  return { spend: { ...probe, usd, payoutDecimals: order.stable.decimals }, checks };
}

/** A sell's first count: its tokens at the price route's USD rate, rounded up (the rate a whisker up, too). */
async function sellEstimate(price: PricePort, order: TradeOrder): Promise<bigint> {
  const record = price.current?.() ?? (await price.getPrice());
  // The route's rates are exact at RATE_DECIMALS, given as JSON numbers: toFixed gives the digits
  // back; one unit more covers a number that printed a hair under its value.
  const rate = BigInt(record.rateForCashCurrency.USD.toFixed(RATE_DECIMALS).replace(".", "")) + 1n;
  return sellEstimateUsd(order.amount, rate, RATE_DECIMALS);
}

/**
 * A sell's count replaced by the payout it was proven at (`output`, in the coin's base units),
 * checked against the same limits, before it is signed. Nothing for a buy or a remittance, whose
 * count is exact when accepted.
 * @throws SpendingLimitError when the proven payout leaves a limit no room
 */
export async function countProven(
  journal: TradeJournal,
  id: string,
  spending: Spending | undefined,
  order: TradeOrder,
  output: bigint,
): Promise<void> {
  if (spending === undefined || order.kind !== "sell") return;
  const usd = coinToLimitUsd(output, order.stable.decimals);
  if (usd !== spending.spend.usd) await journal.respend(id, usd, spending.checks);
}

/** Refused to a service without a journal: it has nowhere to count the limits, and never trades past them. */
export function limitsNeedJournal(): SpendingLimitError {
  return new SpendingLimitError(
    "spending limits are configured, but this service runs without a trade journal to count them in: nothing was sent",
    "journal",
  );
}

/** What a limit has left, as a quote reads it (TradeJournal.spendingUse). */
export interface LimitRoom {
  check: LimitCheck;
  used: { usd: bigint; trades: number };
}

/**
 * The quote's issues from the policy: `not_permitted` (a role or scope refuses the trade),
 * `destinatary_denied` (the denylist, or the key's own list), `limit_exceeded` (naming the limit
 * and the room it has left). Nothing is counted or reserved. A quote that names no destinatary
 * (`destinataryNamed` false: the wallet stands in for it) binds none, so neither the
 * destinatary checks nor the per-destinatary limits apply to it.
 */
export async function policyIssues(
  access: TradeAccess | undefined,
  journal: TradeJournal | undefined,
  caller: Caller,
  order: TradeOrder,
  payoutUsd: bigint,
  destinataryNamed: boolean,
): Promise<QuoteIssue[]> {
  const policy = access?.policy();
  if (policy === undefined) return [];
  const refusal = tradeRefusal(policy, caller, order);
  // The destinatary is checked last: a refusal of it means every other check passed.
  const denied = refusal?.message.startsWith("destinatary:") === true;
  if (refusal !== undefined && (destinataryNamed || !denied))
    return [{ type: denied ? "destinatary_denied" : "not_permitted", message: refusal.message, details: {} }];
  const spend = spendOf(caller, order, payoutUsd);
  const checks = limitsFor(policy, spend).filter((check) => destinataryNamed || check.limit.per !== "destinatary");
  if (checks.length === 0 || journal === undefined) return [];
  const uses = await journal.spendingUse(checks);
  const issues: QuoteIssue[] = [];
  checks.forEach((check, index) => {
    const used = uses[index]!;
    const { maxUsd, maxTrades } = check.limit;
    const overUsd = maxUsd !== undefined && used.usd + spend.usd > maxUsd;
    const overTrades = maxTrades !== undefined && used.trades + 1 > maxTrades;
    if (!overUsd && !overTrades) return;
    const details: Record<string, string> = { limit: check.limit.name, window: check.limit.window };
    if (maxUsd !== undefined) {
      details.maxUsd = usdText(maxUsd);
      details.roomUsd = usdText(maxUsd > used.usd ? maxUsd - used.usd : 0n);
      details.tradeUsd = usdText(spend.usd);
    }
    if (maxTrades !== undefined) {
      details.maxTrades = String(maxTrades);
      details.roomTrades = String(Math.max(0, maxTrades - used.trades));
    }
    issues.push({
      type: "limit_exceeded",
      message: `spending limit "${check.limit.name}" (rolling ${check.limit.window}) has no room for this trade`,
      details,
    });
  });
  return issues;
}
