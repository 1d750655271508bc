/**
 * The trade pipeline's authorize step, and what reads may see: the access policy (policy.ts)
 * applied to one caller and one order. Pure: the journal counts the limits, atomically with the
 * trade's first write (SpendLedger, core/ports/journal.port.ts); this module only says which
 * limits apply and what a trade counts.
 */
import { PermissionDeniedError, SpendingLimitError } from "../errors.js";
import type { TradeKind, TradeOrder } from "../types.js";
import type { AccessKey, AccessPolicy, Caller, LimitPer, Role, SpendingLimit, Visibility } from "./policy.js";
import { keyIdOf, LIMIT_USD_DECIMALS } from "./policy.js";

/** The caller of a request's context: its own, or one with no access-file entry under its scope. */
export function callerOf(context: { scope?: string; caller?: Caller }): Caller {
  return context.caller ?? { id: context.scope ?? "" };
}

/** The roles that may send trades, and the roles that may retry a webhook delivery. */
const TRADING_ROLES: readonly Role[] = ["trader"];
const DELIVERY_ROLES: readonly Role[] = ["trader", "admin"];

function holdsAny(key: AccessKey, roles: readonly Role[]): boolean {
  return roles.some((role) => key.roles.has(role));
}

function rolesText(key: AccessKey): string {
  return [...key.roles].join(", ");
}

/** Why the policy refuses a trade: the rule that decided, and the message naming the key and what it may not do. */
export interface AccessRefusal {
  rule: PermissionDeniedError["rule"];
  message: string;
}

/**
 * Whether the caller may send this trade: the trader role, then each scope of its key (kind,
 * wallet, coin, destinatary), then the denylist. Without an access policy every key may.
 * @throws PermissionDeniedError naming the key and what it may not do
 */
export function authorizeTrade(policy: AccessPolicy | undefined, caller: Caller, order: TradeOrder): void {
  const refusal = tradeRefusal(policy, caller, order);
  if (refusal !== undefined) throw new PermissionDeniedError(refusal.message, refusal.rule);
}

/** Why the policy refuses the caller this trade, or undefined when it does not. */
export function tradeRefusal(
  policy: AccessPolicy | undefined,
  caller: Caller,
  order: TradeOrder,
): AccessRefusal | undefined {
  const key = caller.key;
  if (policy === undefined) return undefined;
  // Under a policy every accepted key has its entry; a caller without one is refused, never free.
  if (key === undefined)
    return { rule: "role", message: "this api key has no entry in the access file: it may not trade" };
  const name = `api key "${key.name}"`;
  const scope = (message: string): AccessRefusal => ({ rule: "scope", message });
  if (!holdsAny(key, TRADING_ROLES))
    return { rule: "role", message: `${name} may not trade: its roles are ${rolesText(key)} (trading needs trader)` };
  if (key.kinds !== undefined && !key.kinds.has(order.kind))
    return scope(`${name} may not ${verb(order.kind)}: its kinds are ${[...key.kinds].join(", ")}`);
  const wallet = order.wallet.toLowerCase();
  if (key.wallets !== undefined && !key.wallets.has(wallet))
    return scope(`userAddress: ${name} may not send from ${order.wallet} (not among its wallets)`);
  const coin = order.stable.address.toLowerCase();
  if (key.coins !== undefined && !key.coins.has(coin))
    return scope(
      `usdAddress: ${name} may not use ${order.stable.symbol} ${order.stable.address} (not among its coins)`,
    );
  return destinataryRefusal(policy, key, order.destinatary);
}

/** Why the destinatary may not be paid by this key: on the denylist, or not on its allowlist. */
export function destinataryRefusal(
  policy: AccessPolicy,
  key: AccessKey,
  destinatary: string,
): AccessRefusal | undefined {
  const address = destinatary.toLowerCase();
  if (policy.denylist.has(address))
    return { rule: "denylist", message: `destinatary: ${destinatary} is on the denylist; no trade may pay it` };
  if (key.destinataries !== undefined && !key.destinataries.has(address))
    return {
      rule: "scope",
      message: `destinatary: api key "${key.name}" may not pay ${destinatary} (not among its destinataries)`,
    };
  return undefined;
}

function verb(kind: TradeKind): string {
  return kind === "remittance" ? "send remittances" : kind;
}

/**
 * Whether the caller may retry a webhook delivery: a trader (its own) or an admin; a viewer or
 * an approver only reads.
 * @throws PermissionDeniedError naming the key
 */
export function authorizeDeliveryRetry(caller: Caller): void {
  const key = caller.key;
  if (key === undefined || holdsAny(key, DELIVERY_ROLES)) return;
  throw new PermissionDeniedError(
    `api key "${key.name}" may not retry a webhook delivery: its roles are ${rolesText(key)} (it needs trader or admin)`,
  );
}

