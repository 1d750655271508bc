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
 * One object with every port's methods: those of its parts, one part per port, on the same
 * connection and group commit (store.ts; how the parts make one journal: ../parts.ts).
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync } from "node:sqlite";

import { type CoversPorts, delegateToParts, type JournalPorts, type PartsOf } from "../parts.js";
import { SqliteLeases } from "./leases.js";
import { migrate } from "./migrations.js";
import { SqliteNonces } from "./nonces.js";
import { SqliteQuotes } from "./quotes.js";
import { SqliteStore } from "./store.js";
import { SqliteTrades } from "./trades.js";
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

/** Its parts, one per port: each method of theirs is one of the journal's (delegateToParts, below). */
const PARTS = {
  trades: SqliteTrades,
  nonces: SqliteNonces,
  leases: SqliteLeases,
  quotes: SqliteQuotes,
  webhooks: SqliteOutbox,
};
type Parts = PartsOf<typeof PARTS>;
// Every port method is some part's: a missing one fails to compile.
true satisfies CoversPorts<Parts>;

/** Every port the journal implements, by its parts. */
export interface SqliteJournal extends JournalPorts {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the ports' methods are its parts', put on its prototype by delegateToParts (below)
export class SqliteJournal {
  protected readonly parts: Parts;
  readonly #store: SqliteStore;

  constructor(db: DatabaseSync) {
    const store = new SqliteStore(db);
    this.#store = store;
    this.parts = {
      trades: new SqliteTrades(store),
      nonces: new SqliteNonces(store),
      leases: new SqliteLeases(store),
      quotes: new SqliteQuotes(store),
      webhooks: new SqliteOutbox(db, (run) => store.write(run)),
    };
  }

  async close(): Promise<void> {
    this.#store.close();
  }
}

delegateToParts(SqliteJournal, PARTS);
