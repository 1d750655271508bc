/**
 * The SQLite journal's approvals (ApprovalJournal): migration 14, which gives the trades the
 * approvals' states and columns, and the changes of a held trade, each with its audit record in
 * one savepoint of the group commit (store.write(run, true)).
 */
import type { DatabaseSync } from "node:sqlite";

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
  type TradeOperation,
  type TradeRecord,
  TradeTransitionError,
} from "../../../core/index.js";
import { SPENDING_STATUSES_SQL } from "../spending.js";
import { applies, decide, statusAfter } from "../transitions.js";
import type { SqliteAudit } from "./audit.js";
import { type Row, toRecord, tradeState } from "./rows.js";
import { spendsTriggers } from "./spending.js";
import type { SqliteStore } from "./store.js";
import { APPROVALS_EVENT_TRIGGER } from "./webhooks.js";

/** The columns of `trades` before migration 14, in their order. */
const COLUMNS_BEFORE = `id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx,
   deadline, receipt, error, created_at, updated_at, amount_in, amount_out, gas_wei, native_usd, gas_usd, key_name`;

/**
 * Migration 14: the approvals. SQLite cannot change a CHECK constraint, so `trades` is rebuilt
 * with the new states and two columns (the approval, and when a held one expires, for the sweep's
 * index), its indexes made again (and one of the held trades in the history's order, for the
 * approvers' list), and its triggers: the webhook events (the approvals' own, the
 * approval in each snapshot) and the spends' recount (a held or approved trade keeps its room).
 */
export const APPROVALS_MIGRATION = `DROP TRIGGER trades_webhook_event;
   DROP TRIGGER trades_spends_recount;
   DROP TRIGGER trades_spends_forget;
   CREATE TABLE trades_v13 (
     id TEXT PRIMARY KEY,
     scope TEXT NOT NULL,
     idempotency_key TEXT,
     request_hash TEXT NOT NULL,
     kind TEXT NOT NULL,
     request TEXT NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('accepted', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'expired',
       'pending_approval', 'approved', 'rejected')),
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
     approval TEXT,                        -- JSON (TradeApproval): what a held trade's approval needs and has
     hold_until INTEGER                    -- ms since the epoch: when a held trade's approval expires
   );
   INSERT INTO trades_v13 (${COLUMNS_BEFORE}) SELECT ${COLUMNS_BEFORE} FROM trades ORDER BY rowid;
   DROP TABLE trades;
   ALTER TABLE trades_v13 RENAME TO trades;
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
   ${APPROVALS_EVENT_TRIGGER}
   ${spendsTriggers(SPENDING_STATUSES_SQL)}`;

function statements(db: DatabaseSync) {
  return {
    held: db.prepare(
      `UPDATE trades SET status = ${statusAfter("markHeld")}, approval = ?, hold_until = ?, updated_at = ?
       WHERE id = ? AND ${applies("markHeld")}`,
    ),
    row: db.prepare("SELECT * FROM trades WHERE id = ?"),
    status: db.prepare("SELECT status, tx_hash FROM trades WHERE id = ?"),
    // decideOn read the trade held, in the same synchronous step.
    decided: db.prepare(
      "UPDATE trades SET status = ?, approval = ?, error = coalesce(?, error), updated_at = ? WHERE id = ? AND status = 'pending_approval'",
    ),
    expired: db.prepare(
      `UPDATE trades SET status = ${statusAfter("expireApproval")}, error = ?, updated_at = ? WHERE id = ? AND ${applies("expireApproval")}`,
    ),
    due: db.prepare("SELECT id, approval FROM trades WHERE status = 'pending_approval' AND hold_until <= ?"),
    stale: db.prepare("SELECT id FROM trades WHERE status = 'approved' AND updated_at < ?"),
    approved: db.prepare("SELECT id FROM trades WHERE status = 'approved'"),
    interrupted: db.prepare(
      `UPDATE trades SET status = ${statusAfter("markFailed")}, error = ?, updated_at = ? WHERE id = ? AND status = 'approved'`,
    ),
  };
}

export class SqliteApprovals implements ApprovalJournal {
  readonly #store: SqliteStore;
  readonly #audit: SqliteAudit;
  readonly #sql: ReturnType<typeof statements>;
  /** The trade as the trades port reads it (with its broadcasts, once it has some). */
  readonly #get: (id: string) => Promise<TradeRecord | undefined>;

