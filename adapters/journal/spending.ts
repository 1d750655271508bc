/**
 * What the three journals share in counting spending limits (core/access, TradeJournal.open with
 * `spending`): which states count, and when a full limit's rolling window frees enough room.
 *
 * A spend counts in a limit's window while `at > now - window`, so it leaves the window at
 * `at + window`: a limit over by some amount has room again once the oldest spends that add up to
 * at least that much have left.
 */
import { type LimitUse, SPENDING_STATUSES, type TradeStatus } from "../../core/index.js";

/** Whether a trade in this state counts against the limits. */
export function spends(status: TradeStatus): boolean {
  return (SPENDING_STATUSES as readonly TradeStatus[]).includes(status);
}

/**
 * How far behind a counter may be before a trade ages it (takes out the spends that left its
 * window), when it has room for the trade anyway: a counter that has not aged counts too much,
 * never too little, and a busy limit is then aged about once in this long instead of by every
 * trade (postgres/spend-admit.ts, sqlite/spending.ts).
 */
export const AGE_AFTER_MS = 1_000;

/** The states that count, as SQL text: `'accepted', 'signed', …`. */
export const SPENDING_STATUSES_SQL = SPENDING_STATUSES.map((status) => `'${status}'`).join(", ");

/**
 * The states that counted when the spending limits' migration was written, before the approvals
 * added theirs: what that migration's triggers were made with. The approvals' migration makes them
 * again with SPENDING_STATUSES_SQL.
 */
export const SPENDING_STATUSES_BEFORE_APPROVALS_SQL = "'accepted', 'signed', 'submitted', 'mined', 'confirmed'";

/**
 * When the window frees room for what a limit is over by: the time the oldest spend that brings
 * the freed amount (and count) to at least `over` leaves it, in ms after `now`. `inWindow` is the
 * spends counted now, oldest first; undefined when they cannot free enough (the trade alone is over).
 */
export function retryAfterMs(
  inWindow: Iterable<{ at: number; usd: bigint }>,
  over: LimitUse,
  windowMs: number,
  now: number,
): number | undefined {
  let usd = 0n;
  let trades = 0;
  for (const spend of inWindow) {
    usd += spend.usd;
    trades += 1;
    if (usd >= over.usd && trades >= over.trades) return Math.max(1, spend.at + windowMs - now);
  }
  return undefined;
}
