/**
 * The SQLite journal's spending limits (core/access; TradeJournal.open with `spending`): the same
 * tables and steps as PostgreSQL's (../postgres/spending.ts, whose header explains them), run in
 * this process. The file is this process's alone and its statements are synchronous, so a check
 * and the trade's write are one step, with nothing between them. Amounts are decimal text summed
 * with BigInt (SQLite's integers end at 2^63, a few USD at 18 decimals); the triggers that move a
 * spend out of (or back into) the counters when its trade stops (or starts again) counting add
 * them with `spend_add`, a function this connection defines (registerSpendFunctions).
 *
 * A counter created here is never short of a spend in flight beside it, as PostgreSQL's could be
 * without its scope locks (../postgres/spend-locks.ts): every write goes through this one
 * connection, one at a time, so a counter's first sum reads every spend written before it
 * (committed, or in the group commit's open transaction, which this connection sees), and every
 * spend written after it finds the counter and adds to it. A group that rolls back takes the
 * counter and the spends with it. No other process writes the file (locking_mode=EXCLUSIVE).
 */
import type { DatabaseSync, SQLOutputValue, StatementSync } from "node:sqlite";

import {
  coinToLimitUsd,
  type LimitCheck,
  type LimitPer,
  type LimitUse,
  LIMIT_PERS,
  limitExceeded,
  overBy,
  type Spend,
} from "../../../core/index.js";
import { AGE_AFTER_MS, retryAfterMs, SPENDING_STATUSES_BEFORE_APPROVALS_SQL } from "../spending.js";

/** The counters of the spend `s`'s scopes, on `spend_counters`. */
const SCOPES_OF = (s: string) =>
  `((per = 'key' AND value = ${s}.key_name) OR (per = 'wallet' AND value = ${s}.wallet)
     OR (per = 'destinatary' AND value = ${s}.destinatary) OR per = 'all')`;
/** Whether `status` is among `counting` (SQL text of the states that count). */
const COUNTS = (status: string, counting: string) => `(${status} IN (${counting}))`;

/**
 * The triggers that move a spend out of (or back into) the counters when its trade stops (or
 * starts again) counting, or is deleted: `counting` is the SQL text of the states that count.
 */
export const spendsTriggers = (
  counting: string,
) => `CREATE TRIGGER trades_spends_recount AFTER UPDATE OF status ON trades
  WHEN ${COUNTS("OLD.status", counting)} <> ${COUNTS("NEW.status", counting)}
  BEGIN
    UPDATE spend_counters SET
      usd = spend_add(usd, (SELECT CASE WHEN ${COUNTS("NEW.status", counting)} THEN s.usd ELSE '-' || s.usd END FROM spends s WHERE s.trade_id = NEW.id)),
      trades = trades + CASE WHEN ${COUNTS("NEW.status", counting)} THEN 1 ELSE -1 END
    WHERE EXISTS (SELECT 1 FROM spends s WHERE s.trade_id = NEW.id AND s.counts <> ${COUNTS("NEW.status", counting)}
      AND ${SCOPES_OF("s")} AND through_ms < s.at_ms);
    UPDATE spends SET counts = ${COUNTS("NEW.status", counting)} WHERE trade_id = NEW.id;
  END;
  CREATE TRIGGER trades_spends_forget AFTER DELETE ON trades
  BEGIN
    UPDATE spend_counters SET
      usd = spend_add(usd, '-' || (SELECT s.usd FROM spends s WHERE s.trade_id = OLD.id)), trades = trades - 1
    WHERE EXISTS (SELECT 1 FROM spends s WHERE s.trade_id = OLD.id AND s.counts AND ${SCOPES_OF("s")} AND through_ms < s.at_ms);
    DELETE FROM spends WHERE trade_id = OLD.id;
  END;`;

