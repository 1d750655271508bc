/**
 * The webhook outbox in the SQLite journal (its tables and trigger: the migrations
 * WEBHOOKS_MIGRATION, WEBHOOK_REGISTRATIONS_MIGRATION and WEBHOOK_RETENTION_MIGRATION below,
 * appended to MIGRATIONS in migrations.ts). The trigger writes an event in the statement that changes the trade, so in its
 * transaction: the outbox can never hold an event whose change was rolled back, nor miss one
 * that was committed.
 */
import type { DatabaseSync, SQLOutputValue } from "node:sqlite";

import type {
  AuditEntry,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookDeliveryQuery,
  WebhookEvent,
  WebhookOutbox,
  WebhookOutboxStats,
  WebhookScopes,
  WebhookOutcome,
} from "../../../core/index.js";
import { CANCEL_TOO_LATE, ORPHANED_EVENT_ERROR, snapshotToRecord, type TradeSnapshot } from "../webhook-events.js";

/** The states in which a cancel came too late, as SQL text. */
const CANCEL_TOO_LATE_SQL = CANCEL_TOO_LATE.map((status) => `'${status}'`).join(", ");
import type { SqliteAudit } from "./audit.js";

/** The trade's broadcasts (its nonce slot's), oldest first. */
const TRADE_BROADCASTS = `SELECT b.* FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
       WHERE s.wallet = lower(NEW.wallet) AND s.nonce = NEW.nonce AND s.trade_id = NEW.id`;

/**
 * The trigger that writes an event when a trade changes, if `written` (a query on the trade's
 * scope) finds a row: the same rule as webhookEventType (webhook-events.ts). With `approvals`
 * (migration 14), the approvals' events too, and the trade's approval and key name in the snapshot.
 */
const eventTrigger = (
  written: string,
  approvals = false,
  cancels = false,
) => `CREATE TRIGGER trades_webhook_event AFTER UPDATE OF status, tx_hash ON trades
   WHEN EXISTS (${written})
   BEGIN
     INSERT INTO webhook_events (id, scope, trade_id, type, trade, created_at, next_attempt_at, window_start)
     SELECT 'msg_' || lower(hex(randomblob(16))), NEW.scope, NEW.id, e.type,
       json_object('id', NEW.id, 'scope', NEW.scope, 'idempotencyKey', NEW.idempotency_key,
         'requestHash', NEW.request_hash, 'kind', NEW.kind, 'request', json(NEW.request), 'status', NEW.status,
         'wallet', NEW.wallet, 'nonce', NEW.nonce, 'deadline', NEW.deadline, 'txHash', NEW.tx_hash,
         'broadcasts', json((SELECT json_group_array(json_object('hash', x.hash, 'rawTx', x.raw_tx,
             'maxFeePerGas', x.max_fee_per_gas, 'maxPriorityFeePerGas', x.max_priority_fee_per_gas,
             'noop', x.noop, 'sentAt', x.sent_at))
           FROM (${TRADE_BROADCASTS} ORDER BY b.sent_at, b.rowid) AS x)),
         'receipt', json(NEW.receipt), 'error', json(NEW.error),${approvals ? " 'approval', json(NEW.approval), 'keyName', NEW.key_name," : ""}${cancels ? " 'cancel', json(NEW.cancel)," : ""}
         'createdAt', NEW.created_at, 'updatedAt', NEW.updated_at),
       NEW.updated_at, NEW.updated_at, NEW.updated_at
     FROM (SELECT CASE
         WHEN NEW.status = OLD.status THEN
           CASE WHEN NEW.status IN ('signed', 'submitted') AND OLD.tx_hash IS NOT NULL AND NEW.tx_hash IS NOT OLD.tx_hash
             AND (SELECT count(*) FROM (${TRADE_BROADCASTS})) > 1 THEN 'trade.replaced' END
         WHEN NEW.status = 'submitted' AND OLD.status = 'signed' THEN 'trade.submitted'
         WHEN NEW.status = 'submitted' AND OLD.status <> 'accepted' THEN 'trade.reorged'
         WHEN NEW.status IN ('mined', 'confirmed', 'failed', 'expired') THEN 'trade.' || NEW.status${
           approvals
             ? "\n         WHEN NEW.status IN ('pending_approval', 'approved', 'rejected') THEN 'trade.' || NEW.status"
             : ""
         }${cancels ? "\n         WHEN NEW.status = 'cancelled' THEN 'trade.cancelled'" : ""}
       END AS type${
         cancels
           ? `, 0 AS n
       UNION ALL SELECT CASE WHEN NEW.cancel IS NOT NULL AND NEW.status <> OLD.status
           AND NEW.status IN (${CANCEL_TOO_LATE_SQL}) AND OLD.status NOT IN (${CANCEL_TOO_LATE_SQL})
         THEN 'trade.cancel_failed' END, 1`
           : ""
       }) AS e
     WHERE e.type IS NOT NULL${cancels ? " ORDER BY e.n" : ""};
   END;`;

