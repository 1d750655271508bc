/**
 * The PostgreSQL journal's spending limits (core/access; TradeJournal.open with `spending`).
 *
 * Each trade counted against a limit has a row in `spends`: when it was accepted (the database's
 * clock, so every instance agrees), what it counts in USD, and whom it counts for. A limit's use
 * is not summed over its window on each trade (a million trades in a day would make every trade
 * pay for them): each (per, value, window) has a counter in `spend_counters`, with what is
 * counted and the time up to which spends have left its window (`through_ms`). A trade:
 *   0. takes the advisory locks of its scopes, exclusive where it creates a counter, so that a
 *      counter's first sum holds every spend in flight beside it (./spend-locks.ts, which says why);
 *   1. creates the counters it needs that do not exist yet, from the spends in their windows;
 *   2. locks every counter of its key, wallet, destinatary and the service, in one order
 *      (per, value, window): the lock per limit scope, so two instances never both take the last
 *      room, and never deadlock;
 *   3. ages each counter it checks that is more than AGE_AFTER_MS behind, or that would have no
 *      room for the trade without: takes out the spends that left the window since `through_ms`
 *      (an index range; spend-admit.ts says why a counter that has not aged decides exactly);
 *   4. checks that what is used plus the trade is at most each maximum; else answers which limit
 *      refused, what it had used, and when the window frees enough room;
 *   5. records its spend and adds it to every counter of its scopes.
 * All of it is one call (spend_admit), in the statement that inserts the trade (insertCounted,
 * spend_open) or in the transaction of a sell's new amount (admitSpend): a refusal rolls the
 * trade back with it. A trade that stops counting (failed, expired, deleted) or counts again
 * (a receipt after all) moves its spend out of, or back into, the counters it has not left, by a
 * trigger on `trades`, in the same transaction as that change; a sell whose receipt is recorded
 * counts what it paid (spend_paid, in the statement that records it).
 */
import type pg from "pg";

import {
  type AuditEntry,
  type LimitCheck,
  type LimitUse,
  limitExceeded,
  type Spending,
  type SpendingLimitError,
} from "../../../core/index.js";
import { SPENDING_STATUSES_BEFORE_APPROVALS_SQL } from "../spending.js";
import { auditAppendCall } from "./audit.js";
import { SPEND_REFUSED } from "./spend-admit.js";

/** The counters of the spend `s`'s scopes. */
const SCOPES_OF = (s: string) =>
  `((per = 'key' AND value = ${s}.key_name) OR (per = 'wallet' AND value = ${s}.wallet)
     OR (per = 'destinatary' AND value = ${s}.destinatary) OR per = 'all')`;

/**
 * The function that moves a trade's spend out of (or back into) the counters when it stops (or
 * starts again) counting, or is deleted, and the trigger on a change of status: `counting` is the
 * SQL text of the states that count.
 */
export const spendsRecount = (create: "CREATE" | "CREATE OR REPLACE", counting: string) => `
  -- A trade that stops counting, or counts again, or is deleted: its spend leaves, or rejoins, the
  -- counters whose window it has not left; under the same locks, in the same order, as spend_admit.
  ${create} FUNCTION spends_recount() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    tid TEXT;
    now_counts BOOLEAN;
    s spends%ROWTYPE;
  BEGIN
    IF TG_OP = 'DELETE' THEN
      tid := OLD.id;
      now_counts := false;
    ELSE
      tid := NEW.id;
      now_counts := NEW.status IN (${counting});
    END IF;
    SELECT * INTO s FROM spends WHERE trade_id = tid;
    IF NOT FOUND THEN RETURN NULL; END IF;
    PERFORM 1 FROM spend_counters WHERE ${SCOPES_OF("s")} ORDER BY per, value, window_ms FOR UPDATE;
    SELECT * INTO s FROM spends WHERE trade_id = tid;
    IF s.counts <> now_counts THEN
      UPDATE spend_counters c SET usd = c.usd + CASE WHEN now_counts THEN s.usd ELSE -s.usd END,
          trades = c.trades + CASE WHEN now_counts THEN 1 ELSE -1 END
        WHERE ${SCOPES_OF("s")} AND c.through_ms < s.at_ms;
      UPDATE spends SET counts = now_counts WHERE trade_id = tid;
    END IF;
    IF TG_OP = 'DELETE' THEN DELETE FROM spends WHERE trade_id = tid; END IF;
    RETURN NULL;
  END $$;
  ${spendsRecountTrigger(counting)}`;