/** Migration 11: the key's name on each trade, the spends and their counters, the recount triggers. */
export const SPENDING_MIGRATION = `
  ALTER TABLE trades ADD COLUMN key_name TEXT;
  CREATE INDEX trades_history_name ON trades (key_name, created_at DESC, id DESC) WHERE key_name IS NOT NULL;
  CREATE INDEX trades_history_all ON trades (created_at DESC, id DESC);
  CREATE TABLE spends (
    trade_id TEXT PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    usd TEXT NOT NULL,                    -- USD × 10^18, decimal text
    key_name TEXT NOT NULL,
    wallet TEXT NOT NULL,
    destinatary TEXT NOT NULL,
    counts INTEGER NOT NULL DEFAULT 1
  );
  CREATE INDEX spends_key ON spends (key_name, at_ms);
  CREATE INDEX spends_wallet ON spends (wallet, at_ms);
  CREATE INDEX spends_destinatary ON spends (destinatary, at_ms);
  CREATE INDEX spends_at ON spends (at_ms);
  CREATE TABLE spend_counters (
    per TEXT NOT NULL,
    value TEXT NOT NULL,
    window_ms INTEGER NOT NULL,
    usd TEXT NOT NULL,
    trades INTEGER NOT NULL,
    through_ms INTEGER NOT NULL,
    PRIMARY KEY (per, value, window_ms)
  );
  ${spendsTriggers(SPENDING_STATUSES_BEFORE_APPROVALS_SQL)}`;

/**
 * Migration 13: a sell's stable-coin decimals with its spend, so that once its receipt is recorded
 * it counts what it paid (SqliteSpending.paid), not what it was proven at.
 */
export const SPEND_PAYOUT_MIGRATION =
  "ALTER TABLE spends ADD COLUMN payout_decimals INTEGER;  -- a sell's coin; else NULL";

/** Defines `spend_add(a, b)` on the connection: the sum of two decimal texts, exact. */
export function registerSpendFunctions(db: DatabaseSync): void {
  db.function("spend_add", { deterministic: true }, (a, b) => (BigInt(String(a)) + BigInt(String(b))).toString());
}

/** The spends table's column for each `per` (all: none). */
const COLUMN: Record<LimitPer, string | null> = {
  key: "key_name",
  wallet: "wallet",
  destinatary: "destinatary",
  all: null,
};

/**
 * The sum of `usd` (decimal text, USD × 10^18) done by SQLite, exactly: its integers end at 2^63
 * (9.2 USD at 18 decimals), so the text is cut into 9-digit parts, each summed apart (a part is
 * under 10^9: a billion spends sum under 10^18), and joined as p0 + p1·10^9 + p2·10^18 with
 * BigInt. p2 is the whole USD (a spend is never negative): its sum overflows only past 9.2 × 10^18
 * USD. Three times as fast as reading each row into BigInt (1.4 s against 5 s for a million spends
 * here), which matters when a new limit's counter sums a window of a million spends in one step.
 */
const SUM_IN_PARTS = [
  "coalesce(sum(CAST(substr(usd, -9) AS INTEGER)), 0) AS p0",
  "coalesce(sum(CAST(substr(substr(usd, 1, max(length(usd) - 9, 0)), -9) AS INTEGER)), 0) AS p1",
  "coalesce(sum(CAST(substr(usd, 1, max(length(usd) - 18, 0)) AS INTEGER)), 0) AS p2",
].join(", ");

function readingBigInts(statement: StatementSync): StatementSync {
  statement.setReadBigInts(true);
  return statement;
}

function perStatements(db: DatabaseSync, per: LimitPer) {
  const scope = COLUMN[per] === null ? "? IS NOT NULL" : `${COLUMN[per]} = ?`;
  return {
    /** The sum and count of the counted spends of a scope accepted in (from, to], in parts (SUM_IN_PARTS). */
    between: readingBigInts(
      db.prepare(
        `SELECT ${SUM_IN_PARTS}, count(*) AS n FROM spends WHERE ${scope} AND at_ms > ? AND at_ms <= ? AND counts`,
      ),
    ),
    /** The counted spends of a scope after `from`, oldest first, but one trade's. */
    after: db.prepare(
      `SELECT at_ms, usd FROM spends WHERE ${scope} AND at_ms > ? AND counts AND trade_id <> ? ORDER BY at_ms`,
    ),
  };
}

