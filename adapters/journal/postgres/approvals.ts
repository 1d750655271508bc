/**
 * The PostgreSQL journal's approvals (ApprovalJournal): migration 15, which gives the trades the
 * approvals' states and columns, and the changes of a held trade, each in a transaction whose last
 * statement appends its audit record (audit_append holds the chain's head until the commit, so
 * nothing after it waits for another lock). A decision locks the trade's row first: of two
 * approvals on one trade, the second reads what the first wrote.
 */
import type pg from "pg";

import {
  type ApprovalDecision,
  type ApprovalJournal,
  type ApprovalVerdict,
  type AuditEntry,
  approvalExpiredEntry,
  approvalExpiredError,
  decideOn,
  decisionEntry,
  type DecisionOutcome,
  INTERRUPTED_ERROR,
  interruptedEntry,
  rejectedError,
  type TradeApproval,
  type TradeRecord,
  type TradeStatus,
  TradeTransitionError,
} from "../../../core/index.js";
import { SPENDING_STATUSES_SQL } from "../spending.js";
import { applies, decide, statusAfter } from "../transitions.js";
import { appendAudit } from "./audit.js";
import { COLUMNS, type Row, toRecord } from "./rows.js";
import { spendsRecountUnderLocks } from "./spend-locks.js";
import { spendsRecountTrigger } from "./spending.js";
import { transaction } from "./store.js";
import { APPROVALS_EVENT_FUNCTION } from "./webhooks.js";

/**
 * Migration 15: the approvals' states in the status constraint, each held trade's approval and
 * when it expires (the sweep's index), the held trades in the history's order (the approvers'
 * list), the webhook events of the approvals (the approval in each
 * snapshot), and the spends' recount made again with a held or approved trade keeping its room.
 */
export const APPROVALS_MIGRATION = `ALTER TABLE trades DROP CONSTRAINT IF EXISTS trades_status_check;
   ALTER TABLE trades ADD CONSTRAINT trades_status_check
     CHECK (status IN ('accepted', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'expired',
       'pending_approval', 'approved', 'rejected'));
   ALTER TABLE trades ADD COLUMN approval JSON,     -- TradeApproval: what a held trade's approval needs and has
     ADD COLUMN hold_until TIMESTAMPTZ;             -- when a held trade's approval expires
   CREATE INDEX trades_held ON trades (hold_until) WHERE status = 'pending_approval';
   CREATE INDEX trades_pending_approval ON trades (created_at DESC, id DESC) WHERE status = 'pending_approval';
   CREATE INDEX trades_approved ON trades (updated_at) WHERE status = 'approved';
   ${APPROVALS_EVENT_FUNCTION}
   DROP TRIGGER trades_spends_recount ON trades;
   ${spendsRecountUnderLocks(SPENDING_STATUSES_SQL)}
   ${spendsRecountTrigger(SPENDING_STATUSES_SQL)}`;

/** What a decision found, once its transaction committed. */
type Step =
  | { kind: "applies"; outcome: Exclude<DecisionOutcome, "repeated">; record: TradeRecord }
  | { kind: "repeated" | "refused" | "expired"; record: TradeRecord };

/**
 * An approved trade whose run was cut short, by the database's clock ($1: the bound for any run,
 * in ms; $2: this instance; $3: the grace, in ms): unchanged for $1, or owned by another instance
 * whose lease ran out more than $3 ago (it stopped, and its runs went with it; a live instance
 * whose renewal is late is not taken for gone), or by none.
 */
const STALE_RUN = `(updated_at < clock_timestamp() - make_interval(secs => $1::float8 / 1000) OR owner IS NULL
  OR (owner <> $2 AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.name = 'instance:' || trades.owner
    AND l.expires_at > clock_timestamp() - make_interval(secs => $3::float8 / 1000))))`;

export class PostgresApprovals implements ApprovalJournal {
  readonly #pool: pg.Pool;
  /** The trade as the trades port reads it (with its broadcasts, once it has some). */
  readonly #get: (id: string) => Promise<TradeRecord | undefined>;

  /** This instance's name: the owner of the approved trades it runs, while its lease lives. */
  readonly #instance: string;
  /** How long past its lease's end another instance's run is still taken for alive: a lease's length. */
  readonly #graceMs: number;

  constructor(
    pool: pg.Pool,
    instance: { name: string; leaseMs: number },
    get: (id: string) => Promise<TradeRecord | undefined>,
  ) {
    this.#pool = pool;
    this.#instance = instance.name;
    this.#graceMs = instance.leaseMs;
    this.#get = get;
  }