/** The trigger that calls spends_recount() when a trade's status moves into or out of `counting`. */
export const spendsRecountTrigger = (counting: string) => `
  CREATE TRIGGER trades_spends_recount AFTER UPDATE OF status ON trades FOR EACH ROW
    WHEN ((OLD.status IN (${counting})) IS DISTINCT FROM (NEW.status IN (${counting})))
    EXECUTE FUNCTION spends_recount();`;

/** Migration 10: the key's name on each trade, the spends and their counters, and the functions above. */
export const SPENDING_MIGRATION = `
  ALTER TABLE trades ADD COLUMN key_name TEXT;   -- the access file's name of the key that sent it
  CREATE INDEX trades_history_name ON trades (key_name, created_at DESC, id DESC) WHERE key_name IS NOT NULL;
  CREATE INDEX trades_history_all ON trades (created_at DESC, id DESC);
  CREATE TABLE spends (
    trade_id TEXT PRIMARY KEY,
    at_ms BIGINT NOT NULL,                  -- accepted, ms since the epoch (the database's clock)
    usd NUMERIC(78, 0) NOT NULL,            -- USD × 10^18 (LIMIT_USD_DECIMALS)
    key_name TEXT NOT NULL,
    wallet TEXT NOT NULL,                   -- lower-case
    destinatary TEXT NOT NULL,              -- lower-case
    counts BOOLEAN NOT NULL DEFAULT true    -- its trade may pay or has paid
  );
  CREATE INDEX spends_key ON spends (key_name, at_ms);
  CREATE INDEX spends_wallet ON spends (wallet, at_ms);
  CREATE INDEX spends_destinatary ON spends (destinatary, at_ms);
  CREATE INDEX spends_at ON spends (at_ms);
  CREATE TABLE spend_counters (
    per TEXT NOT NULL,
    value TEXT NOT NULL,
    window_ms BIGINT NOT NULL,
    usd NUMERIC(78, 0) NOT NULL,
    trades BIGINT NOT NULL,
    through_ms BIGINT NOT NULL,             -- spends at or before this have left the window
    PRIMARY KEY (per, value, window_ms)
  );

  -- The counted spends of one scope accepted in (p_from, p_to].
  CREATE FUNCTION spend_sum(p_per TEXT, p_value TEXT, p_from BIGINT, p_to BIGINT, OUT usd NUMERIC, OUT n BIGINT)
  LANGUAGE plpgsql STABLE AS $$
  BEGIN
    IF p_per = 'key' THEN
      SELECT coalesce(sum(s.usd), 0), count(*) INTO usd, n FROM spends s
        WHERE s.key_name = p_value AND s.at_ms > p_from AND s.at_ms <= p_to AND s.counts;
    ELSIF p_per = 'wallet' THEN
      SELECT coalesce(sum(s.usd), 0), count(*) INTO usd, n FROM spends s
        WHERE s.wallet = p_value AND s.at_ms > p_from AND s.at_ms <= p_to AND s.counts;
    ELSIF p_per = 'destinatary' THEN
      SELECT coalesce(sum(s.usd), 0), count(*) INTO usd, n FROM spends s
        WHERE s.destinatary = p_value AND s.at_ms > p_from AND s.at_ms <= p_to AND s.counts;
    ELSE
      SELECT coalesce(sum(s.usd), 0), count(*) INTO usd, n FROM spends s
        WHERE s.at_ms > p_from AND s.at_ms <= p_to AND s.counts;
    END IF;
  END $$;

  -- When the oldest counted spends of a scope after p_from (but p_except's) add up to p_usd and
  -- p_n: the at_ms of the one that brings them there. Read on a refusal only.
  CREATE FUNCTION spend_frees_at(p_per TEXT, p_value TEXT, p_from BIGINT, p_usd NUMERIC, p_n BIGINT, p_except TEXT)
  RETURNS BIGINT LANGUAGE plpgsql STABLE AS $$
  DECLARE
    r RECORD;
    total NUMERIC := 0;
    k BIGINT := 0;
    scope TEXT := CASE p_per WHEN 'key' THEN 'key_name = $1' WHEN 'wallet' THEN 'wallet = $1'
                             WHEN 'destinatary' THEN 'destinatary = $1' ELSE '$1 IS NOT NULL' END;
  BEGIN
    FOR r IN EXECUTE 'SELECT at_ms, usd FROM spends WHERE ' || scope ||
        ' AND at_ms > $2 AND counts AND trade_id <> $3 ORDER BY at_ms' USING p_value, p_from, p_except LOOP
      total := total + r.usd;
      k := k + 1;
      IF total >= p_usd AND k >= p_n THEN RETURN r.at_ms; END IF;
    END LOOP;
    RETURN NULL;
  END $$;

  -- Admits a new spend (p_new) or a new amount for a trade's spend, against the checks given as
  -- arrays (one element per limit). refused = 0: admitted and recorded; else the 1-based index of
  -- the check that refused it, what that limit had used, and when its window frees enough room.
  CREATE FUNCTION spend_admit(p_trade TEXT, p_new BOOLEAN, p_usd NUMERIC, p_key TEXT, p_wallet TEXT, p_dest TEXT,
      p_pers TEXT[], p_values TEXT[], p_windows BIGINT[], p_max_usd NUMERIC[], p_max_trades BIGINT[],
      OUT refused INT, OUT used_usd NUMERIC, OUT used_trades BIGINT, OUT retry_after_ms BIGINT)
  LANGUAGE plpgsql AS $$
  DECLARE
    now_ms BIGINT := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    checks INT := coalesce(array_length(p_pers, 1), 0);
    own spends%ROWTYPE;
    c RECORD;
    aged RECORD;
    cutoff BIGINT;
    base_usd NUMERIC;
    base_n BIGINT;
    over_usd NUMERIC;
    over_n BIGINT;
    frees BIGINT;
  BEGIN
    refused := 0;
    IF NOT p_new THEN
      SELECT * INTO own FROM spends WHERE trade_id = p_trade;
      IF NOT FOUND THEN RETURN; END IF;
      p_key := own.key_name; p_wallet := own.wallet; p_dest := own.destinatary;
    END IF;
    FOR i IN 1..checks LOOP
      INSERT INTO spend_counters (per, value, window_ms, usd, trades, through_ms)
        SELECT p_pers[i], p_values[i], p_windows[i], b.usd, b.n, now_ms - p_windows[i]
        FROM spend_sum(p_pers[i], p_values[i], now_ms - p_windows[i], 9223372036854775807) b
        ON CONFLICT DO NOTHING;
    END LOOP;
    PERFORM 1 FROM spend_counters
      WHERE (per = 'key' AND value = p_key) OR (per = 'wallet' AND value = p_wallet)
         OR (per = 'destinatary' AND value = p_dest) OR per = 'all'
      ORDER BY per, value, window_ms FOR UPDATE;
    IF NOT p_new THEN SELECT * INTO own FROM spends WHERE trade_id = p_trade; END IF;
    FOR i IN 1..checks LOOP
      cutoff := now_ms - p_windows[i];
      SELECT * INTO c FROM spend_counters WHERE per = p_pers[i] AND value = p_values[i] AND window_ms = p_windows[i];
      IF c.through_ms < cutoff THEN
        SELECT * INTO aged FROM spend_sum(p_pers[i], p_values[i], c.through_ms, cutoff);
        UPDATE spend_counters SET usd = usd - aged.usd, trades = trades - aged.n, through_ms = cutoff
          WHERE per = p_pers[i] AND value = p_values[i] AND window_ms = p_windows[i] RETURNING * INTO c;
      END IF;
      base_usd := c.usd;
      base_n := c.trades;
      IF NOT p_new THEN
        -- A new amount for a spend: checked only where it still counts, in place of its old amount.
        CONTINUE WHEN NOT own.counts OR own.at_ms <= c.through_ms;
        base_usd := base_usd - own.usd;
        base_n := base_n - 1;
      END IF;
      over_usd := CASE WHEN p_max_usd[i] IS NULL THEN 0 ELSE base_usd + p_usd - p_max_usd[i] END;
      over_n := CASE WHEN p_max_trades[i] IS NULL THEN 0 ELSE base_n + 1 - p_max_trades[i] END;
      IF over_usd > 0 OR over_n > 0 THEN
        refused := i;
        used_usd := base_usd;
        used_trades := base_n;
        IF (p_max_usd[i] IS NULL OR p_usd <= p_max_usd[i]) AND (p_max_trades[i] IS NULL OR p_max_trades[i] >= 1) THEN
          frees := spend_frees_at(p_pers[i], p_values[i], c.through_ms, greatest(over_usd, 0), greatest(over_n, 0), p_trade);
          IF frees IS NOT NULL THEN retry_after_ms := greatest(1, frees + p_windows[i] - now_ms); END IF;
        END IF;
        RETURN;
      END IF;
    END LOOP;
    IF p_new THEN
      INSERT INTO spends (trade_id, at_ms, usd, key_name, wallet, destinatary) VALUES (p_trade, now_ms, p_usd, p_key, p_wallet, p_dest);
      UPDATE spend_counters SET usd = usd + p_usd, trades = trades + 1
        WHERE (per = 'key' AND value = p_key) OR (per = 'wallet' AND value = p_wallet)
           OR (per = 'destinatary' AND value = p_dest) OR per = 'all';
    ELSE
      IF own.counts THEN
        UPDATE spend_counters s SET usd = s.usd - own.usd + p_usd WHERE ${SCOPES_OF("own")} AND s.through_ms < own.at_ms;
      END IF;
      UPDATE spends SET usd = p_usd WHERE trade_id = p_trade;
    END IF;
  END $$;

  -- What a scope has used in a window now, read only: its counter less what has left the window
  -- since, or, without a counter, the spends in the window.
  CREATE FUNCTION spend_used(p_per TEXT, p_value TEXT, p_window BIGINT, OUT usd NUMERIC, OUT n BIGINT)
  LANGUAGE plpgsql STABLE AS $$
  DECLARE
    now_ms BIGINT := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    c RECORD;
    aged RECORD;
  BEGIN
    SELECT * INTO c FROM spend_counters WHERE per = p_per AND value = p_value AND window_ms = p_window;
    IF NOT FOUND THEN
      SELECT * INTO usd, n FROM spend_sum(p_per, p_value, now_ms - p_window, 9223372036854775807);
      RETURN;
    END IF;
    SELECT * INTO aged FROM spend_sum(p_per, p_value, c.through_ms, greatest(c.through_ms, now_ms - p_window));
    usd := c.usd - aged.usd;
    n := c.trades - aged.n;
  END $$;

  ${spendsRecount("CREATE", SPENDING_STATUSES_BEFORE_APPROVALS_SQL)}
  CREATE TRIGGER trades_spends_forget AFTER DELETE ON trades FOR EACH ROW EXECUTE FUNCTION spends_recount();`;

