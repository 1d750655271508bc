/**
 * The SQLite journal's cancels: migration 16, which gives the trades the `cancelled` state and the
 * cancel's record (TradeCancel, JSON), and the webhook events trade.cancelled and
 * trade.cancel_failed. SQLite cannot change a CHECK constraint, so `trades` is rebuilt as
 * migration 14 did, its indexes and triggers made again (the spends' recount unchanged: a
 * cancelled trade is not a spending state).
 */
import type { AuditEntry, TradeCancel, TradeRecord } from "../../../core/index.js";
import { SPENDING_STATUSES_SQL } from "../spending.js";
import { applies, decide, statusAfter } from "../transitions.js";
import type { SqliteAudit } from "./audit.js";
import { tradeState } from "./rows.js";
import { spendsTriggers } from "./spending.js";
import type { SqliteStore } from "./store.js";
import { CANCELS_EVENT_TRIGGER } from "./webhooks.js";

/** The columns of `trades` before migration 16, in their order. */
const COLUMNS_BEFORE = `id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx,
   deadline, receipt, error, created_at, updated_at, amount_in, amount_out, gas_wei, native_usd, gas_usd, key_name,
   approval, hold_until`;

export const CANCELS_MIGRATION = `DROP TRIGGER trades_webhook_event;
   DROP TRIGGER trades_spends_recount;
   DROP TRIGGER trades_spends_forget;
   CREATE TABLE trades_v16 (
     id TEXT PRIMARY KEY,
     scope TEXT NOT NULL,
     idempotency_key TEXT,
     request_hash TEXT NOT NULL,
     kind TEXT NOT NULL,
     request TEXT NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('accepted', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'expired',
       'pending_approval', 'approved', 'rejected', 'cancelled')),
     wallet TEXT,
     nonce INTEGER,
     tx_hash TEXT,
     raw_tx TEXT,
     deadline INTEGER,
     receipt TEXT,
     error TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     amount_in TEXT,
     amount_out TEXT,
     gas_wei TEXT,
     native_usd TEXT,
     gas_usd TEXT,
     key_name TEXT,
     approval TEXT,
     hold_until INTEGER,
     cancel TEXT                           -- JSON (TradeCancel): who asked to cancel it, and when
   );
   INSERT INTO trades_v16 (${COLUMNS_BEFORE}) SELECT ${COLUMNS_BEFORE} FROM trades ORDER BY rowid;
   DROP TABLE trades;
   ALTER TABLE trades_v16 RENAME TO trades;
   CREATE UNIQUE INDEX trades_scope_key ON trades (scope, idempotency_key) WHERE idempotency_key IS NOT NULL;
   CREATE INDEX trades_tx_hash ON trades (tx_hash);
   CREATE INDEX trades_accepted ON trades (updated_at) WHERE status = 'accepted';
   CREATE INDEX trades_history ON trades (scope, created_at DESC, id DESC);
   CREATE INDEX trades_history_status ON trades (scope, status, created_at DESC, id DESC);
   CREATE INDEX trades_history_kind ON trades (scope, kind, created_at DESC, id DESC);
   CREATE INDEX trades_history_name ON trades (key_name, created_at DESC, id DESC) WHERE key_name IS NOT NULL;
   CREATE INDEX trades_history_all ON trades (created_at DESC, id DESC);
   CREATE INDEX trades_held ON trades (hold_until) WHERE status = 'pending_approval';
   CREATE INDEX trades_pending_approval ON trades (created_at DESC, id DESC) WHERE status = 'pending_approval';
   CREATE INDEX trades_approved ON trades (updated_at) WHERE status = 'approved';
   ${CANCELS_EVENT_TRIGGER}
   ${spendsTriggers(SPENDING_STATUSES_SQL)}`;

/** The trades port's cancel writes (TradeJournal.requestCancel, markCancelled). */
export class SqliteCancels {
  readonly #store: SqliteStore;
  readonly #audit: SqliteAudit;
  readonly #sql;

  constructor(store: SqliteStore, audit: SqliteAudit) {
    this.#store = store;
    this.#audit = audit;
    this.#sql = {
      // A cancel asked of a trade that may still be replaced at its nonce, recorded once.
      request: store.db.prepare(
        "UPDATE trades SET cancel = ? WHERE id = ? AND status IN ('signed', 'submitted') AND cancel IS NULL",
      ),
      cancelled: store.db.prepare(
        `UPDATE trades SET status = ${statusAfter("markCancelled")}, error = ?, cancel = coalesce(cancel, ?), updated_at = ?
         WHERE id = ? AND ${applies("markCancelled")} AND (? = 0 OR tx_hash IS NULL)`,
      ),
      status: store.db.prepare("SELECT status, tx_hash FROM trades WHERE id = ?"),
    };
  }

  /** With `audit`, its record appended in the same write when the cancel is recorded. */
  async request(
    id: string,
    cancel: TradeCancel,
    get: (id: string) => Promise<TradeRecord | undefined>,
    audit?: AuditEntry,
  ): Promise<TradeRecord | undefined> {
    await this.#store.write(() => {
      const changed = Number(this.#sql.request.run(JSON.stringify(cancel), id).changes);
      if (changed > 0 && audit !== undefined) this.#audit.appendIn(audit);
    }, audit !== undefined);
    return get(id);
  }

  /** With `audit`, its record appended in the same write when the trade is cancelled by it. */
  cancelled(
    id: string,
    error: { code: string; message: string },
    cancel?: TradeCancel,
    audit?: AuditEntry,
  ): Promise<boolean> {
    const json = JSON.stringify({ code: error.code, message: error.message });
    const asked = cancel === undefined ? null : JSON.stringify(cancel);
    return this.#store.write(() => {
      const changed = Number(
        this.#sql.cancelled.run(json, asked, Date.now(), id, cancel === undefined ? 0 : 1).changes,
      );
      if (changed > 0) {
        if (audit !== undefined) this.#audit.appendIn(audit);
        return true;
      }
      const row = this.#sql.status.get(id);
      // Asked now of a trade signed meanwhile: left as it is, its no-op cancels it.
      if (cancel !== undefined && row !== undefined && row.tx_hash !== null) return row.status === "cancelled";
      decide("markCancelled", id, row && tradeState(row));
      return row?.status === "cancelled";
    }, audit !== undefined);
  }
}