function statements(db: DatabaseSync) {
  return {
    per: Object.fromEntries(LIMIT_PERS.map((per) => [per, perStatements(db, per)])) as Record<
      LimitPer,
      ReturnType<typeof perStatements>
    >,
    counter: db.prepare(
      "SELECT usd, trades, through_ms FROM spend_counters WHERE per = ? AND value = ? AND window_ms = ?",
    ),
    insertCounter: db.prepare(
      "INSERT INTO spend_counters (per, value, window_ms, usd, trades, through_ms) VALUES (?, ?, ?, ?, ?, ?)",
    ),
    setCounter: db.prepare(
      "UPDATE spend_counters SET usd = ?, trades = ?, through_ms = ? WHERE per = ? AND value = ? AND window_ms = ?",
    ),
    spend: db.prepare("SELECT * FROM spends WHERE trade_id = ?"),
    insertSpend: db.prepare(
      "INSERT INTO spends (trade_id, at_ms, usd, key_name, wallet, destinatary, payout_decimals) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    addToCounters: db.prepare(
      `UPDATE spend_counters SET usd = spend_add(usd, ?), trades = trades + ?
       WHERE ((per = 'key' AND value = ?) OR (per = 'wallet' AND value = ?) OR (per = 'destinatary' AND value = ?) OR per = 'all')
         AND through_ms < ?`,
    ),
    setSpendUsd: db.prepare("UPDATE spends SET usd = ? WHERE trade_id = ?"),
  };
}

interface Counter {
  usd: bigint;
  trades: number;
  through: number;
}

export class SqliteSpending {
  readonly #sql: ReturnType<typeof statements>;

  constructor(db: DatabaseSync) {
    this.#sql = statements(db);
  }