  /**
   * The approved trades the file held when this process opened it: their runs were a process's
   * that is gone (one process holds the file), so each is failed at the first sweep. Found by
   * status, not by time, so that a clock stepped back never takes this process's own for them.
   */
  readonly #inherited: Set<string>;

  constructor(store: SqliteStore, audit: SqliteAudit, get: (id: string) => Promise<TradeRecord | undefined>) {
    this.#store = store;
    this.#audit = audit;
    this.#sql = statements(store.db);
    this.#get = get;
    this.#inherited = new Set(this.#sql.approved.all().map((row) => row.id as string));
  }

  hold(id: string, approval: TradeApproval, audit: AuditEntry): Promise<void> {
    return this.#store.write(() => {
      const held = this.#sql.held.run(JSON.stringify(approval), Date.parse(approval.expiresAt), Date.now(), id);
      if (Number(held.changes) > 0) {
        this.#audit.appendIn(audit);
        return;
      }
      this.#missed("markHeld", id);
    }, true);
  }

  async decideApproval(
    id: string,
    verdict: ApprovalVerdict,
    decision: ApprovalDecision,
  ): Promise<{ outcome: DecisionOutcome; record: TradeRecord }> {
    const operation = verdict === "approve" ? "markApproved" : "markRejected";
    // Nothing is thrown inside the write: a savepoint that throws is undone, and an expiry must stay.
    const step = await this.#store.write(() => {
      const row = this.#sql.row.get(id);
      if (row === undefined) return { kind: "unknown" as const };
      const trade = toRecord(row, []);
      const found = decideOn(trade, verdict, decision);
      if (found.kind === "expired") this.#expire(trade);
      if (found.kind !== "applies") return { ...found, trade };
      const error = found.outcome === "rejected" ? JSON.stringify(rejectedError(decision)) : null;
      this.#sql.decided.run(found.status, JSON.stringify(found.approval), error, Date.now(), id);
      this.#audit.appendIn(decisionEntry(id, found.outcome, decision, found.approval));
      return { ...found, trade: toRecord(this.#sql.row.get(id)!, []) };
    }, true);
    if (step.kind === "unknown") throw new Error(`trade ${id} is not in the journal`);
    if (step.kind === "applies") return { outcome: step.outcome, record: step.trade };
    if (step.kind === "repeated") return { outcome: "repeated", record: (await this.#get(id)) ?? step.trade };
    const now = (await this.#get(id)) ?? step.trade;
    throw new TradeTransitionError(operation, id, now);
  }

  async expireApprovals(now: Date, staleBefore: Date): Promise<{ expired: string[]; failed: string[] }> {
    // Read first: a sweep that finds nothing (nearly every one) writes nothing.
    const due = this.#sql.due.all(now.getTime());
    const stale = this.#sql.stale.all(staleBefore.getTime());
    if (this.#inherited.size > 0) {
      const ids = new Set(stale.map((row) => row.id as string));
      for (const id of this.#inherited) if (!ids.has(id)) stale.push({ id });
    }
    if (due.length === 0 && stale.length === 0) return { expired: [], failed: [] };
    return this.#store.write(() => {
      const expired: string[] = [];
      for (const row of due) {
        const approval = JSON.parse(row.approval as string) as TradeApproval;
        if (this.#expire({ id: row.id as string, approval })) expired.push(row.id as string);
      }
      const failed: string[] = [];
      const at = Date.now();
      for (const row of stale) {
        const id = row.id as string;
        if (Number(this.#sql.interrupted.run(JSON.stringify(INTERRUPTED_ERROR), at, id).changes) === 0) continue;
        this.#audit.appendIn(interruptedEntry(id));
        failed.push(id);
      }
      // Each failed now, or no longer approved (signed, failed): none is looked at again.
      this.#inherited.clear();
      return { expired, failed };
    }, true);
  }

  /** Expires the held trade, its audit record with it; whether it was still held. */
  #expire(trade: { id: string; approval?: TradeApproval | null | undefined }): boolean {
    const approval = trade.approval!;
    const error = JSON.stringify(approvalExpiredError(approval));
    if (Number(this.#sql.expired.run(error, Date.now(), trade.id).changes) === 0) return false;
    this.#audit.appendIn(approvalExpiredEntry(trade.id, approval));
    return true;
  }

  /** After `operation`'s statement changed nothing: refused or unknown throws, ignored returns (../transitions.ts). */
  #missed(operation: TradeOperation, id: string): void {
    const row = this.#sql.status.get(id) as Row | undefined;
    decide(operation, id, row && tradeState(row));
  }
}
