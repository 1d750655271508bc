/**
 * The trade journal in one SQLite file (node:sqlite), for a service that runs as ONE process.
 * Its durability, and the group commit every write goes through: store.ts.
 *
 * Locking: the file is opened with locking_mode=EXCLUSIVE, so this process holds an OS lock on
 * it until `close()`. A second process (or a second open in this process) fails at open
 * instead of silently sharing the nonce sequence. The OS drops the lock when the process
 * dies, even on kill -9, so there is no stale lock file to clean up after a crash.
 * (It also means the sqlite3 CLI cannot read the file while the service runs.)
 *
 * Its ports, one object each on the same connection and group commit (store.ts), and every
 * port's methods as its own (Journal, adapters/shared/journal.ts).
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync } from "node:sqlite";

import { Journal } from "../../shared/journal.js";
import { SqliteApprovals } from "./approvals.js";
import { SqliteAudit } from "./audit.js";
import { SqliteLeases } from "./leases.js";
import { migrate } from "./migrations.js";
import { registerSpendFunctions } from "./spending.js";
import { SqliteNonces } from "./nonces.js";
import { SqliteQuotes } from "./quotes.js";
import { SqliteStore } from "./store.js";
import { SqliteTrades } from "./trades.js";
import { SqliteWatch } from "./watch.js";
import { SqliteOutbox } from "./webhooks.js";

export interface SqliteJournalOptions {
  /** How long open() waits for another holder of the file to let go before failing. Default 5000 ms. */
  busyTimeoutMs?: number;
}

export async function openSqliteJournal(path: string, options: SqliteJournalOptions = {}): Promise<SqliteJournal> {
  mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
    // Before the first access: the lock is then taken by the first read and held until close().
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    registerSpendFunctions(db);
    migrate(db);
  } catch (error) {
    db.close();
    if (isBusy(error)) {
      throw new Error(
        `trade journal ${path} is in use by another process: a SQLite journal serves one process (use PostgreSQL for several)`,
        { cause: error },
      );
    }
    throw error;
  }
  return new SqliteJournal(db);
}

function isBusy(error: unknown): boolean {
  const code = (error as { errcode?: number }).errcode;
  return code === 5 || code === 6; // SQLITE_BUSY, SQLITE_LOCKED
}

export class SqliteJournal extends Journal {
  readonly ports: {
    trades: SqliteTrades;
    nonces: SqliteNonces;
    leases: SqliteLeases;
    quotes: SqliteQuotes;
    webhooks: SqliteOutbox;
    audit: SqliteAudit;
    watch: SqliteWatch;
    approvals: SqliteApprovals;
  };
  readonly #store: SqliteStore;

  constructor(db: DatabaseSync) {
    super();
    const store = new SqliteStore(db);
    this.#store = store;
    const audit = new SqliteAudit(store);
    const trades = new SqliteTrades(store, audit);
    this.ports = {
      trades,
      nonces: new SqliteNonces(store, audit),
      leases: new SqliteLeases(store),
      quotes: new SqliteQuotes(store),
      webhooks: new SqliteOutbox(db, (run, atomic) => store.write(run, atomic), audit),
      audit,
      watch: new SqliteWatch(store, audit),
      approvals: new SqliteApprovals(store, audit, (id) => trades.get(id)),
    };
  }

  async close(): Promise<void> {
    this.#store.close();
  }
}