interface AdmitRow {
  refused: number;
  used_usd: string | null;
  used_trades: string | null;
  retry_after_ms: string | null;
}

/** spend_admit's arguments after the trade's id and whether its spend is new. */
function admitArguments(spend: Spending["spend"] | { usd: bigint }, checks: readonly LimitCheck[]): unknown[] {
  const isNew = "key" in spend;
  return [
    spend.usd.toString(),
    isNew ? spend.key : null,
    isNew ? spend.wallet : null,
    isNew ? spend.destinatary : null,
    checks.map((check) => check.limit.per),
    checks.map((check) => check.value),
    checks.map((check) => check.limit.windowMs),
    checks.map((check) => check.limit.maxUsd?.toString() ?? null),
    checks.map((check) => check.limit.maxTrades ?? null),
  ];
}

function refusal(row: AdmitRow, usd: bigint, checks: readonly LimitCheck[]): SpendingLimitError {
  return limitExceeded(
    checks[row.refused - 1]!,
    { usd: BigInt(row.used_usd ?? "0"), trades: Number(row.used_trades ?? "0") },
    { usd, trades: 1 },
    row.retry_after_ms === null ? undefined : Number(row.retry_after_ms),
  );
}

/**
 * Admits the spend of trade `tradeId` (new: `spending.spend`; else a new amount `usd` for the
 * spend it has) on `client`, inside the caller's transaction.
 * @throws SpendingLimitError when a check has no room: the caller's transaction must roll back
 */