/**
 * The outbox's tables, and the trigger that writes an event when a trade of a webhook scope
 * changes: the same rule as webhookEventType (webhook-events.ts). Times in ms since the epoch.
 */
export const WEBHOOKS_MIGRATION = `CREATE TABLE webhook_scopes (scope TEXT PRIMARY KEY) WITHOUT ROWID;
   CREATE TABLE webhook_events (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,   -- order of writing
     id TEXT NOT NULL UNIQUE,                 -- webhook-id: msg_ and 32 hex digits
     scope TEXT NOT NULL,
     trade_id TEXT NOT NULL,
     type TEXT NOT NULL,
     trade TEXT NOT NULL,                     -- JSON: the trade right after the change
     created_at INTEGER NOT NULL,
     status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
     attempts INTEGER NOT NULL DEFAULT 0,
     next_attempt_at INTEGER NOT NULL,
     window_start INTEGER NOT NULL,           -- retries stop a while after this
     lease_holder TEXT,
     lease_until INTEGER
   );
   CREATE INDEX webhook_events_pending ON webhook_events (trade_id, seq) WHERE status = 'pending';
   CREATE INDEX webhook_events_due ON webhook_events (seq) WHERE status = 'pending';
   CREATE INDEX webhook_events_scope ON webhook_events (scope, seq);
   CREATE INDEX webhook_events_scope_status ON webhook_events (scope, status, seq);
   CREATE TABLE webhook_attempts (
     event_id TEXT NOT NULL,
     at INTEGER NOT NULL,
     status_code INTEGER,                     -- NULL: no answer
     error TEXT
   );
   CREATE INDEX webhook_attempts_event ON webhook_attempts (event_id);
   ${eventTrigger("SELECT 1 FROM webhook_scopes WHERE scope = NEW.scope")}`;

/**
 * Which scopes get events, held per instance (registerWebhookScopes): the trigger writes an
 * event while a registration of the trade's scope is live. It replaces the one set
 * (webhook_scopes) that each start overwrote.
 */
export const WEBHOOK_REGISTRATIONS_MIGRATION = `CREATE TABLE webhook_registrations (
     scope TEXT NOT NULL,
     holder TEXT NOT NULL,                    -- the process whose WEBHOOKS_FILE has the scope's endpoint
     expires_at INTEGER NOT NULL,             -- ms since the epoch: live until then, renewed while it runs
     PRIMARY KEY (scope, holder)
   ) WITHOUT ROWID;
   DROP TRIGGER trades_webhook_event;
   ${eventTrigger("SELECT 1 FROM webhook_registrations WHERE scope = NEW.scope AND expires_at > unixepoch('subsec') * 1000")}
   DROP TABLE webhook_scopes;`;

/** The webhook trigger of migration 14 (approvals.ts): the approvals' events, the trade's approval in each snapshot. */
export const APPROVALS_EVENT_TRIGGER = eventTrigger(
  "SELECT 1 FROM webhook_registrations WHERE scope = NEW.scope AND expires_at > unixepoch('subsec') * 1000",
  true,
);

