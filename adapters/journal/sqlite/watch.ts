/**
 * The SQLite journal's part of the watch (core/ports/watch.port.ts), and its migration: the
 * outside transactions recorded once each, the wallets paused, the alarms raised; each change
 * written in one savepoint of the group commit (store.ts) with its events (one per watcher scope
 * a live registration holds) and its audit record.
 */
import type { StatementSync } from "node:sqlite";

import type {
  AuditEntry,
  OutsideTransaction,
  WalletPause,
  WatchEvent,
  WatchJournal,
  WatchedNonce,
} from "../../../core/index.js";
import type { SqliteAudit } from "./audit.js";
import type { Row } from "./rows.js";
import type { SqliteStore } from "./store.js";
import { APPROVALS_EVENT_TRIGGER } from "./webhooks.js";

/**
 * Migration 15: events without a trade (about a wallet or the swap: no trade, its `data` instead,
 * and the `subject` whose events go out in order per scope), so the outbox's table is rebuilt
 * (SQLite cannot drop a NOT NULL), its trigger made again as the approvals (migration 14) left it;
 * which registrations get them (`watcher`); and the watch's own tables.
 */
export const WATCH_MIGRATION = `DROP TRIGGER trades_webhook_event;
   CREATE TABLE webhook_events_v2 (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     id TEXT NOT NULL UNIQUE,
     scope TEXT NOT NULL,
     trade_id TEXT,                           -- NULL: an event about a wallet or the swap
     type TEXT NOT NULL,
     trade TEXT,                              -- JSON: the trade right after the change; NULL without one
     subject TEXT,                            -- a wallet's address, or swap:<symbol>; NULL for a trade's event
     data TEXT,                               -- JSON: the wallet's or the swap's state; NULL for a trade's event
     created_at INTEGER NOT NULL,
     status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
     attempts INTEGER NOT NULL DEFAULT 0,
     next_attempt_at INTEGER NOT NULL,
     window_start INTEGER NOT NULL,
     lease_holder TEXT,
     lease_until INTEGER,
     finished_at INTEGER
   );
   INSERT INTO webhook_events_v2 (seq, id, scope, trade_id, type, trade, created_at, status, attempts,
       next_attempt_at, window_start, lease_holder, lease_until, finished_at)
     SELECT seq, id, scope, trade_id, type, trade, created_at, status, attempts, next_attempt_at, window_start,
       lease_holder, lease_until, finished_at FROM webhook_events ORDER BY seq;
   DROP TABLE webhook_events;
   ALTER TABLE webhook_events_v2 RENAME TO webhook_events;
   CREATE INDEX webhook_events_pending ON webhook_events (trade_id, seq) WHERE status = 'pending';
   CREATE INDEX webhook_events_subject ON webhook_events (subject, scope, seq) WHERE status = 'pending' AND subject IS NOT NULL;
   CREATE INDEX webhook_events_due ON webhook_events (seq) WHERE status = 'pending';
   CREATE INDEX webhook_events_scope ON webhook_events (scope, seq);
   CREATE INDEX webhook_events_scope_status ON webhook_events (scope, status, seq);
   CREATE INDEX webhook_events_finished ON webhook_events (finished_at) WHERE finished_at IS NOT NULL;
   ${APPROVALS_EVENT_TRIGGER}
   ALTER TABLE webhook_registrations ADD COLUMN watcher INTEGER NOT NULL DEFAULT 0;   -- 1: gets the watch's events
   CREATE TABLE outside_transactions (
     wallet TEXT NOT NULL,                    -- lower case
     nonce INTEGER NOT NULL,
     hash TEXT,                               -- NULL: only the nonce was seen used
     to_address TEXT,
     value TEXT,                              -- wei, decimal text
     block_number INTEGER NOT NULL,
     recorded_at INTEGER NOT NULL,
     PRIMARY KEY (wallet, nonce)
   ) WITHOUT ROWID;
   CREATE TABLE wallet_pauses (
     wallet TEXT PRIMARY KEY,                 -- lower case
     since INTEGER NOT NULL,                  -- ms since the epoch
     nonce INTEGER NOT NULL,
     hash TEXT
   ) WITHOUT ROWID;
   CREATE TABLE watch_alarms (
     name TEXT PRIMARY KEY,
     raised INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   ) WITHOUT ROWID;`;

/**
 * Migration 17: where the watch left each wallet on each chain (WatchedNonce), so that a start
 * looks at the nonces the wallet used while no instance ran.
 */
export const WATCHED_NONCES_MIGRATION = `CREATE TABLE watched_nonces (
     wallet TEXT NOT NULL,                    -- lower case
     chain_id INTEGER NOT NULL,
     nonce INTEGER NOT NULL,                  -- the next nonce: every one below it explained
     block_number INTEGER NOT NULL,           -- as of this block
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (wallet, chain_id)
   ) WITHOUT ROWID;`;