  async hold(id: string, approval: TradeApproval, audit: AuditEntry): Promise<void> {
    const held = await transaction(this.#pool, async (client) => {
      const { rowCount } = await client.query(
        `UPDATE trades SET status = ${statusAfter("markHeld")}, approval = $2, hold_until = $3, updated_at = clock_timestamp()
         WHERE id = $1 AND ${applies("markHeld")}`,
        [id, JSON.stringify(approval), approval.expiresAt],
      );
      if (rowCount === 0) return false;
      await appendAudit(client, audit);
      return true;
    });
    if (held) return;
    const { rows } = await this.#pool.query<{ status: TradeStatus; tx_hash: string | null }>(
      "SELECT status, tx_hash FROM trades WHERE id = $1",
      [id],
    );
    decide("markHeld", id, rows[0] && { status: rows[0].status, txHash: rows[0].tx_hash });
  }

  async decideApproval(
    id: string,
    verdict: ApprovalVerdict,
    decision: ApprovalDecision,
  ): Promise<{ outcome: DecisionOutcome; record: TradeRecord }> {
    const step = await transaction(this.#pool, async (client): Promise<Step | undefined> => {
      const { rows } = await client.query<Row>(`SELECT ${COLUMNS} FROM trades WHERE id = $1 FOR UPDATE`, [id]);
      if (rows[0] === undefined) return undefined;
      const trade = toRecord(rows[0], []);
      const found = decideOn(trade, verdict, decision);
      if (found.kind === "expired") await this.#expire(client, trade);
      if (found.kind !== "applies") return { kind: found.kind, record: trade };
      const error = found.outcome === "rejected" ? JSON.stringify(rejectedError(decision)) : null;
      // The approval that completes it makes this instance, which runs it, the trade's owner.
      const updated = await client.query<Row>(
        `UPDATE trades SET status = $2, approval = $3, error = coalesce($4::json, error), updated_at = clock_timestamp(),
         owner = CASE WHEN $2 = 'approved' THEN $5 ELSE owner END
         WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, found.status, JSON.stringify(found.approval), error, this.#instance],
      );
      await appendAudit(client, decisionEntry(id, found.outcome, decision, found.approval));
      return { kind: "applies", outcome: found.outcome, record: toRecord(updated.rows[0]!, []) };
    });
    if (step === undefined) throw new Error(`trade ${id} is not in the journal`);
    if (step.kind === "applies") return { outcome: step.outcome, record: step.record };
    const now = (await this.#get(id)) ?? step.record;
    if (step.kind === "repeated") return { outcome: "repeated", record: now };
    throw new TradeTransitionError(verdict === "approve" ? "markApproved" : "markRejected", id, now);
  }

  async expireApprovals(now: Date, staleBefore: Date): Promise<{ expired: string[]; failed: string[] }> {
    const due = await this.#pool.query<{ id: string }>(
      "SELECT id FROM trades WHERE status = 'pending_approval' AND hold_until <= $1 ORDER BY hold_until LIMIT 1000",
      [now],
    );
    const expired: string[] = [];
    // One transaction each: the audit record is its last statement, and holds the chain's head.
    for (const { id } of due.rows) {
      const done = await transaction(this.#pool, async (client) => {
        const { rows } = await client.query<Row>(`SELECT ${COLUMNS} FROM trades WHERE id = $1 FOR UPDATE`, [id]);
        return rows[0] !== undefined && (await this.#expire(client, toRecord(rows[0], [])));
      });
      if (done) expired.push(id);
    }
    // The bound as a length of time, compared with the database's clock (which wrote updated_at).
    const staleMs = Date.now() - staleBefore.getTime();
    const stale = await this.#pool.query<{ id: string }>(
      `SELECT id FROM trades WHERE status = 'approved' AND ${STALE_RUN} LIMIT 1000`,
      [staleMs, this.#instance, this.#graceMs],
    );
    const failed: string[] = [];
    for (const { id } of stale.rows) {
      const done = await transaction(this.#pool, async (client) => {
        const { rowCount } = await client.query(
          `UPDATE trades SET status = ${statusAfter("markFailed")}, error = $4, updated_at = clock_timestamp()
           WHERE id = $5 AND status = 'approved' AND ${STALE_RUN}`,
          [staleMs, this.#instance, this.#graceMs, JSON.stringify(INTERRUPTED_ERROR), id],
        );
        if (rowCount === 0) return false;
        await appendAudit(client, interruptedEntry(id));
        return true;
      });
      if (done) failed.push(id);
    }
    return { expired, failed };
  }

  /** Expires the held trade (its row locked), its audit record last; whether it was still held. */
  async #expire(client: pg.PoolClient, trade: TradeRecord): Promise<boolean> {
    if (trade.status !== "pending_approval" || trade.approval == null) return false;
    const { rowCount } = await client.query(
      `UPDATE trades SET status = ${statusAfter("expireApproval")}, error = $2, updated_at = clock_timestamp()
       WHERE id = $1 AND ${applies("expireApproval")}`,
      [trade.id, JSON.stringify(approvalExpiredError(trade.approval))],
    );
    if (rowCount === 0) return false;
    await appendAudit(client, approvalExpiredEntry(trade.id, trade.approval));
    return true;
  }
}
