/**
 * Migration 13 of the PostgreSQL journal: the scope locks that make a new counter's first sum
 * whole.
 *
 * A counter is created from the spends its first sum reads (spend-admit.ts), and from then on
 * every spend written in its scope adds to it. Under READ COMMITTED that left a hole: a
 * transaction whose spend is written but not committed (a trade counted by an instance whose
 * access file has no such limit yet, during a reload; a trade that stops or starts counting) is
 * invisible to the sum, and the counter it would update does not exist for it yet, so the
 * counter misses that spend for good, in every window after. A row lock cannot close it: there
 * is no row to lock before the counter exists. So each scope a spend counts for (its key, its
 * wallet, its destinatary, the service: "key:desk-eu", ..., "all:*") has a transaction-level
 * advisory lock:
 *   - every transaction that writes a spend, or changes what it counts, holds its four scopes'
 *     locks SHARED from before its first write until it ends (spend_admit, spend_paid, the recount
 *     trigger), so such writers never wait for each other;
 *   - a transaction that creates a counter holds that scope's lock EXCLUSIVE, taken before it
 *     looks at the spends: it waits until every writer in flight in the scope has committed or
 *     rolled back, and writers that come after wait for it. Its next statement reads with a fresh
 *     snapshot (READ COMMITTED takes one per statement, in a VOLATILE function too), which holds
 *     every spend those writers committed; every writer after it finds the counter, committed.
 * Each transaction takes its locks in one order, that of the locks' keys, all at once, before any
 * counter's row lock: no two wait for each other in a cycle. A statement that deletes several
 * trades takes the locks of all their spends first (spend_lock_trades, as forgetUnsigned does),
 * where its trigger would take them trade by trade. Counters are never deleted, so a counter seen
 * to exist needs no exclusive lock. The global order of locks: a trade's row, then the scope
 * locks, then the counters' rows (per, value, window), then the audit log's head.
 */
import { SPENDING_STATUSES_BEFORE_APPROVALS_SQL } from "../spending.js";

/** The counters of the spend `s`'s scopes. */
export const SCOPES_OF = (s: string) =>
  `((per = 'key' AND value = ${s}.key_name) OR (per = 'wallet' AND value = ${s}.wallet)
     OR (per = 'destinatary' AND value = ${s}.destinatary) OR per = 'all')`;

/** The four scope names of a spend of key `k`, wallet `w`, destinatary `d` (SQL expressions), as an array. */
export const SCOPE_NAMES = (k: string, w: string, d: string) =>
  `ARRAY['key:' || ${k}, 'wallet:' || ${w}, 'destinatary:' || ${d}, 'all:*']`;

/**
 * plpgsql that takes the scope locks of `scopes` and `creating` (TEXT[] expressions of scope
 * names), in the order of their keys, exclusive for those in `creating`; it needs a RECORD `held`.
 * A loop, one lock a statement, so the order is the loop's, not an evaluation order of one query's.
 */
const TAKE_LOCKS = (scopes: string, creating: string) =>
  `FOR held IN SELECT hashtextextended('spend-scope:' || s, 0) AS k, bool_or(s = ANY(${creating})) AS exclusive
        FROM unnest(${scopes} || ${creating}) AS s GROUP BY 1 ORDER BY 1 LOOP
      IF held.exclusive THEN PERFORM pg_advisory_xact_lock(held.k); ELSE PERFORM pg_advisory_xact_lock_shared(held.k); END IF;
    END LOOP;`;

/**
 * The recount trigger's function (migration 10's), under the scope locks: `counting` is the SQL
 * text of the states that count. Migration 13 makes it with the states of its day; the approvals'
 * migration makes it again with theirs, the locks kept.
 */
export const spendsRecountUnderLocks = (counting: string) => `
  -- The recount trigger's function (migration 10), under the scope locks.
  CREATE OR REPLACE FUNCTION spends_recount() RETURNS trigger LANGUAGE plpgsql AS $$
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
    PERFORM spend_lock_scopes(${SCOPE_NAMES("s.key_name", "s.wallet", "s.destinatary")}, '{}');
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
  END $$;`;

export const SPEND_LOCKS_MIGRATION = `
  -- The scope locks of p_scopes and p_creating (scope names, per || ':' || value), for the
  -- transaction, in the order of their keys: exclusive for those in p_creating, shared for the others.
  CREATE FUNCTION spend_lock_scopes(p_scopes TEXT[], p_creating TEXT[]) RETURNS void LANGUAGE plpgsql AS $$
  DECLARE
    held RECORD;
  BEGIN
    ${TAKE_LOCKS("p_scopes", "p_creating")}
  END $$;

  -- The scope locks of the spends of the trades p_ids, shared, in one go.
  CREATE FUNCTION spend_lock_trades(p_ids TEXT[]) RETURNS void LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM spend_lock_scopes(ARRAY(SELECT unnest(${SCOPE_NAMES("key_name", "wallet", "destinatary")})
      FROM spends WHERE trade_id = ANY(p_ids)), '{}');
  END $$;

  -- spend_admit (migration 11) under the scope locks, exclusive where a check's counter is missing:
  -- its body, renamed, is called only from here, so that every caller (the trade's insert,
  -- spend_open; a new amount, admitSpend) takes them.
  ALTER FUNCTION spend_admit(TEXT, BOOLEAN, NUMERIC, TEXT, TEXT, TEXT, TEXT[], TEXT[], BIGINT[], NUMERIC[], BIGINT[])
    RENAME TO spend_admit_under_locks;
  CREATE FUNCTION spend_admit(p_trade TEXT, p_new BOOLEAN, p_usd NUMERIC, p_key TEXT, p_wallet TEXT,
      p_dest TEXT, p_pers TEXT[], p_values TEXT[], p_windows BIGINT[], p_max_usd NUMERIC[], p_max_trades BIGINT[],
      OUT refused INT, OUT used_usd NUMERIC, OUT used_trades BIGINT, OUT retry_after_ms BIGINT)
  LANGUAGE plpgsql AS $$
  DECLARE
    own spends%ROWTYPE;
    creating TEXT[] := '{}';
    held RECORD;
  BEGIN
    IF NOT p_new THEN
      SELECT * INTO own FROM spends WHERE trade_id = p_trade;
      IF NOT FOUND THEN refused := 0; RETURN; END IF;
      p_key := own.key_name; p_wallet := own.wallet; p_dest := own.destinatary;
    END IF;
    FOR i IN 1..coalesce(array_length(p_pers, 1), 0) LOOP
      PERFORM 1 FROM spend_counters WHERE per = p_pers[i] AND value = p_values[i] AND window_ms = p_windows[i];
      IF NOT FOUND THEN creating := creating || (p_pers[i] || ':' || p_values[i]); END IF;
    END LOOP;
    -- Here rather than by spend_lock_scopes: a call fewer on every counted trade.
    ${TAKE_LOCKS(SCOPE_NAMES("p_key", "p_wallet", "p_dest"), "creating")}
    SELECT a.refused, a.used_usd, a.used_trades, a.retry_after_ms INTO refused, used_usd, used_trades, retry_after_ms
      FROM spend_admit_under_locks(p_trade, p_new, p_usd, p_key, p_wallet, p_dest, p_pers, p_values, p_windows,
        p_max_usd, p_max_trades) a;
  END $$;

  ${spendsRecountUnderLocks(SPENDING_STATUSES_BEFORE_APPROVALS_SQL)}`;