export async function admitSpend(
  client: pg.ClientBase,
  tradeId: string,
  spend: Spending["spend"] | { usd: bigint },
  checks: readonly LimitCheck[],
): Promise<void> {
  const { rows } = await client.query<AdmitRow>(
    `SELECT refused, used_usd::text, used_trades::text, retry_after_ms::text
     FROM spend_admit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [tradeId, "key" in spend, ...admitArguments(spend, checks)],
  );
  const row = rows[0]!;
  if (row.refused !== 0) throw refusal(row, spend.usd, checks);
}

/**
 * A new trade's insert (`insert`, with `parameters`, RETURNING its row with its `id`) and the
 * admission of its spend, as one statement (spend_open, ./spend-admit.ts): one round trip, where a
 * transaction around the two takes three more. A refusal raises, and takes the insert back with it.
 * Nothing is admitted when the insert inserts nothing (its idempotency key is taken). `insert` is
 * the same text on every call: the statement is prepared by name.
 * @throws SpendingLimitError when a check has no room
 */
export async function insertCounted<T extends pg.QueryResultRow>(
  pool: pg.Pool | pg.ClientBase,
  insert: string,
  parameters: readonly unknown[],
  spending: Spending,
  audit?: AuditEntry,
): Promise<T | undefined> {
  // A sell's coin decimals last (spend_open, ./spend-paid.ts): once mined it counts what it paid.
  const admit = [...admitArguments(spending.spend, spending.checks), spending.spend.payoutDecimals ?? null];
  const placeholders = admit.map((_, i) => `$${parameters.length + i + 1}`).join(", ");
  // With `audit`, its record is appended in the select list, once the spend is admitted: the
  // chain's head is the statement's last lock (./audit.ts).
  const append = audit === undefined ? undefined : auditAppendCall(audit, parameters.length + admit.length + 1);
  try {
    // Named: each connection parses and plans it once; planned afresh on every trade, it cost the
    // server a third of what counting the trade does (docs/benchmarks.md, "The authorize step").
    const { rows } = await pool.query<T>({
      name: append === undefined ? "trade-open-counted" : "trade-open-counted-audited",
      text: `WITH t AS (${insert}) SELECT t.*${append === undefined ? "" : `, ${append.sql} AS audit`}
             FROM t CROSS JOIN LATERAL spend_open(t.id, ${placeholders})`,
      values: [...parameters, ...admit, ...(append?.values ?? [])],
    });
    return rows[0];
  } catch (error) {
    const { code, detail } = error as pg.DatabaseError;
    if (code !== SPEND_REFUSED || detail === undefined) throw error;
    throw refusal(JSON.parse(detail) as AdmitRow, spending.spend.usd, spending.checks);
  }
}

/** What each check's limit has used in its window now (spend_used), in order. */
export async function spendingUse(pool: pg.Pool, checks: readonly LimitCheck[]): Promise<LimitUse[]> {
  if (checks.length === 0) return [];
  const { rows } = await pool.query<{ i: number; usd: string; n: string }>(
    `SELECT i, u.usd::text, u.n::text FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS c(per, value, window_ms, i),
       LATERAL spend_used(c.per, c.value, c.window_ms) u ORDER BY i`,
    [checks.map((c) => c.limit.per), checks.map((c) => c.value), checks.map((c) => c.limit.windowMs)],
  );
  return rows.map((row) => ({ usd: BigInt(row.usd), trades: Number(row.n) }));
}