  /**
   * Admits the new spend of trade `tradeId`, recorded at `now`, or a new amount for the spend it
   * has. Writes nothing but counter upkeep (exact either way) before every check has passed, so
   * that a refusal, thrown inside the group commit's transaction, leaves no trace of the trade.
   * @throws SpendingLimitError when a check has no room
   */
  admit(tradeId: string, spend: Spend | { usd: bigint }, checks: readonly LimitCheck[], now: number): void {
    const isNew = "key" in spend;
    const own = isNew ? undefined : this.#sql.spend.get(tradeId);
    if (!isNew && own === undefined) return;
    const scopes: Pick<Spend, "key" | "wallet" | "destinatary"> = isNew
      ? spend
      : { key: String(own!.key_name), wallet: String(own!.wallet), destinatary: String(own!.destinatary) };
    for (const check of checks) {
      let counter = this.#counter(check, now, AGE_AFTER_MS);
      let outcome = this.#outcome(check, counter, own, spend.usd);
      // Not aged, the counter may count spends that have left: no room there is checked again, aged.
      if (outcome?.over !== undefined && counter.through < now - check.limit.windowMs) {
        counter = this.#counter(check, now, 0);
        outcome = this.#outcome(check, counter, own, spend.usd);
      }
      if (outcome?.over === undefined) continue;
      const inWindow = this.#sql.per[check.limit.per].after.iterate(check.value, counter.through, tradeId);
      const spends = (function* () {
        for (const row of inWindow) yield { at: Number(row.at_ms), usd: BigInt(String(row.usd)) };
      })();
      const add = { usd: spend.usd, trades: 1 };
      throw limitExceeded(check, outcome.used, add, retryAfterMs(spends, outcome.over, check.limit.windowMs, now));
    }
    if (isNew) {
      this.#sql.insertSpend.run(
        tradeId,
        now,
        spend.usd.toString(),
        spend.key,
        spend.wallet,
        spend.destinatary,
        spend.payoutDecimals ?? null,
      );
      this.#sql.addToCounters.run(spend.usd.toString(), 1, scopes.key, scopes.wallet, scopes.destinatary, now);
    } else {
      if (Number(own!.counts) === 1) {
        const delta = spend.usd - BigInt(String(own!.usd));
        this.#sql.addToCounters.run(
          delta.toString(),
          0,
          scopes.key,
          scopes.wallet,
          scopes.destinatary,
          Number(own!.at_ms),
        );
      }
      this.#sql.setSpendUsd.run(spend.usd.toString(), tradeId);
    }
  }

  /**
   * A sell's receipt recorded (after its trade's status, whose trigger has moved its spend in or
   * out of the counters): it counts what the receipt says it paid (`paidOut`, the coin's base
   * units, decimal text) in place of its estimate, in the counters whose window it is still in.
   * Nothing for a spend without a payout to count (a buy, a remittance, no swap event).
   */
  paid(tradeId: string, paidOut: string | null): void {
    const own = this.#sql.spend.get(tradeId);
    if (own === undefined || own.payout_decimals === null || paidOut === null) return;
    const usd = coinToLimitUsd(BigInt(paidOut), Number(own.payout_decimals));
    const delta = usd - BigInt(String(own.usd));
    if (delta === 0n) return;
    if (Number(own.counts) === 1) {
      const scopes = [String(own.key_name), String(own.wallet), String(own.destinatary)] as const;
      this.#sql.addToCounters.run(delta.toString(), 0, ...scopes, Number(own.at_ms));
    }
    this.#sql.setSpendUsd.run(usd.toString(), tradeId);
  }

  /** What the check's limit has used in its window at `now` (its counter, brought up to date). */
  use(check: LimitCheck, now: number): LimitUse {
    const { usd, trades } = this.#counter(check, now, 0);
    return { usd, trades };
  }

  /**
   * What the check's limit has used but `own`'s old amount (a new amount for a spend is checked in
   * its place), and what the trade puts it over by; undefined where `own` no longer counts.
   */
  #outcome(
    check: LimitCheck,
    counter: Counter,
    own: Record<string, SQLOutputValue> | undefined,
    usd: bigint,
  ): { used: LimitUse; over: LimitUse | undefined } | undefined {
    let used: LimitUse = { usd: counter.usd, trades: counter.trades };
    if (own !== undefined) {
      if (Number(own.counts) !== 1 || Number(own.at_ms) <= counter.through) return undefined;
      used = { usd: used.usd - BigInt(String(own.usd)), trades: used.trades - 1 };
    }
    return { used, over: overBy(check.limit, used, { usd, trades: 1 }) };
  }

  /**
   * The check's counter, created from the spends in its window if new, with the spends that left
   * the window taken out when it is more than `slackMs` behind (AGE_AFTER_MS, ../spending.ts).
   */
  #counter(check: LimitCheck, now: number, slackMs: number): Counter {
    const { per, windowMs } = check.limit;
    const cutoff = now - windowMs;
    const row = this.#sql.counter.get(per, check.value, windowMs);
    if (row === undefined) {
      const inWindow = this.#sum(this.#sql.per[per].between, check.value, cutoff, Number.MAX_SAFE_INTEGER);
      this.#sql.insertCounter.run(per, check.value, windowMs, inWindow.usd.toString(), inWindow.trades, cutoff);
      return { ...inWindow, through: cutoff };
    }
    const counter = { usd: BigInt(String(row.usd)), trades: Number(row.trades), through: Number(row.through_ms) };
    if (counter.through >= cutoff - slackMs) return counter;
    const aged = this.#sum(this.#sql.per[per].between, check.value, counter.through, cutoff);
    const fresh = { usd: counter.usd - aged.usd, trades: counter.trades - aged.trades, through: cutoff };
    this.#sql.setCounter.run(fresh.usd.toString(), fresh.trades, cutoff, per, check.value, windowMs);
    return fresh;
  }

  #sum(statement: StatementSync, value: string, from: number, to: number): LimitUse {
    const row = statement.get(value, from, to) as { p0: bigint; p1: bigint; p2: bigint; n: bigint };
    return { usd: row.p0 + row.p1 * 10n ** 9n + row.p2 * 10n ** 18n, trades: Number(row.n) };
  }
}