function statements(store: SqliteStore) {
  const { db } = store;
  return {
    insertOutside: db.prepare(
      `INSERT INTO outside_transactions (wallet, nonce, hash, to_address, value, block_number, recorded_at)
       VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    ),
    pause: db.prepare(
      "INSERT INTO wallet_pauses (wallet, since, nonce, hash) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ),
    pauses: db.prepare("SELECT * FROM wallet_pauses ORDER BY wallet"),
    pauseOf: db.prepare("SELECT * FROM wallet_pauses WHERE wallet = ?"),
    resume: db.prepare("DELETE FROM wallet_pauses WHERE wallet = ?"),
    alarm: db.prepare(
      `INSERT INTO watch_alarms (name, raised, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET raised = excluded.raised, updated_at = excluded.updated_at
       WHERE watch_alarms.raised <> excluded.raised`,
    ),
    alarmOf: db.prepare("SELECT raised FROM watch_alarms WHERE name = ?"),
    alarms: db.prepare("SELECT name FROM watch_alarms WHERE raised = 1 ORDER BY name"),
    known: db.prepare("SELECT 1 FROM broadcasts WHERE hash = ? AND wallet = ?"),
    watched: db.prepare("SELECT nonce, block_number FROM watched_nonces WHERE wallet = ? AND chain_id = ?"),
    // Forward only, unless the last parameter (back) is 1.
    saveWatched: db.prepare(
      `INSERT INTO watched_nonces (wallet, chain_id, nonce, block_number, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (wallet, chain_id) DO UPDATE SET nonce = excluded.nonce, block_number = excluded.block_number,
         updated_at = excluded.updated_at
       WHERE excluded.nonce > watched_nonces.nonce OR ? = 1`,
    ),
    // One event per watcher scope a live registration holds.
    event: db.prepare(
      `INSERT INTO webhook_events (id, scope, trade_id, type, trade, subject, data, created_at, next_attempt_at, window_start)
       SELECT 'msg_' || lower(hex(randomblob(16))), scope, NULL, ?, NULL, ?, ?, ?, ?, ?
       FROM (SELECT DISTINCT scope FROM webhook_registrations WHERE watcher = 1 AND expires_at > ? ORDER BY scope)`,
    ),
  };
}

export class SqliteWatch implements WatchJournal {
  readonly #store: SqliteStore;
  readonly #audit: SqliteAudit;
  #sql: ReturnType<typeof statements> | undefined;

  constructor(store: SqliteStore, audit: SqliteAudit) {
    this.#store = store;
    this.#audit = audit;
  }

  get #statements(): ReturnType<typeof statements> {
    this.#sql ??= statements(this.#store);
    return this.#sql;
  }

  recordOutsideTransaction(
    tx: OutsideTransaction,
    event: WatchEvent,
    audit: AuditEntry,
    pause: boolean,
  ): Promise<boolean> {
    return this.#store.write(() => {
      const sql = this.#statements;
      const wallet = tx.wallet.toLowerCase();
      const now = Date.now();
      const value = tx.value === null ? null : tx.value.toString();
      const inserted = sql.insertOutside.run(wallet, tx.nonce, tx.hash, tx.to, value, tx.blockNumber, now);
      if (Number(inserted.changes) === 0) return false;
      if (pause) sql.pause.run(wallet, now, tx.nonce, tx.hash);
      this.#emit(sql.event, event);
      this.#audit.appendIn(audit);
      return true;
    }, true);
  }

  setWatchAlarm(name: string, raised: boolean, event: WatchEvent): Promise<boolean> {
    return this.#store.write(() => {
      const sql = this.#statements;
      const was = sql.alarmOf.get(name);
      // Never raised: clearing it changes nothing.
      if (was === undefined && !raised) return false;
      if (Number(sql.alarm.run(name, raised ? 1 : 0, Date.now()).changes) === 0) return false;
      this.#emit(sql.event, event);
      return true;
    }, true);
  }

  async watchAlarms(): Promise<string[]> {
    return this.#statements.alarms.all().map((row) => row.name as string);
  }

  async unknownTransactions(wallet: string, hashes: readonly string[]): Promise<string[]> {
    const { known } = this.#statements;
    const lower = wallet.toLowerCase();
    return hashes.filter((hash) => known.get(hash.toLowerCase(), lower) === undefined);
  }

  async walletPauses(): Promise<WalletPause[]> {
    return this.#statements.pauses.all().map(pauseOf);
  }

  resumeWallet(wallet: string, audit: AuditEntry): Promise<WalletPause | undefined> {
    return this.#store.write(() => {
      const sql = this.#statements;
      const row = sql.pauseOf.get(wallet.toLowerCase());
      if (row === undefined) return undefined;
      sql.resume.run(wallet.toLowerCase());
      this.#audit.appendIn(audit);
      return pauseOf(row);
    }, true);
  }

  async watchedNonce(wallet: string, chainId: number): Promise<WatchedNonce | undefined> {
    const row = this.#statements.watched.get(wallet.toLowerCase(), chainId);
    return row === undefined ? undefined : { chainId, nonce: Number(row.nonce), block: Number(row.block_number) };
  }

  saveWatchedNonce(wallet: string, at: WatchedNonce, back = false): Promise<void> {
    return this.#store.write(() => {
      this.#statements.saveWatched.run(wallet.toLowerCase(), at.chainId, at.nonce, at.block, Date.now(), back ? 1 : 0);
    });
  }

  #emit(insert: StatementSync, event: WatchEvent): void {
    const at = event.at.getTime();
    insert.run(event.type, event.subject, JSON.stringify(event.data), at, at, at, Date.now());
  }
}

function pauseOf(row: Row): WalletPause {
  return {
    wallet: row.wallet as string,
    since: new Date(Number(row.since)),
    nonce: Number(row.nonce),
    hash: row.hash as string | null,
  };
}
