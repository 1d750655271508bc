/**
 * Migration 11 of the PostgreSQL journal: `spend_admit` (spending.ts, which explains its steps)
 * made cheap on a busy window. What it decides is unchanged; what it reads is not:
 *   - a counter is created from the spends in its window only when it does not exist yet (the
 *     function of migration 10 summed every check's whole window on every trade, before ON
 *     CONFLICT found the counter there);
 *   - a counter is aged (the spends that left its window since `through_ms` taken out) when it
 *     is more than AGE_AFTER_MS behind, or when, not aged, it would have no room for the trade.
 *     A counter not aged counts spends that have left, so it never shows more room than there is:
 *     a trade it has room for fits, and any other is checked again against the aged counter.
 *     Aging on every trade cost each one a range read and an update per limit.
 * And `spend_open`, which admits a new trade's spend in the statement that inserts the trade,
 * raising on a refusal, so that a counted trade is one round trip (insertCounted, spending.ts).
 */
import { AGE_AFTER_MS } from "../spending.js";

/** The SQLSTATE spend_open raises a refusal with; its DETAIL is spend_admit's answer, as JSON. */
export const SPEND_REFUSED = "TJ001";

/** The counters of the spend `s`'s scopes. */
const SCOPES_OF = (s: string) =>
  `((per = 'key' AND value = ${s}.key_name) OR (per = 'wallet' AND value = ${s}.wallet)
     OR (per = 'destinatary' AND value = ${s}.destinatary) OR per = 'all')`;

export const SPEND_ADMIT_MIGRATION = `
  CREATE OR REPLACE FUNCTION spend_admit(p_trade TEXT, p_new BOOLEAN, p_usd NUMERIC, p_key TEXT, p_wallet TEXT,
      p_dest TEXT, p_pers TEXT[], p_values TEXT[], p_windows BIGINT[], p_max_usd NUMERIC[], p_max_trades BIGINT[],
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
    uncounted BOOLEAN;
    frees BIGINT;
  BEGIN
    refused := 0;
    IF NOT p_new THEN
      SELECT * INTO own FROM spends WHERE trade_id = p_trade;
      IF NOT FOUND THEN RETURN; END IF;
      p_key := own.key_name; p_wallet := own.wallet; p_dest := own.destinatary;
    END IF;
    FOR i IN 1..checks LOOP
      PERFORM 1 FROM spend_counters WHERE per = p_pers[i] AND value = p_values[i] AND window_ms = p_windows[i];
      CONTINUE WHEN FOUND;
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
      -- At most twice: as the counter is, then, if it must age, aged.
      LOOP
        base_usd := c.usd;
        base_n := c.trades;
        -- A new amount for a spend: checked only where it still counts, in place of its old amount.
        uncounted := NOT p_new AND (NOT own.counts OR own.at_ms <= c.through_ms);
        IF NOT p_new AND NOT uncounted THEN
          base_usd := base_usd - own.usd;
          base_n := base_n - 1;
        END IF;
        over_usd := CASE WHEN p_max_usd[i] IS NULL THEN 0 ELSE base_usd + p_usd - p_max_usd[i] END;
        over_n := CASE WHEN p_max_trades[i] IS NULL THEN 0 ELSE base_n + 1 - p_max_trades[i] END;
        EXIT WHEN c.through_ms >= cutoff
          OR (c.through_ms >= cutoff - ${AGE_AFTER_MS} AND (uncounted OR (over_usd <= 0 AND over_n <= 0)));
        SELECT * INTO aged FROM spend_sum(p_pers[i], p_values[i], c.through_ms, cutoff);
        UPDATE spend_counters SET usd = usd - aged.usd, trades = trades - aged.n, through_ms = cutoff
          WHERE per = p_pers[i] AND value = p_values[i] AND window_ms = p_windows[i] RETURNING * INTO c;
      END LOOP;
      CONTINUE WHEN uncounted;
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

  -- A new trade's spend admitted in the statement that inserts the trade (insertCounted): a refusal
  -- raises, which takes the insert back with it.
  CREATE FUNCTION spend_open(p_trade TEXT, p_usd NUMERIC, p_key TEXT, p_wallet TEXT, p_dest TEXT, p_pers TEXT[],
      p_values TEXT[], p_windows BIGINT[], p_max_usd NUMERIC[], p_max_trades BIGINT[])
  RETURNS void LANGUAGE plpgsql AS $$
  DECLARE
    r RECORD;
  BEGIN
    SELECT * INTO r FROM spend_admit(p_trade, true, p_usd, p_key, p_wallet, p_dest, p_pers, p_values, p_windows,
      p_max_usd, p_max_trades);
    IF r.refused > 0 THEN
      RAISE EXCEPTION 'spending limit % has no room for trade %', r.refused, p_trade USING ERRCODE = '${SPEND_REFUSED}',
        DETAIL = json_build_object('refused', r.refused, 'used_usd', r.used_usd::text,
          'used_trades', r.used_trades::text, 'retry_after_ms', r.retry_after_ms::text)::text;
    END IF;
  END $$;`;
