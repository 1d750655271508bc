/**
 * The webhook outbox in the PostgreSQL journal (its tables and trigger: WEBHOOKS_MIGRATION,
 * WEBHOOK_REGISTRATIONS_MIGRATION and WEBHOOK_RETENTION_MIGRATION, appended to MIGRATIONS in
 * migrations.ts). The trigger writes an event in the statement
 * that changes the trade, so in its transaction. Several instances claim events with
 * `FOR UPDATE SKIP LOCKED` and hold each under a lease while they deliver it
 * (docs/decisions/0010-webhook-outbox-skip-locked.md).
 */
import type pg from "pg";

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
import { auditAppendCall } from "./audit.js";

const MS = (column: string) => `floor(extract(epoch FROM ${column}) * 1000)`;

/**
 * The trigger's function: an event when a trade changes, if `written` (a query on the trade's
 * scope) finds a row; the same rule as webhookEventType (webhook-events.ts). With `approvals`
 * (migration 15), the approvals' events too, and the trade's approval and key name in the snapshot.
 */
const eventFunction = (create: "CREATE" | "CREATE OR REPLACE", written: string, approvals = false, cancels = false) =>
  `${create} FUNCTION trades_webhook_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
   DECLARE
     event_type TEXT;
   BEGIN
     IF NOT EXISTS (${written}) THEN RETURN NULL; END IF;
     IF NEW.status = OLD.status THEN
       IF NEW.status IN ('signed', 'submitted') AND OLD.tx_hash IS NOT NULL AND NEW.tx_hash IS DISTINCT FROM OLD.tx_hash
          AND (SELECT count(*) FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
               WHERE s.trade_id = NEW.id) > 1 THEN
         event_type := 'trade.replaced';
       END IF;
     ELSIF NEW.status = 'submitted' AND OLD.status = 'signed' THEN
       event_type := 'trade.submitted';
     ELSIF NEW.status = 'submitted' AND OLD.status <> 'accepted' THEN
       event_type := 'trade.reorged';
     ELSIF NEW.status IN ('mined', 'confirmed', 'failed', 'expired') THEN
       event_type := 'trade.' || NEW.status;${
         approvals
           ? `
     ELSIF NEW.status IN ('pending_approval', 'approved', 'rejected') THEN
       event_type := 'trade.' || NEW.status;`
           : ""
       }${
         cancels
           ? `
     ELSIF NEW.status = 'cancelled' THEN
       event_type := 'trade.cancelled';`
           : ""
       }
     END IF;${
       cancels
         ? `
     IF event_type IS NOT NULL THEN
       PERFORM trades_webhook_insert(NEW, event_type);
     END IF;
     IF NEW.cancel IS NOT NULL AND NEW.status <> OLD.status AND NEW.status IN (${CANCEL_TOO_LATE_SQL})
        AND OLD.status NOT IN (${CANCEL_TOO_LATE_SQL}) THEN
       PERFORM trades_webhook_insert(NEW, 'trade.cancel_failed');
     END IF;
     RETURN NULL;
   END
   $fn$;`
         : `
     IF event_type IS NULL THEN RETURN NULL; END IF;
     INSERT INTO webhook_events (id, scope, trade_id, type, trade, created_at, next_attempt_at, window_start)
     VALUES ('msg_' || replace(gen_random_uuid()::text, '-', ''), NEW.scope, NEW.id, event_type,
       json_build_object('id', NEW.id, 'scope', NEW.scope, 'idempotencyKey', NEW.idempotency_key,
         'requestHash', NEW.request_hash, 'kind', NEW.kind, 'request', NEW.request, 'status', NEW.status,
         'wallet', NEW.wallet, 'nonce', NEW.nonce, 'deadline', NEW.deadline, 'txHash', NEW.tx_hash,
         'broadcasts', (SELECT coalesce(json_agg(json_build_object('hash', b.hash, 'rawTx', b.raw_tx,
             'maxFeePerGas', b.max_fee_per_gas::text, 'maxPriorityFeePerGas', b.max_priority_fee_per_gas::text,
             'noop', b.noop, 'sentAt', ${MS("b.sent_at")}) ORDER BY b.seq), '[]'::json)
           FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce WHERE s.trade_id = NEW.id),
         'receipt', NEW.receipt, 'error', NEW.error,${approvals ? " 'approval', NEW.approval, 'keyName', NEW.key_name," : ""}
         'createdAt', ${MS("NEW.created_at")}, 'updatedAt', ${MS("NEW.updated_at")}),
       NEW.updated_at, NEW.updated_at, NEW.updated_at);
     RETURN NULL;
   END
   $fn$;`
     }`;

