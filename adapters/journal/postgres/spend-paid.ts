/**
 * Migration 14 of the PostgreSQL journal: a sell counted at what it paid.
 *
 * A sell is admitted at its proven payout (admitSpend, before it is signed), but the swap pays at
 * the price of the block it is mined in (TokenSwap.sell), which may have risen since the proof.
 * Its spend keeps its coin's decimals (`payout_decimals`, written with the spend by spend_open),
 * and when its receipt is recorded (markMined, markConfirmed: in the statement that records it,
 * trades.ts) spend_paid counts the receipt's payout in its place, under the scope locks
 * (spend-locks.ts) and the counters' row locks, in their order, like any change of a spend.
 */
import { LIMIT_USD_DECIMALS } from "../../../core/index.js";
import { SPEND_REFUSED } from "./spend-admit.js";
import { SCOPE_NAMES, SCOPES_OF } from "./spend-locks.js";

export const SPEND_PAID_MIGRATION = `
  ALTER TABLE spends ADD COLUMN payout_decimals SMALLINT;  -- a sell's stable coin; NULL: it pays what it counts

  -- spend_open (migration 11) with a sell's coin decimals, kept with its spend.
  DROP FUNCTION spend_open(TEXT, NUMERIC, TEXT, TEXT, TEXT, TEXT[], TEXT[], BIGINT[], NUMERIC[], BIGINT[]);
  CREATE FUNCTION spend_open(p_trade TEXT, p_usd NUMERIC, p_key TEXT, p_wallet TEXT, p_dest TEXT, p_pers TEXT[],
      p_values TEXT[], p_windows BIGINT[], p_max_usd NUMERIC[], p_max_trades BIGINT[], p_payout_decimals SMALLINT)
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
    IF p_payout_decimals IS NOT NULL THEN
      UPDATE spends SET payout_decimals = p_payout_decimals WHERE trade_id = p_trade;
    END IF;
  END $$;

  -- A sell's receipt recorded: its spend counts p_paid (the coin's base units, the receipt's
  -- payout; NULL: none) in place of its estimate, in the counters whose window it is still in. Run
  -- in the statement that records the receipt, before the recount trigger, which then moves the
  -- new amount when the trade starts counting again (a receipt after all).
  CREATE FUNCTION spend_paid(p_trade TEXT, p_paid NUMERIC) RETURNS void LANGUAGE plpgsql AS $$
  DECLARE
    s spends%ROWTYPE;
    paid NUMERIC;
  BEGIN
    SELECT * INTO s FROM spends WHERE trade_id = p_trade;
    IF NOT FOUND OR s.payout_decimals IS NULL OR p_paid IS NULL THEN RETURN; END IF;
    PERFORM spend_lock_scopes(${SCOPE_NAMES("s.key_name", "s.wallet", "s.destinatary")}, '{}');
    PERFORM 1 FROM spend_counters WHERE ${SCOPES_OF("s")} ORDER BY per, value, window_ms FOR UPDATE;
    SELECT * INTO s FROM spends WHERE trade_id = p_trade;
    paid := (p_paid * 10::numeric ^ (${LIMIT_USD_DECIMALS} - s.payout_decimals))::numeric(78, 0);
    IF paid = s.usd THEN RETURN; END IF;
    IF s.counts THEN
      UPDATE spend_counters c SET usd = c.usd - s.usd + paid WHERE ${SCOPES_OF("s")} AND c.through_ms < s.at_ms;
    END IF;
    UPDATE spends SET usd = paid WHERE trade_id = p_trade;
  END $$;`;
