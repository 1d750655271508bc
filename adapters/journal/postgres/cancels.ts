/**
 * The PostgreSQL journal's cancels: migration 17, which gives the trades the `cancelled` state in
 * the status constraint and the cancel's record (TradeCancel, JSON), and the webhook events
 * trade.cancelled and trade.cancel_failed (the trigger's function made again; it may write two
 * events for one change). A cancelled trade is not a spending state: the spends' recount is
 * unchanged.
 */
import type pg from "pg";

import type { AuditEntry, TradeCancel, TradeRecord, TradeStatus } from "../../../core/index.js";
import { applies, cancelAsked, decide, statusAfter } from "../transitions.js";
import { appendAudit } from "./audit.js";
import { transaction } from "./store.js";

export { cancelAsked };
import { CANCELS_EVENT_FUNCTIONS } from "./webhooks.js";

export const CANCELS_MIGRATION = `ALTER TABLE trades DROP CONSTRAINT IF EXISTS trades_status_check;
   ALTER TABLE trades ADD CONSTRAINT trades_status_check
     CHECK (status IN ('accepted', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'expired',
       'pending_approval', 'approved', 'rejected', 'cancelled'));
   ALTER TABLE trades ADD COLUMN cancel JSON;       -- TradeCancel: who asked to cancel it, and when
   ${CANCELS_EVENT_FUNCTIONS}`;

/** TradeJournal.requestCancel: the first cancel asked of a trade that may still be replaced at its nonce. */
export async function requestCancel(
  pool: pg.Pool,
  id: string,
  cancel: TradeCancel,
  get: (id: string) => Promise<TradeRecord | undefined>,
  audit?: AuditEntry,
): Promise<TradeRecord | undefined> {
  const request =
    "UPDATE trades SET cancel = $2 WHERE id = $1 AND status IN ('signed', 'submitted') AND cancel IS NULL";
  const values = [id, JSON.stringify(cancel)];
  if (audit === undefined) await pool.query(request, values);
  else
    await transaction(pool, async (client) => {
      if ((await client.query(request, values)).rowCount !== 0) await appendAudit(client, audit);
    });
  return get(id);
}

/** TradeJournal.markCancelled: the chain's word, or (with `cancel`) a cancel asked now of a trade with nothing signed. */
export async function markCancelled(
  pool: pg.Pool,
  id: string,
  error: { code: string; message: string },
  cancel?: TradeCancel,
  audit?: AuditEntry,
): Promise<boolean> {
  const update = `UPDATE trades SET status = ${statusAfter("markCancelled")}, error = $2, cancel = coalesce(cancel, $3::json),
     updated_at = clock_timestamp() WHERE id = $1 AND ${applies("markCancelled")} AND ($4 = false OR tx_hash IS NULL)`;
  const values = [
    id,
    JSON.stringify({ code: error.code, message: error.message }),
    cancel === undefined ? null : JSON.stringify(cancel),
    cancel !== undefined,
  ];
  // With `audit`, its record appended in the same transaction when the trade is cancelled by it.
  const rowCount =
    audit === undefined
      ? (await pool.query(update, values)).rowCount
      : await transaction(pool, async (client) => {
          const changed = (await client.query(update, values)).rowCount;
          if (changed !== 0) await appendAudit(client, audit);
          return changed;
        });
  if (rowCount !== 0) return true;
  const { rows } = await pool.query<{ status: TradeStatus; tx_hash: string | null }>(
    "SELECT status, tx_hash FROM trades WHERE id = $1",
    [id],
  );
  const row = rows[0];
  // Asked now of a trade signed meanwhile: left as it is, its no-op cancels it.
  if (cancel !== undefined && row !== undefined && row.tx_hash !== null) return row.status === "cancelled";
  decide("markCancelled", id, row && { status: row.status, txHash: row.tx_hash });
  return row?.status === "cancelled";
}
