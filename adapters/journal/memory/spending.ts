/**
 * The memory journal's spending limits: each trade's spend, counted by reading every spend in the
 * window (a test's journal holds few), in the same synchronous step as the trade's write, which is
 * what a transaction is in memory.
 */
import {
  coinToLimitUsd,
  type LimitCheck,
  type LimitPer,
  type SpendingLeader,
  type LimitUse,
  limitExceeded,
  overBy,
  scopeValue,
  type Spend,
  type Spending,
  type SpendingLimitError,
} from "../../../core/index.js";
import { retryAfterMs, spends } from "../spending.js";
import type { MemoryStore } from "./store.js";

interface StoredSpend extends Spend {
  at: number;
}

export class MemorySpending {
  readonly #store: MemoryStore;
  readonly #spends = new Map<string, StoredSpend>();

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  /** The refusal of `spend` by the first check with no room for it (`replacing` its own earlier count), else undefined. */
  refusal(spending: Spending, now: number, replacing?: string): SpendingLimitError | undefined {
    const add: LimitUse = { usd: spending.spend.usd, trades: replacing === undefined ? 1 : 0 };
    for (const check of spending.checks) {
      const inWindow = this.#inWindow(check, now, replacing);
      const used = inWindow.reduce((sum, s) => ({ usd: sum.usd + s.usd, trades: sum.trades + 1 }), {
        usd: 0n,
        trades: 0,
      });
      const over = overBy(check.limit, used, add);
      if (over !== undefined)
        return limitExceeded(check, used, add, retryAfterMs(inWindow, over, check.limit.windowMs, now));
    }
    return undefined;
  }

  record(id: string, spend: Spend, at: number): void {
    this.#spends.set(id, { ...spend, at });
  }

  /** Counts the trade `id` at `usd` instead, when every check has room. */
  respend(id: string, usd: bigint, checks: readonly LimitCheck[]): void {
    const stored = this.#spends.get(id);
    if (stored === undefined) return;
    const refusal = this.refusal({ spend: { ...stored, usd }, checks }, Date.now(), id);
    if (refusal !== undefined) throw refusal;
    stored.usd = usd;
  }

  /**
   * A sell's receipt recorded: it counts what the receipt says it paid (`paidOut`, the coin's base
   * units), in place of its estimate. Nothing for a trade without a payout to count (a buy, a
   * remittance, a receipt without the swap's event).
   */
  paid(id: string, paidOut: bigint | null): void {
    const stored = this.#spends.get(id);
    if (stored?.payoutDecimals === undefined || paidOut === null) return;
    stored.usd = coinToLimitUsd(paidOut, stored.payoutDecimals);
  }

  use(check: LimitCheck, now: number): LimitUse {
    const inWindow = this.#inWindow(check, now, undefined);
    return { usd: inWindow.reduce((sum, s) => sum + s.usd, 0n), trades: inWindow.length };
  }

  /** The scopes of (per, window) that used the most now, exact. */
  leaders(per: LimitPer, windowMs: number, by: "usd" | "trades", count: number, now: number): SpendingLeader[] {
    const byValue = new Map<string, SpendingLeader>();
    for (const [id, spend] of this.#spends) {
      const trade = this.#store.trades.get(id);
      if (spend.at <= now - windowMs || trade === undefined || !spends(trade.status)) continue;
      const value = scopeValue(per, spend);
      const leader = byValue.get(value) ?? { value, usd: 0n, trades: 0 };
      byValue.set(value, { value, usd: leader.usd + spend.usd, trades: leader.trades + 1 });
    }
    const order = (a: SpendingLeader, b: SpendingLeader) =>
      by === "usd" ? (a.usd === b.usd ? 0 : a.usd > b.usd ? -1 : 1) : b.trades - a.trades;
    return [...byValue.values()].sort(order).slice(0, count);
  }

  forget(id: string): void {
    this.#spends.delete(id);
  }

  /** The spends `check` counts now, oldest first, but `except`'s. */
  #inWindow(check: LimitCheck, now: number, except: string | undefined): StoredSpend[] {
    const from = now - check.limit.windowMs;
    const counted: StoredSpend[] = [];
    for (const [id, spend] of this.#spends) {
      if (id === except || spend.at <= from || scopeValue(check.limit.per, spend) !== check.value) continue;
      const trade = this.#store.trades.get(id);
      if (trade !== undefined && spends(trade.status)) counted.push(spend);
    }
    return counted.sort((a, b) => a.at - b.at);
  }
}