/**
 * Migration 17's event: one row of webhook_events for the trade `t` as it is after the change, of
 * type `event_type`, with the cancel in its snapshot (the trigger's function may write two).
 */
const CANCELS_INSERT_FUNCTION = `CREATE FUNCTION trades_webhook_insert(t trades, event_type TEXT) RETURNS void LANGUAGE plpgsql AS $fn$
   BEGIN
     INSERT INTO webhook_events (id, scope, trade_id, type, trade, created_at, next_attempt_at, window_start)
     VALUES ('msg_' || replace(gen_random_uuid()::text, '-', ''), t.scope, t.id, event_type,
       json_build_object('id', t.id, 'scope', t.scope, 'idempotencyKey', t.idempotency_key,
         'requestHash', t.request_hash, 'kind', t.kind, 'request', t.request, 'status', t.status,
         'wallet', t.wallet, 'nonce', t.nonce, 'deadline', t.deadline, 'txHash', t.tx_hash,
         'broadcasts', (SELECT coalesce(json_agg(json_build_object('hash', b.hash, 'rawTx', b.raw_tx,
             'maxFeePerGas', b.max_fee_per_gas::text, 'maxPriorityFeePerGas', b.max_priority_fee_per_gas::text,
             'noop', b.noop, 'sentAt', ${MS("b.sent_at")}) ORDER BY b.seq), '[]'::json)
           FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce WHERE s.trade_id = t.id),
         'receipt', t.receipt, 'error', t.error, 'approval', t.approval, 'keyName', t.key_name, 'cancel', t.cancel,
         'createdAt', ${MS("t.created_at")}, 'updatedAt', ${MS("t.updated_at")}),
       t.updated_at, t.updated_at, t.updated_at);
   END
   $fn$;`;

/** Migration 17 (cancels.ts): trade.cancelled and trade.cancel_failed, the cancel in each snapshot. */
export const CANCELS_EVENT_FUNCTIONS = `${CANCELS_INSERT_FUNCTION}
   ${eventFunction(
     "CREATE OR REPLACE",
     "SELECT 1 FROM webhook_registrations WHERE scope = NEW.scope AND expires_at > clock_timestamp()",
     true,
     true,
   )}`;

/** The outbox's tables, and the trigger: the same rule as webhookEventType (webhook-events.ts). */
export const WEBHOOKS_MIGRATION = `CREATE TABLE webhook_scopes (scope TEXT PRIMARY KEY);
   CREATE TABLE webhook_events (
     seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,   -- order of writing
     id TEXT NOT NULL UNIQUE,                 -- webhook-id: msg_ and 32 hex digits
     scope TEXT NOT NULL,
     trade_id TEXT NOT NULL,
     type TEXT NOT NULL,
     trade JSON NOT NULL,                     -- the trade right after the change
     created_at TIMESTAMPTZ NOT NULL,
     status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
     attempts INTEGER NOT NULL DEFAULT 0,
     next_attempt_at TIMESTAMPTZ NOT NULL,
     window_start TIMESTAMPTZ NOT NULL,       -- retries stop a while after this
     lease_holder TEXT,
     lease_until TIMESTAMPTZ
   );
   CREATE INDEX webhook_events_pending ON webhook_events (trade_id, seq) WHERE status = 'pending';
   CREATE INDEX webhook_events_due ON webhook_events (seq) WHERE status = 'pending';
   CREATE INDEX webhook_events_scope ON webhook_events (scope, seq);
   CREATE INDEX webhook_events_scope_status ON webhook_events (scope, status, seq);
   CREATE TABLE webhook_attempts (
     seq BIGINT GENERATED ALWAYS AS IDENTITY,
     event_id TEXT NOT NULL,
     at TIMESTAMPTZ NOT NULL,
     status_code INTEGER,                     -- NULL: no answer
     error TEXT
   );
   CREATE INDEX webhook_attempts_event ON webhook_attempts (event_id, seq);
   ${eventFunction("CREATE", "SELECT 1 FROM webhook_scopes WHERE scope = NEW.scope")}
   CREATE TRIGGER trades_webhook_event AFTER UPDATE OF status, tx_hash ON trades
     FOR EACH ROW EXECUTE FUNCTION trades_webhook_event();`;

