/**
 * The SQLite journal's history reads (TradeJournal.page and summary, trades.ts): which rows a caller
 * sees in a range of time, and the summary's totals, summed in JS with BigInt (SQLite's sum() is
 * not exact beyond 2^63).
 */
import type { SQLInputValue, SQLOutputValue } from "node:sqlite";

import {
  TRADE_STATUSES,
  type TradePageQuery,
  type TradeStatus,
  type TradeTotals,
  type Visibility,
} from "../../../core/index.js";
import { statusIn } from "../transitions.js";

/** The conditions on `trades` for the trades the caller sees created in [since, until), their values pushed on `values`. */
export function historyWhere(
  query: { visible: Visibility; since?: Date | undefined; until?: Date | undefined },
  values: SQLInputValue[],
): string[] {
  const where = [visibleWhere(query.visible, values)];
  if (query.since !== undefined) {
    where.push("created_at >= ?");
    values.push(query.since.getTime());
  }
  if (query.until !== undefined) {
    where.push("created_at < ?");
    values.push(query.until.getTime());
  }
  return where;
}

/** The conditions of a page of the history (TradeJournal.page): who sees, the range, the filters, the cursor. */
export function pageWhere(query: TradePageQuery, values: SQLInputValue[]): string[] {
  const where = historyWhere(query, values);
  if (query.status !== undefined) {
    // Written as a literal, as the partial indexes on the status are (the held trades'): the
    // planner matches only that form. A status of the model only: nothing else is written so.
    if (!(TRADE_STATUSES as readonly string[]).includes(query.status))
      throw new Error(`not a trade status: ${query.status}`);
    where.push(statusIn("status", [query.status]));
  }
  if (query.kind !== undefined) {
    where.push("kind = ?");
    values.push(query.kind);
  }
  if (query.after !== undefined) {
    // Milliseconds here: a position's microseconds are always whole milliseconds of this journal's.
    const at = Number(query.after.createdAtUs / 1000n);
    where.push("created_at <= ? AND (created_at < ? OR id < ?)");
    values.push(at, at, query.after.id);
  }
  return where;
}

/**
 * The condition on `trades` for the trades a caller sees, its values pushed on `values`: its own
 * scope alone when it names no key (the history indexes' leading column), else by name or scope.
 */
export function visibleWhere(visible: Visibility, values: SQLInputValue[]): string {
  if (visible === "all") return "1";
  if (visible.names.length === 0 && visible.ids.length === 1) {
    values.push(visible.ids[0]!);
    return "scope = ?";
  }
  values.push(...visible.ids, ...visible.names);
  const marks = (n: number) => Array.from({ length: n }, () => "?").join(", ");
  return `(scope IN (${marks(visible.ids.length)}) OR key_name IN (${marks(visible.names.length)}))`;
}

/** Adds a batch of the summary's rows (kind, stable, status, executed, amounts, gas) to its groups. */
export function addToGroups(groups: Map<string, TradeTotals>, rows: Record<string, SQLOutputValue>[]): void {
  for (const row of rows) {
    const kind = row.kind as TradeTotals["kind"];
    const stable = String(row.stable ?? "");
    const key = `${kind}\u0000${stable}`;
    let group = groups.get(key);
    if (group === undefined) {
      group = {
        kind,
        stable,
        count: 0,
        executed: 0,
        amountIn: 0n,
        amountOut: 0n,
        gasWei: 0n,
        gasUsd: 0n,
        statuses: {},
      };
      groups.set(key, group);
    }
    group.count += 1;
    const status = row.status as TradeStatus;
    group.statuses[status] = (group.statuses[status] ?? 0) + 1;
    if (Number(row.executed) !== 1) continue;
    group.executed += 1;
    group.amountIn += BigInt((row.amount_in as string | null) ?? 0);
    group.amountOut += BigInt((row.amount_out as string | null) ?? 0);
    group.gasWei += BigInt((row.gas_wei as string | null) ?? 0);
    // One executed trade without its gas in USD makes the group's unknown (TradeTotals.gasUsd).
    const gasUsd = row.gas_usd as string | null;
    group.gasUsd = group.gasUsd === null || gasUsd === null ? null : group.gasUsd + BigInt(gasUsd);
  }
}

/** The groups by kind, then stable coin. */
export function sortedGroups(groups: Map<string, TradeTotals>): TradeTotals[] {
  return [...groups.values()].sort((a, b) =>
    a.kind === b.kind ? (a.stable < b.stable ? -1 : 1) : a.kind < b.kind ? -1 : 1,
  );
}
