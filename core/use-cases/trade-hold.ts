/**
 * The trade pipeline's hold (trade.use-case.ts, after "authorize" and the trade's first write): a
 * trade an approval rule matches is held as `pending_approval`, nothing priced, proven or signed,
 * its room in the limits kept, and answered held (TradeHeldError: 202 on JSON). Approved, it runs
 * from "price and prove" (trade-approved.ts).
 */
import { heldEntry, holdingRules, newApproval } from "../approvals.js";
import type { ApprovalRule, Caller } from "../access/policy.js";
import { InvalidArgumentError, TradeHeldError } from "../errors.js";
import type { Spending, TradeRecord } from "../ports/journal.port.js";
import type { AcceptedTrade, TradeJournalling } from "./trade-execute.js";
import type { TradeAccess } from "./trade-authorize.js";
import { forget } from "./trade-forget.js";
import { tradeView } from "./trade-status.use-case.js";

/**
 * The approval rules that hold this trade: those of the caller's key (or of every key) that it
 * counts more than, in USD as the limits count it when it is accepted (a sell at the price
 * route's rate, rounded up). None without an access policy.
 * @throws InvalidArgumentError when a rule holds it and the service has no journal to hold it in
 */
export function holdOf(
  access: TradeAccess | undefined,
  caller: Caller,
  spending: Spending | undefined,
  journalling: TradeJournalling | undefined,
): ApprovalRule[] {
  if (spending === undefined) return [];
  const rules = holdingRules(access?.policy(), caller.key?.name, spending.spend.usd);
  if (rules.length > 0 && journalling?.approvals === undefined)
    throw new InvalidArgumentError(
      "request",
      `approval rule "${rules[0]!.name}" holds this trade, and this service runs without a trade journal to hold it in: nothing was sent`,
    );
  return rules;
}

/**
 * Holds the accepted trade (`opened`, as its first write left it) for `rules`: journalled
 * `pending_approval` with what its approval needs (a quote it named copied in), and recorded in
 * the audit log, in one write; then answered held. A hold that cannot be written forgets the
 * trade, as any refusal before signing does (its quote given back).
 * @throws TradeHeldError, always, once held
 */
export async function holdTrade(
  journalling: TradeJournalling,
  caller: Caller,
  accepted: AcceptedTrade,
  opened: TradeRecord,
  rules: readonly ApprovalRule[],
  releaseQuote?: () => Promise<void>,
): Promise<never> {
  const { journal } = journalling;
  const { id, order } = accepted;
  const approval = newApproval(rules, Date.now(), order.quote);
  try {
    await journalling.approvals!.hold(id, approval, heldEntry(caller, id, approval));
  } catch (error) {
    await forget(journal, id, releaseQuote, accepted.refused?.(error));
    throw error;
  }
  const record = (await journal.get(id).catch(() => undefined)) ?? { ...opened, status: "pending_approval", approval };
  throw new TradeHeldError(id, "pending_approval", tradeView(record, null));
}