/**
 * Which scopes get events, held per instance: each instance registers the scopes of its own
 * WEBHOOKS_FILE and renews them while it runs (registerWebhookScopes), and the trigger writes an
 * event while any instance's registration of the trade's scope is live. It replaces the one set
 * shared by all (webhook_scopes), which each instance overwrote with its own at start.
 */
export const WEBHOOK_REGISTRATIONS_MIGRATION = `CREATE TABLE webhook_registrations (
     scope TEXT NOT NULL,
     holder TEXT NOT NULL,                    -- the instance whose WEBHOOKS_FILE has the scope's endpoint
     expires_at TIMESTAMPTZ NOT NULL,         -- live until then: renewed while the instance runs
     PRIMARY KEY (scope, holder)
   );
   CREATE INDEX webhook_registrations_holder ON webhook_registrations (holder);
   ${eventFunction(
     "CREATE OR REPLACE",
     "SELECT 1 FROM webhook_registrations WHERE scope = NEW.scope AND expires_at > clock_timestamp()",
   )}
   DROP TABLE webhook_scopes;`;

/** The webhook function of migration 15 (approvals.ts): the approvals' events, the trade's approval in each snapshot. */
export const APPROVALS_EVENT_FUNCTION = eventFunction(
  "CREATE OR REPLACE",
  "SELECT 1 FROM webhook_registrations WHERE scope = NEW.scope AND expires_at > clock_timestamp()",
  true,
);

/**
 * When each event finished (was delivered, or failed), so that the upkeep deletes those finished
 * WEBHOOK_RETENTION_DAYS ago (sweepWebhookEvents); the events already finished take their last
 * attempt's time (or their creation's).
 */
export const WEBHOOK_RETENTION_MIGRATION = `ALTER TABLE webhook_events ADD COLUMN finished_at TIMESTAMPTZ;   -- NULL while pending
   UPDATE webhook_events e SET finished_at = coalesce((SELECT max(a.at) FROM webhook_attempts a WHERE a.event_id = e.id), e.created_at)
     WHERE e.status <> 'pending';
   CREATE INDEX webhook_events_finished ON webhook_events (finished_at) WHERE finished_at IS NOT NULL;`;

interface EventRow {
  seq: string;
  id: string;
  scope: string;
  trade_id: string | null;
  type: WebhookEvent["type"];
  trade: TradeSnapshot | null;
  data: WebhookEvent["data"];
  created_at: Date;
  status: WebhookEvent["status"];
  attempts: number;
  next_attempt_at: Date;
  window_start: Date;
}