/** The webhook trigger of migration 16 (cancels.ts): trade.cancelled, trade.cancel_failed, and the cancel in each snapshot. */
export const CANCELS_EVENT_TRIGGER = eventTrigger(
  "SELECT 1 FROM webhook_registrations WHERE scope = NEW.scope AND expires_at > unixepoch('subsec') * 1000",
  true,
  true,
);

/**
 * When each event finished (was delivered, or failed), so that the upkeep deletes those finished
 * WEBHOOK_RETENTION_DAYS ago (sweepWebhookEvents); the events already finished take their last
 * attempt's time (or their creation's).
 */
export const WEBHOOK_RETENTION_MIGRATION = `ALTER TABLE webhook_events ADD COLUMN finished_at INTEGER;   -- ms since the epoch; NULL while pending
   UPDATE webhook_events SET finished_at = coalesce(
       (SELECT max(a.at) FROM webhook_attempts a WHERE a.event_id = webhook_events.id), created_at)
     WHERE status <> 'pending';
   CREATE INDEX webhook_events_finished ON webhook_events (finished_at) WHERE finished_at IS NOT NULL;`;

type Row = Record<string, SQLOutputValue>;

function statements(db: DatabaseSync) {
  return {
    register: db.prepare(
      `INSERT INTO webhook_registrations (scope, holder, expires_at, watcher) VALUES (?, ?, ?, ?)
       ON CONFLICT (scope, holder) DO UPDATE SET expires_at = excluded.expires_at, watcher = excluded.watcher`,
    ),
    registrationsOf: db.prepare("SELECT scope FROM webhook_registrations WHERE holder = ?"),
    unregister: db.prepare("DELETE FROM webhook_registrations WHERE scope = ? AND holder = ?"),
    forgetLapsed: db.prepare("DELETE FROM webhook_registrations WHERE holder <> ? AND expires_at <= ?"),
    orphans: db.prepare(
      `SELECT e.id FROM webhook_events e
       WHERE e.status = 'pending' AND e.window_start < ? AND (e.lease_until IS NULL OR e.lease_until <= ?)
       AND NOT EXISTS (SELECT 1 FROM webhook_registrations r WHERE r.scope = e.scope AND r.expires_at > ?)
       ORDER BY e.seq LIMIT ?`,
    ),
    failOrphan: db.prepare(
      `UPDATE webhook_events SET status = 'failed', attempts = attempts + 1, lease_holder = NULL, lease_until = NULL,
       finished_at = ? WHERE id = ?`,
    ),
    // Of one scope, for each trade (and each watched subject) only its oldest pending event: they go out in order.
    due: db.prepare(
      `SELECT e.* FROM webhook_events e
       WHERE e.scope = ? AND e.status = 'pending' AND e.next_attempt_at <= ?
       AND (e.lease_until IS NULL OR e.lease_until <= ?)
       AND NOT EXISTS (SELECT 1 FROM webhook_events p WHERE p.trade_id = e.trade_id AND p.status = 'pending' AND p.seq < e.seq)
       AND NOT EXISTS (SELECT 1 FROM webhook_events q WHERE q.subject = e.subject AND q.scope = e.scope
         AND q.status = 'pending' AND q.seq < e.seq)
       ORDER BY e.seq LIMIT ?`,
    ),
    lease: db.prepare("UPDATE webhook_events SET lease_holder = ?, lease_until = ? WHERE seq = ?"),
    // The file is one process's (index.ts): a lease found at start is a dead run's.
    dropLeases: db.prepare(
      "UPDATE webhook_events SET lease_holder = NULL, lease_until = NULL WHERE lease_holder IS NOT NULL",
    ),
    attempted: db.prepare(
      `UPDATE webhook_events SET status = ?, attempts = attempts + 1, next_attempt_at = coalesce(?, next_attempt_at),
       lease_holder = NULL, lease_until = NULL, finished_at = ? WHERE id = ? AND lease_holder = ?`,
    ),
    addAttempt: db.prepare("INSERT INTO webhook_attempts (event_id, at, status_code, error) VALUES (?, ?, ?, ?)"),
    attemptsOf: db.prepare("SELECT * FROM webhook_attempts WHERE event_id = ? ORDER BY at, rowid"),
    retry: db.prepare(
      `UPDATE webhook_events SET status = 'pending', next_attempt_at = ?, window_start = ?, finished_at = NULL
       WHERE id = ? AND scope = ? AND status = 'failed'`,
    ),
    byId: db.prepare("SELECT * FROM webhook_events WHERE id = ?"),
    finished: db.prepare(
      `SELECT id FROM webhook_events WHERE finished_at < ? AND status <> 'pending' ORDER BY finished_at LIMIT ?`,
    ),
    deleteEvent: db.prepare("DELETE FROM webhook_events WHERE id = ?"),
    deleteAttempts: db.prepare("DELETE FROM webhook_attempts WHERE event_id = ?"),
    stats: db.prepare(
      "SELECT count(*) AS pending, min(created_at) AS oldest FROM webhook_events WHERE status = 'pending'",
    ),
  };
}

