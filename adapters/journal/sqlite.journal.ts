/**
 * The trade journal in one SQLite file (node:sqlite), for a service that runs as ONE process.
 *
 * Durability: WAL with synchronous=NORMAL. A commit is in the WAL file (the OS page cache)
 * before it returns, so it survives the process being killed (kill -9, OOM, crash), which is
 * what the service needs. It is not fsynced on each commit, so a power loss or kernel crash
 * may lose the last commits; use synchronous=FULL, or PostgreSQL, if that matters.
 *
 * Group commit: the writes made during one turn of the event loop (a chunk of trades signed
 * together, the receipts of one JSON-RPC batch) are committed as one transaction at the end
 * of that turn, and each write's promise settles only once that commit is done. Committing
 * costs the event loop more than the statements do (the WAL frames, a write call), and it
 * runs on the service's only thread.
 *
 * Locking: the file is opened with locking_mode=EXCLUSIVE, so this process holds an OS lock on
 * it until `close()`. A second process (or a second open in this process) fails at open
 * instead of silently sharing the nonce sequence. The OS drops the lock when the process
 * dies, even on kill -9, so there is no stale lock file to clean up after a crash.
 * (It also means the sqlite3 CLI cannot read the file while the service runs.)
 */
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync, type SQLOutputValue } from "node:sqlite";

import type { NewTrade, NoncesConsumed, TradeJournal, TradeRecord } from "../../core/ports/journal.port.js";
import type { TransactionReceipt } from "../../core/types.js";
import { KeyedMutex, checkNonce, nextNonce } from "../shared/keyed-mutex.js";

/** Plain SQL, applied in order once each; `schema_version` holds how many were applied. Append, never edit. */
const MIGRATIONS = [
  `CREATE TABLE IF NOT EXISTS trades (
     id TEXT PRIMARY KEY,
     scope TEXT NOT NULL,
     idempotency_key TEXT,
     request_hash TEXT NOT NULL,
     kind TEXT NOT NULL,
     request TEXT NOT NULL,                -- JSON text, returned exactly as written
     status TEXT NOT NULL CHECK (status IN ('accepted', 'signed', 'confirmed', 'failed')),
     wallet TEXT,
     nonce INTEGER,
     tx_hash TEXT,
     raw_tx TEXT,
     receipt TEXT,                         -- JSON text: clients get it back byte for byte
     error TEXT,                           -- JSON text
     created_at INTEGER NOT NULL,          -- ms since the epoch
     updated_at INTEGER NOT NULL
   );
   CREATE UNIQUE INDEX IF NOT EXISTS trades_scope_key ON trades (scope, idempotency_key) WHERE idempotency_key IS NOT NULL;
   CREATE INDEX IF NOT EXISTS trades_unresolved ON trades (created_at) WHERE status = 'signed';
   CREATE TABLE IF NOT EXISTS wallet_nonces (
     wallet TEXT PRIMARY KEY,              -- lower-case address
     next_nonce INTEGER                    -- NULL: ask the chain
   );`,
];

export interface SqliteJournalOptions {
  /** How long open() waits for another holder of the file to let go before failing. Default 5000 ms. */
  busyTimeoutMs?: number;
}

type Row = Record<string, SQLOutputValue>;

export async function openSqliteJournal(path: string, options: SqliteJournalOptions = {}): Promise<TradeJournal> {
  mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
    // Before the first access: the lock is then taken by the first read and held until close().
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    migrate(db);
  } catch (error) {
    db.close();
    if (isBusy(error)) {
      throw new Error(`trade journal ${path} is in use by another process: a SQLite journal serves one process (use PostgreSQL for several)`, { cause: error });
    }
    throw error;
  }
  return new SqliteJournal(db);
}