export class PostgresOutbox implements WebhookOutbox {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  /**
   * One statement: `holder`'s scopes upserted, its other ones dropped, and others' lapsed ones
   * forgotten (each row touched by one of the three only).
   */
  async registerWebhookScopes(
    holder: string,
    scopes: readonly string[],
    ttlMs: number,
    watchers: readonly string[] = [],
  ): Promise<void> {
    await this.#pool.query(
      `WITH renewed AS (
         INSERT INTO webhook_registrations (scope, holder, expires_at, watcher)
         SELECT s, $1, clock_timestamp() + make_interval(secs => $3 / 1000.0), s = ANY($4::text[])
         FROM unnest($2::text[]) AS s
         ON CONFLICT (scope, holder) DO UPDATE SET expires_at = EXCLUDED.expires_at, watcher = EXCLUDED.watcher
       ),
       dropped AS (DELETE FROM webhook_registrations WHERE holder = $1 AND NOT (scope = ANY($2)))
       DELETE FROM webhook_registrations WHERE holder <> $1 AND expires_at <= clock_timestamp()`,
      [holder, scopes, ttlMs, watchers],
    );
  }

  /**
   * One statement: each scope's due heads (up to its limit) are locked as read, and those
   * another claimer holds locked are skipped rather than waited for; the lease is set before the
   * locks go at its commit. A head whose lease is running is not due, so no two holders have one
   * event at once.
   */
  async claimWebhookEvents(
    holder: string,
    limits: ReadonlyMap<string, number>,
    leaseMs: number,
  ): Promise<WebhookEvent[]> {
    if (limits.size === 0) return [];
    const { rows } = await this.#pool.query<EventRow>(
      `WITH due AS (
         SELECT d.seq FROM unnest($2::text[], $3::int[]) AS wanted(scope, n)
         CROSS JOIN LATERAL (
           SELECT e.seq FROM webhook_events e
           WHERE e.scope = wanted.scope AND e.status = 'pending' AND e.next_attempt_at <= clock_timestamp()
           AND (e.lease_until IS NULL OR e.lease_until <= clock_timestamp())
           AND NOT EXISTS (SELECT 1 FROM webhook_events p WHERE p.trade_id = e.trade_id AND p.status = 'pending' AND p.seq < e.seq)
           AND NOT EXISTS (SELECT 1 FROM webhook_events q WHERE q.subject = e.subject AND q.scope = e.scope
             AND q.status = 'pending' AND q.seq < e.seq)
           ORDER BY e.seq LIMIT wanted.n
           FOR UPDATE SKIP LOCKED
         ) d
       )
       UPDATE webhook_events w SET lease_holder = $1, lease_until = clock_timestamp() + make_interval(secs => $4 / 1000.0)
       FROM due WHERE w.seq = due.seq
       RETURNING w.*`,
      [holder, [...limits.keys()], [...limits.values()], leaseMs],
    );
    return rows.map(toEvent).sort((a, b) => a.seq - b.seq);
  }

  async failOrphanedWebhookEvents(windowStartBefore: Date, limit: number): Promise<number> {
    const { rowCount } = await this.#pool.query(
      `WITH orphans AS (
         SELECT e.seq FROM webhook_events e
         WHERE e.status = 'pending' AND e.window_start < $1
         AND (e.lease_until IS NULL OR e.lease_until <= clock_timestamp())
         AND NOT EXISTS (SELECT 1 FROM webhook_registrations r WHERE r.scope = e.scope AND r.expires_at > clock_timestamp())
         ORDER BY e.seq LIMIT $2
         FOR UPDATE SKIP LOCKED
       ),
       failed AS (
         UPDATE webhook_events w SET status = 'failed', attempts = attempts + 1, lease_holder = NULL, lease_until = NULL,
         finished_at = clock_timestamp()
         FROM orphans WHERE w.seq = orphans.seq RETURNING w.id
       )
       INSERT INTO webhook_attempts (event_id, at, status_code, error) SELECT id, clock_timestamp(), NULL, $3 FROM failed`,
      [windowStartBefore, limit, ORPHANED_EVENT_ERROR],
    );
    return rowCount ?? 0;
  }

  async recordWebhookAttempt(
    id: string,
    holder: string,
    attempt: WebhookAttempt,
    outcome: WebhookOutcome,
  ): Promise<boolean> {
    const { rowCount } = await this.#pool.query(
      `WITH e AS (
         UPDATE webhook_events SET status = $3, attempts = attempts + 1, next_attempt_at = coalesce($4, next_attempt_at),
         lease_holder = NULL, lease_until = NULL, finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE $5::timestamptz END
         WHERE id = $1 AND lease_holder = $2 RETURNING id
       )
       INSERT INTO webhook_attempts (event_id, at, status_code, error) SELECT id, $5, $6, $7 FROM e`,
      [
        id,
        holder,
        outcome.status,
        outcome.status === "pending" ? outcome.nextAttemptAt : null,
        attempt.at,
        attempt.statusCode,
        attempt.error,
      ],
    );
    return rowCount === 1;
  }

  async listWebhookDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage> {
    const values: unknown[] = [];
    const where = [scopesWhere(query.scopes, values)];
    if (query.status !== undefined) where.push(`status = $${values.push(query.status)}`);
    if (query.before !== undefined) where.push(`seq < $${values.push(query.before)}`);
    const { rows } = await this.#pool.query<EventRow>(
      `SELECT * FROM webhook_events WHERE ${where.join(" AND ")} ORDER BY seq DESC LIMIT $${values.push(query.limit + 1)}`,
      values,
    );
    const page = rows.slice(0, query.limit);
    const deliveries = await this.#withHistory(page);
    return { deliveries, next: rows.length > query.limit ? Number(page.at(-1)!.seq) : null };
  }

  async retryWebhookDelivery(
    scopes: WebhookScopes,
    id: string,
    now: Date,
    audit?: AuditEntry,
  ): Promise<WebhookDelivery | "not_failed" | undefined> {
    const values: unknown[] = [id, now];
    const visible = scopesWhere(scopes, values);
    const retry = `UPDATE webhook_events SET status = 'pending', next_attempt_at = $2, window_start = $2, finished_at = NULL
       WHERE id = $1 AND ${visible} AND status = 'failed' RETURNING *`;
    // With `audit`, its record in the same statement, only for an event it retried.
    const append = audit === undefined ? undefined : auditAppendCall(audit, values.length + 1);
    const updated =
      append === undefined
        ? await this.#pool.query<EventRow>(retry, values)
        : await this.#pool.query<EventRow>(`WITH u AS (${retry}) SELECT u.*, ${append.sql} AS audit FROM u`, [
            ...values,
            ...append.values,
          ]);
    if (updated.rows[0]) return (await this.#withHistory(updated.rows))[0];
    const asked: unknown[] = [id];
    const found = await this.#pool.query(
      `SELECT 1 FROM webhook_events WHERE id = $1 AND ${scopesWhere(scopes, asked)}`,
      asked,
    );
    return found.rowCount === 1 ? "not_failed" : undefined;
  }

  async webhookStats(): Promise<WebhookOutboxStats> {
    const { rows } = await this.#pool.query<{ pending: number; oldest: Date | null }>(
      "SELECT count(*)::int AS pending, min(created_at) AS oldest FROM webhook_events WHERE status = 'pending'",
    );
    return { pending: rows[0]?.pending ?? 0, oldestPendingAt: rows[0]?.oldest ?? null };
  }

  /** One statement: a page of the oldest finished events locked (others' skipped), deleted, and their attempts with them. */
  async sweepWebhookEvents(finishedBefore: Date, limit: number): Promise<number> {
    const { rows } = await this.#pool.query<{ deleted: number }>(
      `WITH page AS (
         SELECT seq FROM webhook_events WHERE finished_at < $1 AND status <> 'pending'
         ORDER BY finished_at LIMIT $2
         FOR UPDATE SKIP LOCKED
       ),
       gone AS (DELETE FROM webhook_events e USING page WHERE e.seq = page.seq RETURNING e.id),
       attempts AS (DELETE FROM webhook_attempts a USING gone WHERE a.event_id = gone.id)
       SELECT count(*)::int AS deleted FROM gone`,
      [finishedBefore, limit],
    );
    return rows[0]?.deleted ?? 0;
  }

  async #withHistory(rows: EventRow[]): Promise<WebhookDelivery[]> {
    if (rows.length === 0) return [];
    const { rows: attempts } = await this.#pool.query<{
      event_id: string;
      at: Date;
      status_code: number | null;
      error: string | null;
    }>("SELECT event_id, at, status_code, error FROM webhook_attempts WHERE event_id = ANY($1) ORDER BY seq", [
      rows.map((row) => row.id),
    ]);
    return rows.map((row) => ({
      ...toEvent(row),
      history: attempts
        .filter((a) => a.event_id === row.id)
        .map((a) => ({ at: a.at, statusCode: a.status_code, error: a.error })),
    }));
  }
}

function toEvent(row: EventRow): WebhookEvent {
  return {
    seq: Number(row.seq),
    id: row.id,
    scope: row.scope,
    tradeId: row.trade_id,
    type: row.type,
    trade: row.trade === null ? null : snapshotToRecord(row.trade),
    data: row.data ?? null,
    createdAt: row.created_at,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    windowStart: row.window_start,
  };
}

/** The condition on webhook_events for the scopes a caller sees, its value pushed on `values`. */
function scopesWhere(scopes: WebhookScopes, values: unknown[]): string {
  if (scopes === "all") return "TRUE";
  return `scope = ANY($${values.push(scopes)})`;
}