export class SqliteOutbox implements WebhookOutbox {
  readonly #db: DatabaseSync;
  readonly #write: <T>(run: () => T, atomic?: boolean) => Promise<T>;
  readonly #audit: SqliteAudit;
  #sql: ReturnType<typeof statements> | undefined;
  #leasesDropped = false;

  /** @param write - the journal's group commit: `run` goes into its transaction (as one savepoint when `atomic`). */
  constructor(db: DatabaseSync, write: <T>(run: () => T, atomic?: boolean) => Promise<T>, audit: SqliteAudit) {
    this.#db = db;
    this.#write = write;
    this.#audit = audit;
  }

  get #statements(): ReturnType<typeof statements> {
    this.#sql ??= statements(this.#db);
    return this.#sql;
  }

  registerWebhookScopes(
    holder: string,
    scopes: readonly string[],
    ttlMs: number,
    watchers: readonly string[] = [],
  ): Promise<void> {
    return this.#write(() => {
      const sql = this.#statements;
      const now = Date.now();
      const watching = new Set(watchers);
      for (const scope of scopes) sql.register.run(scope, holder, now + ttlMs, watching.has(scope) ? 1 : 0);
      const kept = new Set(scopes);
      for (const row of sql.registrationsOf.all(holder))
        if (!kept.has(row.scope as string)) sql.unregister.run(row.scope as string, holder);
      sql.forgetLapsed.run(holder, now);
    });
  }

  failOrphanedWebhookEvents(windowStartBefore: Date, limit: number): Promise<number> {
    return this.#write(() => {
      const sql = this.#statements;
      const now = Date.now();
      const orphans = sql.orphans.all(windowStartBefore.getTime(), now, now, limit);
      for (const { id } of orphans) {
        sql.failOrphan.run(now, id as string);
        sql.addAttempt.run(id as string, now, null, ORPHANED_EVENT_ERROR);
      }
      return orphans.length;
    });
  }

  claimWebhookEvents(holder: string, limits: ReadonlyMap<string, number>, leaseMs: number): Promise<WebhookEvent[]> {
    return this.#write(() => {
      const sql = this.#statements;
      if (!this.#leasesDropped) {
        sql.dropLeases.run();
        this.#leasesDropped = true;
      }
      const now = Date.now();
      const rows = [...limits].flatMap(([scope, limit]) => (limit > 0 ? sql.due.all(scope, now, now, limit) : []));
      for (const row of rows) sql.lease.run(holder, now + leaseMs, row.seq as number);
      return rows.map(toEvent).sort((a, b) => a.seq - b.seq);
    });
  }

  recordWebhookAttempt(id: string, holder: string, attempt: WebhookAttempt, outcome: WebhookOutcome): Promise<boolean> {
    return this.#write(() => {
      const sql = this.#statements;
      const next = outcome.status === "pending" ? outcome.nextAttemptAt.getTime() : null;
      const finished = outcome.status === "pending" ? null : attempt.at.getTime();
      if (Number(sql.attempted.run(outcome.status, next, finished, id, holder).changes) !== 1) return false;
      sql.addAttempt.run(id, attempt.at.getTime(), attempt.statusCode, attempt.error);
      return true;
    });
  }

  async listWebhookDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage> {
    const values: Array<string | number> = [];
    const where = [scopesWhere(query.scopes, values)];
    if (query.status !== undefined) {
      where.push("status = ?");
      values.push(query.status);
    }
    if (query.before !== undefined) {
      where.push("seq < ?");
      values.push(query.before);
    }
    const rows = this.#db
      .prepare(`SELECT * FROM webhook_events WHERE ${where.join(" AND ")} ORDER BY seq DESC LIMIT ?`)
      .all(...values, query.limit + 1);
    const page = rows.slice(0, query.limit);
    return {
      deliveries: page.map((row) => this.#delivery(row)),
      next: rows.length > query.limit ? Number(page.at(-1)!.seq) : null,
    };
  }

  async retryWebhookDelivery(
    scopes: WebhookScopes,
    id: string,
    now: Date,
    audit?: AuditEntry,
  ): Promise<WebhookDelivery | "not_failed" | undefined> {
    const row = this.#statements.byId.get(id);
    if (row === undefined || (scopes !== "all" && !scopes.includes(String(row.scope)))) return undefined;
    const changed = await this.#write(() => {
      const made = Number(this.#statements.retry.run(now.getTime(), now.getTime(), id, String(row.scope)).changes);
      if (made === 1 && audit !== undefined) this.#audit.appendIn(audit);
      return made;
    }, audit !== undefined);
    return changed === 1 ? this.#delivery(this.#statements.byId.get(id)!) : "not_failed";
  }

  async webhookStats(): Promise<WebhookOutboxStats> {
    const row = this.#statements.stats.get()!;
    return {
      pending: Number(row.pending),
      oldestPendingAt: row.oldest === null ? null : new Date(Number(row.oldest)),
    };
  }

  sweepWebhookEvents(finishedBefore: Date, limit: number): Promise<number> {
    return this.#write(() => {
      const sql = this.#statements;
      const page = sql.finished.all(finishedBefore.getTime(), limit);
      for (const { id } of page) {
        sql.deleteAttempts.run(id as string);
        sql.deleteEvent.run(id as string);
      }
      return page.length;
    });
  }

  #delivery(row: Row): WebhookDelivery {
    const history = this.#statements.attemptsOf.all(row.id as string).map((a) => ({
      at: new Date(Number(a.at)),
      statusCode: a.status_code === null ? null : Number(a.status_code),
      error: a.error as string | null,
    }));
    return { ...toEvent(row), history };
  }
}

function toEvent(row: Row): WebhookEvent {
  return {
    seq: Number(row.seq),
    id: row.id as string,
    scope: row.scope as string,
    tradeId: row.trade_id as string | null,
    type: row.type as WebhookEvent["type"],
    trade: row.trade === null ? null : snapshotToRecord(JSON.parse(row.trade as string) as TradeSnapshot),
    data: row.data === null || row.data === undefined ? null : (JSON.parse(row.data as string) as WebhookEvent["data"]),
    createdAt: new Date(Number(row.created_at)),
    status: row.status as WebhookEvent["status"],
    attempts: Number(row.attempts),
    nextAttemptAt: new Date(Number(row.next_attempt_at)),
    windowStart: new Date(Number(row.window_start)),
  };
}

/** The condition on webhook_events for the scopes a caller sees, its values pushed on `values`. */
function scopesWhere(scopes: WebhookScopes, values: Array<string | number>): string {
  if (scopes === "all") return "1";
  values.push(...scopes);
  return scopes.length === 0 ? "0" : `scope IN (${scopes.map(() => "?").join(", ")})`;
}