/**
 * Whether `key` reads every trade (an admin, or a viewer or approver whose `sees` is "*"): it
 * also gets the events about the wallets and the swap (core/ports/watch.port.ts).
 */
export function watchesEverything(key: AccessKey): boolean {
  return key.roles.has("admin") || ((key.roles.has("viewer") || key.roles.has("approver")) && key.sees === "all");
}

/**
 * Whether the caller may resume a paused exchange wallet: an admin of the access file only.
 * @throws PermissionDeniedError naming the key and its roles
 */
export function authorizeWalletResume(policy: AccessPolicy | undefined, caller: Caller): void {
  const key = caller.key;
  if (policy === undefined || key === undefined)
    throw new PermissionDeniedError(
      "a paused wallet is resumed with an admin key of the access file, and this service runs without ACCESS_FILE",
    );
  if (!key.roles.has("admin"))
    throw new PermissionDeniedError(
      `api key "${key.name}" may not resume a wallet: its roles are ${rolesText(key)} (it needs admin)`,
    );
}

/**
 * The trades the caller reads: without a policy, those sent with its own key (its id); with one,
 * those sent under its name, plus those of every key it `sees`, by name and by the ids of their
 * hashes (trades and deliveries recorded before the key had a name); every trade for an admin.
 * `as: "approver"`: the trades whose approval it may decide, by its `sees` alone, an admin's too.
 */
export function visibilityOf(
  policy: AccessPolicy | undefined,
  caller: Caller,
  as: "reader" | "approver" = "reader",
): Visibility {
  const key = caller.key;
  if (policy === undefined || key === undefined) return { names: [], ids: [caller.id] };
  // An admin reads every trade, but decides on a held one only as its approver role's `sees` allows.
  if (as === "reader" && key.roles.has("admin")) return "all";
  // `sees` is a reader's: a viewer's (an approver reads as one); a trader reads its own trades.
  const reader = as === "approver" || key.roles.has("viewer") || key.roles.has("approver");
  if (reader && key.sees === "all") return "all";
  const names = new Set([key.name, ...(reader && key.sees !== "all" ? key.sees : [])]);
  const ids = new Set([caller.id]);
  for (const other of policy.keys) {
    if (!names.has(other.name)) continue;
    ids.add(other.id);
    for (const hash of other.sha256) ids.add(keyIdOf(hash));
  }
  return { names: [...names], ids: [...ids] };
}

/** Whether a trade recorded under `name` (null: before its key had one) and `id` is one the caller reads. */
export function sees(visibility: Visibility, trade: { keyName: string | null; scope: string }): boolean {
  if (visibility === "all") return true;
  return (trade.keyName !== null && visibility.names.includes(trade.keyName)) || visibility.ids.includes(trade.scope);
}

/** What a trade counts against the limits, at LIMIT_USD_DECIMALS, and whom it counts for. Addresses lower-case. */
export interface Spend {
  key: string;
  wallet: string;
  destinatary: string;
  usd: bigint;
  /**
   * A sell's: the decimals of the stable coin it pays. The swap pays at the price of the block it
   * is mined in, not the one it was proven at, so once its receipt is recorded (markMined,
   * markConfirmed) the journal counts what the receipt's Sold event says it paid
   * (coinToLimitUsd), in place of `usd`, in the same write. Absent for a buy or a remittance,
   * whose `usd` is what it pays.
   */
  payoutDecimals?: number;
}

/** One limit as it applies to one trade: the limit, and the value it counts apart ("desk-eu", a wallet, "*"). */
export interface LimitCheck {
  limit: SpendingLimit;
  value: string;
}

/** What each `per` counts apart, for a spend. */
export function scopeValue(per: LimitPer, spend: Pick<Spend, "key" | "wallet" | "destinatary">): string {
  switch (per) {
    case "key":
      return spend.key;
    case "wallet":
      return spend.wallet;
    case "destinatary":
      return spend.destinatary;
    case "all":
      return "*";
  }
}

/** The limits of the policy that count this spend (a per-key limit naming other keys does not). */
export function limitsFor(policy: AccessPolicy, spend: Pick<Spend, "key" | "wallet" | "destinatary">): LimitCheck[] {
  const checks: LimitCheck[] = [];
  for (const limit of policy.limits) {
    if (limit.per === "key" && limit.keys !== undefined && !limit.keys.has(spend.key)) continue;
    checks.push({ limit, value: scopeValue(limit.per, spend) });
  }
  return checks;
}