function migrate(db: DatabaseSync): void {
  // BEGIN IMMEDIATE writes, so from here on this connection holds the file exclusively.
  db.exec("BEGIN IMMEDIATE");
  try {
    db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    const current = Number(db.prepare("SELECT coalesce(max(version), 0) AS version FROM schema_version").get()!.version);
    if (current > MIGRATIONS.length) {
      throw new Error(`trade journal schema version ${current} is newer than this service knows (${MIGRATIONS.length})`);
    }
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      db.exec(MIGRATIONS[version - 1]!);
      db.prepare("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)").run(version, Date.now());
    }
    db.exec("COMMIT");
  } catch (error) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw error;
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { errcode?: number }).errcode;
  return code === 5 || code === 6; // SQLITE_BUSY, SQLITE_LOCKED
}

/** Prepared once: every statement the journal runs. */
function statements(db: DatabaseSync) {
  return {
    insert: db.prepare(
      `INSERT INTO trades (id, scope, idempotency_key, request_hash, kind, request, status, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, 'accepted', ?, ?)
       ON CONFLICT (scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING *`,
    ),
    byKey: db.prepare("SELECT * FROM trades WHERE scope = ? AND idempotency_key = ?"),
    byId: db.prepare("SELECT * FROM trades WHERE id = ?"),
    signed: db.prepare(
      "UPDATE trades SET status = 'signed', wallet = ?, nonce = ?, tx_hash = ?, raw_tx = ?, updated_at = ? WHERE id = ?",
    ),
    confirmed: db.prepare("UPDATE trades SET status = 'confirmed', receipt = ?, updated_at = ? WHERE id = ?"),
    failed: db.prepare("UPDATE trades SET status = 'failed', error = ?, updated_at = ? WHERE id = ?"),
    // Never deletes a trade with a signed transaction: its money may have left the wallet.
    discard: db.prepare("DELETE FROM trades WHERE id = ? AND tx_hash IS NULL"),
    unresolved: db.prepare("SELECT * FROM trades WHERE status = 'signed' ORDER BY created_at, rowid"),
    nextNonce: db.prepare("SELECT next_nonce FROM wallet_nonces WHERE wallet = ?"),
    setNonce: db.prepare(
      "INSERT INTO wallet_nonces (wallet, next_nonce) VALUES (?, ?) ON CONFLICT (wallet) DO UPDATE SET next_nonce = excluded.next_nonce",
    ),
  };
}

/** A write waiting for the group commit: it runs in the group's transaction, and settles after its commit. */
interface QueuedWrite {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

class SqliteJournal implements TradeJournal {
  readonly #db: DatabaseSync;
  readonly #nonceLocks = new KeyedMutex();
  readonly #sql: ReturnType<typeof statements>;
  #writes: QueuedWrite[] = [];

  constructor(db: DatabaseSync) {
    this.#db = db;
    this.#sql = statements(db);
  }

  open(trade: NewTrade): Promise<{ created: boolean; record: TradeRecord }> {
    // Synchronous statements on one connection: nothing runs between the insert and the select.
    return this.#write(() => {
      const now = Date.now();
      const inserted = this.#sql.insert.get(
        randomUUID(), trade.scope, trade.idempotencyKey, trade.requestHash, trade.kind, JSON.stringify(trade.request), now, now,
      );
      if (inserted) return { created: true, record: toRecord(inserted) };
      return { created: false, record: toRecord(this.#sql.byKey.get(trade.scope, trade.idempotencyKey)!) };
    });
  }

  markSigned(id: string, tx: { wallet: string; nonce: number; txHash: string; rawTx: string }): Promise<void> {
    return this.#write(() => expectOne(this.#sql.signed.run(tx.wallet, tx.nonce, tx.txHash, tx.rawTx, Date.now(), id).changes, id));
  }

  markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    const json = JSON.stringify(receipt);
    return this.#write(() => expectOne(this.#sql.confirmed.run(json, Date.now(), id).changes, id));
  }

  markFailed(id: string, error: { code: string; message: string }): Promise<void> {
    const json = JSON.stringify({ code: error.code, message: error.message });
    return this.#write(() => expectOne(this.#sql.failed.run(json, Date.now(), id).changes, id));
  }

  discard(id: string): Promise<void> {
    return this.#write(() => {
      if (this.#sql.discard.run(id).changes === 0 && this.#sql.byId.get(id)) {
        throw new Error(`trade ${id} has a signed transaction and cannot be discarded`);
      }
    });
  }

  /** Queues `run` for this turn's group commit (see the header). */
  #write<T>(run: () => T): Promise<T> {
    if (!this.#db.isOpen) return Promise.reject(new Error("the trade journal is closed"));
    return new Promise<T>((resolve, reject) => {
      if (this.#writes.length === 0) setImmediate(() => this.#commit());
      this.#writes.push({ run, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  /**
   * Runs the queued writes in one transaction. A write that throws is refused alone (SQLite
   * undoes just its statement); if the transaction itself is lost (the commit fails, or an
   * I/O error rolled it back), every write of the group is refused.
   */
  #commit(): void {
    const writes = this.#writes;
    this.#writes = [];
    if (writes.length === 0) return;
    const db = this.#db;
    const done: Array<{ write: QueuedWrite; value: unknown }> = [];
    try {
      db.exec("BEGIN IMMEDIATE");
      for (const write of writes) {
        if (!db.isTransaction) throw new Error("the trade journal's transaction was rolled back");
        try {
          done.push({ write, value: write.run() });
        } catch (error) {
          write.reject(error);
        }
      }
      db.exec("COMMIT");
    } catch (error) {
      if (db.isOpen && db.isTransaction) db.exec("ROLLBACK");
      for (const write of writes) write.reject(error); // (a write refused alone already was)
      return;
    }
    for (const { write, value } of done) write.resolve(value);
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const row = this.#sql.byId.get(id);
    return row ? toRecord(row) : undefined;
  }

  async unresolved(): Promise<TradeRecord[]> {
    return this.#sql.unresolved.all().map(toRecord);
  }

  async withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>, consumed?: NoncesConsumed<T>): Promise<T> {
    const key = wallet.toLowerCase();
    // One process owns the file (see the header), so an in-process lock is the wallet's lock.
    return this.#nonceLocks.run(key, async () => {
      const stored = this.#sql.nextNonce.get(key)?.next_nonce;
      const nonce = stored === undefined || stored === null ? checkNonce(await chainNonce()) : Number(stored);
      // Cleared while `send` runs: if the process dies mid-send, the next call resyncs from the chain
      // rather than reusing a nonce that may already be on it. A throwing send leaves it cleared.
      this.#sql.setNonce.run(key, null);
      const result = await send(nonce);
      this.#sql.setNonce.run(key, nextNonce(nonce, result, consumed));
      return result;
    });
  }

  async close(): Promise<void> {
    this.#commit(); // what was written before close() is kept
    if (this.#db.isOpen) this.#db.close();
  }
}

function expectOne(changes: number | bigint, id: string): void {
  if (Number(changes) !== 1) throw new Error(`trade ${id} is not in the journal`);
}

function toRecord(row: Row): TradeRecord {
  return {
    id: row.id as string,
    scope: row.scope as string,
    idempotencyKey: row.idempotency_key as string | null,
    requestHash: row.request_hash as string,
    kind: row.kind as TradeRecord["kind"],
    request: JSON.parse(row.request as string) as TradeRecord["request"],
    status: row.status as TradeRecord["status"],
    wallet: row.wallet as string | null,
    nonce: row.nonce === null ? null : Number(row.nonce),
    txHash: row.tx_hash as string | null,
    rawTx: row.raw_tx as string | null,
    receipt: row.receipt === null ? null : (JSON.parse(row.receipt as string) as TransactionReceipt),
    error: row.error === null ? null : (JSON.parse(row.error as string) as TradeRecord["error"]),
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
  };
}
