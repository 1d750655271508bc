/**
 * What the SQLite journal's parts share: the file's one connection, the group commit that every
 * write of every part goes through, and the statements on nonce slots that both the trades and
 * the nonces run (a trade's transaction is its slot's broadcast).
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
 */
import type { DatabaseSync } from "node:sqlite";

/** A write waiting for the group commit: it runs in the group's transaction, and settles after its commit. */
interface QueuedWrite {
  run: () => unknown;
  /** Run as one savepoint: a write that throws leaves nothing of itself (one that appends an audit record). */
  atomic: boolean;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Prepared once: the statements on nonce slots that the trades and the nonces share. */
function slotStatements(db: DatabaseSync) {
  return {
    insertSlot: db.prepare(
      `INSERT INTO nonce_slots (wallet, nonce, purpose, trade_id, deadline, state, created_at, updated_at, reserves)
       VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
    ),
    insertBroadcast: db.prepare(
      `INSERT INTO broadcasts (hash, wallet, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, noop, sent_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    slot: db.prepare("SELECT * FROM nonce_slots WHERE wallet = ? AND nonce = ?"),
    savepoint: db.prepare("SAVEPOINT atomic_write"),
    release: db.prepare("RELEASE atomic_write"),
    rollbackTo: db.prepare("ROLLBACK TO atomic_write"),
  };
}

export class SqliteStore {
  readonly db: DatabaseSync;
  /** The statements on nonce slots that the trades and the nonces share. */
  readonly sql: ReturnType<typeof slotStatements>;
  #writes: QueuedWrite[] = [];

  constructor(db: DatabaseSync) {
    this.db = db;
    this.sql = slotStatements(db);
  }

  /**
   * Queues `run` for this turn's group commit (see the header). With `atomic`, it runs as one
   * savepoint, so that when it throws nothing it wrote stays (a write that appends an audit record
   * with its change: both or neither); the others check first and write last.
   */
  write<T>(run: () => T, atomic = false): Promise<T> {
    if (!this.db.isOpen) return Promise.reject(new Error("the trade journal is closed"));
    return new Promise<T>((resolve, reject) => {
      if (this.#writes.length === 0) setImmediate(() => this.#commit());
      this.#writes.push({ run, atomic, resolve: resolve as (value: unknown) => void, reject });
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
    const db = this.db;
    const done: Array<{ write: QueuedWrite; value: unknown }> = [];
    try {
      db.exec("BEGIN IMMEDIATE");
      for (const write of writes) {
        if (!db.isTransaction) throw new Error("the trade journal's transaction was rolled back");
        try {
          done.push({ write, value: write.atomic ? this.#atomically(write.run) : write.run() });
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

  #atomically(run: () => unknown): unknown {
    const { savepoint, release, rollbackTo } = this.sql;
    savepoint.run();
    try {
      const value = run();
      release.run();
      return value;
    } catch (error) {
      // Lost with the transaction (an I/O error rolled it back): the commit refuses every write.
      if (this.db.isTransaction) {
        rollbackTo.run();
        release.run();
      }
      throw error;
    }
  }

  /** Commits what was written before, then closes the file. */
  close(): void {
    this.#commit(); // what was written before close() is kept
    if (this.db.isOpen) this.db.close();
  }
}