/** A stable coin amount in its base units, at LIMIT_USD_DECIMALS (exact: no coin has more decimals). */
export function coinToLimitUsd(amount: bigint, decimals: number): bigint {
  return amount * 10n ** BigInt(LIMIT_USD_DECIMALS - decimals);
}

/**
 * What a sell is counted when it is accepted: its token amount (18 decimals) at `usdPerToken`
 * (an exact decimal rate, `rate` / 10^`rateDecimals`), at LIMIT_USD_DECIMALS, rounded up. The
 * payout it is proven at replaces it before it is signed.
 */
export function sellEstimateUsd(tokens: bigint, rate: bigint, rateDecimals: number): bigint {
  // tokens / 10^18 × rate / 10^r, at 10^18: tokens × rate / 10^r, rounded up.
  const scale = 10n ** BigInt(rateDecimals);
  return (tokens * rate + scale - 1n) / scale;
}

/** Used so far within a limit's window, and what a new trade would add. */
export interface LimitUse {
  usd: bigint;
  trades: number;
}

/**
 * Whether a limit has room for `add` on top of `used`: a trade passes when what is used plus the
 * trade is at most the maximum. Returns what it is over by (usd at LIMIT_USD_DECIMALS, or trades),
 * or undefined when it fits.
 */
export function overBy(limit: SpendingLimit, used: LimitUse, add: LimitUse): LimitUse | undefined {
  const usd = limit.maxUsd === undefined ? 0n : used.usd + add.usd - limit.maxUsd;
  const trades = limit.maxTrades === undefined ? 0 : used.trades + add.trades - limit.maxTrades;
  if (usd <= 0n && trades <= 0) return undefined;
  return { usd: usd > 0n ? usd : 0n, trades: Math.max(trades, 0) };
}

/** Whether the trade alone is over the limit, so that no wait makes room for it. */
export function aloneOver(limit: SpendingLimit, add: LimitUse): boolean {
  return (
    (limit.maxUsd !== undefined && add.usd > limit.maxUsd) ||
    (limit.maxTrades !== undefined && add.trades > limit.maxTrades)
  );
}

/** USD at LIMIT_USD_DECIMALS as decimal text, trailing zeros cut ("250000", "12.5"). */
export function usdText(units: bigint): string {
  const scale = 10n ** BigInt(LIMIT_USD_DECIMALS);
  const whole = units / scale;
  const part = (units % scale).toString().padStart(LIMIT_USD_DECIMALS, "0").replace(/0+$/, "");
  return part === "" ? whole.toString() : `${whole}.${part}`;
}

/** What a limit counts apart, in words: "per key desk-eu", "per destinatary 0xab…", "for the whole service". */
function scopeText(check: LimitCheck): string {
  return check.limit.per === "all" ? "for the whole service" : `per ${check.limit.per} ${check.value}`;
}

/**
 * The refusal of a trade a limit has no room for (the journal found it so, atomically with the
 * trade's first write). `retryAfterMs` is when the rolling window frees enough room; none when the
 * trade alone is over the maximum.
 */
export function limitExceeded(
  check: LimitCheck,
  used: LimitUse,
  add: LimitUse,
  retryAfterMs?: number,
): SpendingLimitError {
  const { limit } = check;
  const parts: string[] = [];
  if (limit.maxUsd !== undefined)
    parts.push(`${usdText(used.usd)} of ${usdText(limit.maxUsd)} USD used, this trade counts ${usdText(add.usd)} USD`);
  if (limit.maxTrades !== undefined) parts.push(`${used.trades} of ${limit.maxTrades} trades used`);
  const wait =
    retryAfterMs === undefined
      ? aloneOver(limit, add)
        ? "; the trade alone is over the maximum"
        : ""
      : `; the window frees enough room in ${Math.ceil(retryAfterMs / 1000)} s`;
  return new SpendingLimitError(
    `spending limit "${limit.name}" (${scopeText(check)}, rolling ${limit.window}): ${parts.join(", ")}${wait}`,
    limit.name,
    retryAfterMs,
  );
}

/**
 * Whether the caller may read the audit log: a key with the admin role. Without an access file no
 * key holds a role, so none may: every key would otherwise read every other key's decisions.
 * @throws PermissionDeniedError naming the key and the role it needs
 */
export function authorizeAuditRead(policy: AccessPolicy | undefined, caller: Caller): void {
  const key = caller.key;
  if (policy === undefined || key === undefined)
    throw new PermissionDeniedError(
      "the audit log is read with an admin key of the access file, and this service runs without ACCESS_FILE",
    );
  if (!key.roles.has("admin"))
    throw new PermissionDeniedError(
      `api key "${key.name}" may not read the audit log: its roles are ${rolesText(key)} (it needs admin)`,
    );
}
