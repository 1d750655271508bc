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
import { DatabaseSync, type SQLInputValue, type SQLOutputValue, type StatementSync } from "node:sqlite";

import type {
  Broadcast,
  MinedTx,
  NewTrade,
  NonceLedger,
  NonceSlot,
  NonceStore,
  NoncesConsumed,
  QuoteStore,
  SignedTradeTx,
  SlotPurpose,
  SlotState,
  StoredQuote,
  TradeJournal,
  TradePage,
  TradePageQuery,
  TradeRecord,
  TradeSummaryQuery,
  TradeTotals,
  TransactionReceipt,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookDeliveryQuery,
  WebhookEvent,
  WebhookOutbox,
  WebhookOutboxStats,
  WebhookOutcome,
} from "../../core/index.js";
import { gasUsdOf, tradeAmounts } from "../../core/index.js";
import { KeyedMutex, checkNonce, nextNonce } from "../shared/keyed-mutex.js";
import { quoteRow, quoteStatements, toQuote } from "./sqlite.quotes.js";
import { SqliteOutbox, WEBHOOKS_MIGRATION } from "./sqlite.webhooks.js";

/** Plain SQL, applied in order once each; `schema_version` holds how many were applied. Append, never edit. */
export const MIGRATIONS = [
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
  // 2: the trade lifecycle. New statuses and the deadline (SQLite cannot change a CHECK
  // constraint, so the table is rebuilt); each nonce the service uses, and every transaction
  // broadcast at it; leases (who monitors a wallet).
  `CREATE TABLE trades_v2 (
     id TEXT PRIMARY KEY,
     scope TEXT NOT NULL,
     idempotency_key TEXT,
     request_hash TEXT NOT NULL,
     kind TEXT NOT NULL,
     request TEXT NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('accepted', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'expired')),
     wallet TEXT,
     nonce INTEGER,
     tx_hash TEXT,                         -- the hash that counts: the mined one, else the latest broadcast
     raw_tx TEXT,
     deadline INTEGER,                     -- unix seconds: the calldata's deadline
     receipt TEXT,
     error TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   );
   INSERT INTO trades_v2 (id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx, receipt, error, created_at, updated_at)
     SELECT id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx, receipt, error, created_at, updated_at FROM trades ORDER BY rowid;
   DROP TABLE trades;
   ALTER TABLE trades_v2 RENAME TO trades;
   CREATE UNIQUE INDEX trades_scope_key ON trades (scope, idempotency_key) WHERE idempotency_key IS NOT NULL;
   CREATE INDEX trades_tx_hash ON trades (tx_hash);
   CREATE TABLE nonce_slots (
     wallet TEXT NOT NULL,                 -- lower-case address
     nonce INTEGER NOT NULL,
     purpose TEXT NOT NULL CHECK (purpose IN ('trade', 'approval', 'filler')),
     trade_id TEXT,
     deadline INTEGER,
     state TEXT NOT NULL CHECK (state IN ('pending', 'mined', 'final', 'lost')),
     mined_hash TEXT,
     block_number INTEGER,
     block_hash TEXT,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (wallet, nonce)
   );
   CREATE INDEX nonce_slots_open ON nonce_slots (wallet, nonce) WHERE state IN ('pending', 'mined');
   CREATE TABLE broadcasts (
     hash TEXT PRIMARY KEY,                -- lower-case
     wallet TEXT NOT NULL,
     nonce INTEGER NOT NULL,
     raw_tx TEXT NOT NULL,
     max_fee_per_gas TEXT NOT NULL,        -- wei, decimal text
     max_priority_fee_per_gas TEXT NOT NULL,
     noop INTEGER NOT NULL,
     sent_at INTEGER NOT NULL
   );
   CREATE INDEX broadcasts_slot ON broadcasts (wallet, nonce);
   CREATE TABLE leases (
     name TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_at INTEGER NOT NULL           -- ms since the epoch
   );
   -- Trades a previous version left signed: watched like any other (their fees were not kept).
   INSERT OR IGNORE INTO nonce_slots (wallet, nonce, purpose, trade_id, state, created_at, updated_at)
     SELECT lower(wallet), nonce, 'trade', id, 'pending', updated_at, updated_at FROM trades WHERE status = 'signed';
   INSERT OR IGNORE INTO broadcasts (hash, wallet, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, noop, sent_at)
     SELECT lower(tx_hash), lower(wallet), nonce, raw_tx, '0', '0', 0, updated_at FROM trades WHERE status = 'signed';`,
  // 3: the trades waiting to be signed, by when they last changed: forgetUnsigned looks at them
  // every lease period, without reading the whole table.
  `CREATE INDEX trades_accepted ON trades (updated_at) WHERE status = 'accepted';`,
  // 4: the trade history. What a mined trade moved and spent, from its receipt (set with it,
  // cleared by a reorg), so the summary reads columns; and the history's order, per scope, alone
  // or under a status or kind filter, so a page reads its rows in index order and stops.
  `ALTER TABLE trades ADD COLUMN amount_in TEXT;     -- base units, decimal text (beyond 2^63)
   ALTER TABLE trades ADD COLUMN amount_out TEXT;
   ALTER TABLE trades ADD COLUMN gas_wei TEXT;       -- gasUsed × effectiveGasPrice
   CREATE INDEX trades_history ON trades (scope, created_at DESC, id DESC);
   CREATE INDEX trades_history_status ON trades (scope, status, created_at DESC, id DESC);
   CREATE INDEX trades_history_kind ON trades (scope, kind, created_at DESC, id DESC);`,
  // 5: quotes (sqlite.quotes.ts), until a trade uses one or it is swept after expiring.
  `CREATE TABLE quotes (
     id TEXT PRIMARY KEY,
     scope TEXT NOT NULL,
     kind TEXT NOT NULL,
     wallet TEXT NOT NULL,
     destinatary TEXT,                     -- NULL: the quote binds none
     stable TEXT NOT NULL,
     amount TEXT NOT NULL,                 -- base units, decimal text
     min_out TEXT NOT NULL,
     expires_at INTEGER NOT NULL,          -- ms since the epoch
     created_at INTEGER NOT NULL,
     trade_id TEXT                         -- the trade that used it
   );
   CREATE INDEX quotes_expiry ON quotes (expires_at);`,
  // 6: the gas in USD. The native coin's USD price a trade was signed at (USD per coin × 10^18),
  // and, once mined, its gas in USD (gas_wei × native_usd: USD × 10^36, exact), set with the
  // other amounts and cleared with them by a reorg. Trades signed before have neither.
  `ALTER TABLE trades ADD COLUMN native_usd TEXT;    -- decimal text
   ALTER TABLE trades ADD COLUMN gas_usd TEXT;`,
  // 7: the webhook outbox (sqlite.webhooks.ts): its events, written by a trigger on trades.
  WEBHOOKS_MIGRATION,
];

/** The migration that added the amount columns: the receipts already kept are read into them once. */
const AMOUNTS_MIGRATION = 4;

export interface SqliteJournalOptions {
  /** How long open() waits for another holder of the file to let go before failing. Default 5000 ms. */
  busyTimeoutMs?: number;
}

type Row = Record<string, SQLOutputValue>;

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

function migrate(db: DatabaseSync): void {
  // BEGIN IMMEDIATE writes, so from here on this connection holds the file exclusively.
  db.exec("BEGIN IMMEDIATE");
  try {
    db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    const current = Number(
      db.prepare("SELECT coalesce(max(version), 0) AS version FROM schema_version").get()!.version,
    );
    if (current > MIGRATIONS.length) {
      throw new Error(
        `trade journal schema version ${current} is newer than this service knows (${MIGRATIONS.length})`,
      );
    }
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      db.exec(MIGRATIONS[version - 1]!);
      if (version === AMOUNTS_MIGRATION) backfillAmounts(db);
      db.prepare("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)").run(version, Date.now());
    }
    db.exec("COMMIT");
  } catch (error) {
    if (db.isTransaction) db.exec("ROLLBACK");
    throw error;
  }
}

/** Fills the amount columns of the trades mined before they existed. */
function backfillAmounts(db: DatabaseSync): void {
  const update = db.prepare("UPDATE trades SET amount_in = ?, amount_out = ?, gas_wei = ? WHERE id = ?");
  for (const row of db.prepare("SELECT id, receipt FROM trades WHERE receipt IS NOT NULL").iterate()) {
    let receipt: TransactionReceipt;
    try {
      receipt = JSON.parse(row.receipt as string) as TransactionReceipt;
    } catch {
      continue;
    }
    update.run(...amountColumns(receipt), row.id as string);
  }
}

/** amount_in, amount_out and gas_wei of a receipt, as decimal text or NULL. */
function amountColumns(receipt: TransactionReceipt): [string | null, string | null, string | null] {
  const { amountIn, amountOut, gasWei } = tradeAmounts(receipt);
  return [amountIn?.toString() ?? null, amountOut?.toString() ?? null, gasWei?.toString() ?? null];
}

/**
 * The summary reads its rows in batches of this many, in the history's order (its index), and
 * lets every other request have the thread between them: a summary of a million trades takes
 * seconds of reading, never seconds of a frozen service. Not a snapshot: a trade that changes
 * during the reading is counted as its batch read it.
 */
const SUMMARY_BATCH = 5_000;

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
    byTxHash: db.prepare("SELECT * FROM trades WHERE tx_hash = ?"),
    tradeOfBroadcast: db.prepare(
      "SELECT s.trade_id FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce WHERE b.hash = ?",
    ),
    signed: db.prepare(
      // raw_tx stays NULL: the signed bytes are the broadcast's (the column holds version 1's).
      "UPDATE trades SET status = 'signed', wallet = ?, nonce = ?, tx_hash = ?, raw_tx = NULL, deadline = ?, native_usd = ?, updated_at = ? WHERE id = ?",
    ),
    submitted: db.prepare("UPDATE trades SET status = 'submitted', updated_at = ? WHERE id = ? AND status = 'signed'"),
    reorged: db.prepare(
      `UPDATE trades SET status = 'submitted', receipt = NULL, amount_in = NULL, amount_out = NULL, gas_wei = NULL,
       gas_usd = NULL, updated_at = ? WHERE id = ? AND status IN ('mined', 'confirmed')`,
    ),
    // error cleared: a trade recorded failed for a taken nonce and then found mined is corrected.
    mined: db.prepare(
      `UPDATE trades SET status = ?, receipt = ?, tx_hash = ?, amount_in = ?, amount_out = ?, gas_wei = ?, gas_usd = ?,
       error = NULL, updated_at = ? WHERE id = ?`,
    ),
    nativeUsd: db.prepare("SELECT native_usd FROM trades WHERE id = ?"),
    ended: db.prepare("UPDATE trades SET status = ?, error = ?, updated_at = ? WHERE id = ?"),
    // An expired trade stays expired: its no-op took the nonce, and that is its outcome.
    failed: db.prepare(
      "UPDATE trades SET status = 'failed', error = ?, updated_at = ? WHERE id = ? AND status <> 'expired'",
    ),
    exists: db.prepare("SELECT 1 FROM trades WHERE id = ?"),
    // Never deletes a trade with a signed transaction: its money may have left the wallet.
    discard: db.prepare("DELETE FROM trades WHERE id = ? AND tx_hash IS NULL"),
    forgetUnsigned: db.prepare("DELETE FROM trades WHERE status = 'accepted' AND tx_hash IS NULL AND updated_at < ?"),
    nextNonce: db.prepare("SELECT next_nonce FROM wallet_nonces WHERE wallet = ?"),
    setNonce: db.prepare(
      "INSERT INTO wallet_nonces (wallet, next_nonce) VALUES (?, ?) ON CONFLICT (wallet) DO UPDATE SET next_nonce = excluded.next_nonce",
    ),
    // The ledger of nonces.
    // A trade's slot is found through the trade's (wallet, nonce): the slots' primary key.
    tradeNonce: db.prepare("SELECT lower(wallet) AS wallet, nonce FROM trades WHERE id = ?"),
    dropSlotBroadcasts: db.prepare(
      "DELETE FROM broadcasts WHERE wallet = ? AND nonce = ? AND EXISTS (SELECT 1 FROM nonce_slots WHERE wallet = ? AND nonce = ? AND trade_id = ?)",
    ),
    dropTradeSlot: db.prepare("DELETE FROM nonce_slots WHERE wallet = ? AND nonce = ? AND trade_id = ?"),
    insertSlot: db.prepare(
      `INSERT INTO nonce_slots (wallet, nonce, purpose, trade_id, deadline, state, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`,
    ),
    insertBroadcast: db.prepare(
      `INSERT INTO broadcasts (hash, wallet, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, noop, sent_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    slot: db.prepare("SELECT * FROM nonce_slots WHERE wallet = ? AND nonce = ?"),
    slotBroadcasts: db.prepare("SELECT * FROM broadcasts WHERE wallet = ? AND nonce = ? ORDER BY sent_at, rowid"),
    tradeBroadcastsOf: db.prepare(
      `SELECT b.* FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
       WHERE s.wallet = ? AND s.nonce = ? AND s.trade_id = ? ORDER BY b.sent_at, b.rowid`,
    ),
    setTradeTx: db.prepare("UPDATE trades SET tx_hash = ?, updated_at = ? WHERE id = ?"),
    openSlots: db.prepare(
      "SELECT * FROM nonce_slots WHERE wallet = ? AND state IN ('pending', 'mined') ORDER BY nonce",
    ),
    openBroadcasts: db.prepare(
      `SELECT b.* FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
       WHERE s.wallet = ? AND s.state IN ('pending', 'mined') ORDER BY b.nonce, b.sent_at, b.rowid`,
    ),
    markSlot: db.prepare(
      "UPDATE nonce_slots SET state = ?, mined_hash = ?, block_number = ?, block_hash = ?, updated_at = ? WHERE wallet = ? AND nonce = ?",
    ),
    markTradeSlot: db.prepare(
      "UPDATE nonce_slots SET state = ?, mined_hash = ?, block_number = ?, block_hash = ?, updated_at = ? WHERE wallet = ? AND nonce = ? AND trade_id = ? AND state <> 'final'",
    ),
    finalize: db.prepare(
      "UPDATE nonce_slots SET state = 'final', updated_at = ? WHERE wallet = ? AND state = 'mined' AND block_number <= ?",
    ),
    release: db.prepare(
      `DELETE FROM nonce_slots WHERE wallet = ? AND nonce = ? AND state = 'pending'
       AND (SELECT count(*) FROM broadcasts WHERE wallet = ? AND nonce = ?) = 1
       AND EXISTS (SELECT 1 FROM broadcasts WHERE wallet = ? AND nonce = ? AND hash = ?)`,
    ),
    // A trade whose only transaction can never be mined is no longer signed (see NonceLedger.releaseSlot).
    unsignTrade: db.prepare(
      `UPDATE trades SET status = 'accepted', wallet = NULL, nonce = NULL, tx_hash = NULL, raw_tx = NULL, deadline = NULL, updated_at = ?
       WHERE id = ? AND status = 'signed' AND lower(wallet) = ? AND nonce = ?`,
    ),
    highestNonce: db.prepare("SELECT max(nonce) AS nonce FROM nonce_slots WHERE wallet = ?"),
    releaseBroadcast: db.prepare(
      "DELETE FROM broadcasts WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM nonce_slots WHERE wallet = ? AND nonce = ?)",
    ),
    lease: db.prepare(
      `INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE leases.holder = excluded.holder OR leases.expires_at < ?
       RETURNING holder`,
    ),
    unlease: db.prepare("DELETE FROM leases WHERE name = ? AND holder = ?"),
  };
}

/** A write waiting for the group commit: it runs in the group's transaction, and settles after its commit. */
interface QueuedWrite {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

export class SqliteJournal implements TradeJournal, NonceStore, NonceLedger, QuoteStore, WebhookOutbox {
  readonly #db: DatabaseSync;
  readonly #nonceLocks = new KeyedMutex();
  readonly #sql: ReturnType<typeof statements>;
  #writes: QueuedWrite[] = [];
  #quoteSql: ReturnType<typeof quoteStatements> | undefined;
  readonly #dynamic = new Map<string, StatementSync>();
  readonly #outbox: SqliteOutbox;
  /** When this process opened the file: every trade accepted before is a previous run's. */
  readonly #openedAt = Date.now();

  constructor(db: DatabaseSync) {
    this.#db = db;
    this.#sql = statements(db);
    this.#outbox = new SqliteOutbox(db, (run) => this.#write(run));
  }

  /**
   * The file is this process's alone (see the header): a trade left accepted before it opened
   * the file was a previous run's; one left accepted since, for longer than `staleAfterMs`, is
   * its own leftover. Both are found through the index of accepted trades (migration 3).
   */
  forgetUnsigned(staleAfterMs?: number): Promise<number> {
    const before = staleAfterMs === undefined ? this.#openedAt : Math.max(this.#openedAt, Date.now() - staleAfterMs);
    return this.#write(() => Number(this.#sql.forgetUnsigned.run(before).changes));
  }

  open(trade: NewTrade): Promise<{ created: boolean; record: TradeRecord }> {
    // Synchronous statements on one connection: nothing runs between the insert and the select.
    return this.#write(() => {
      const now = Date.now();
      const inserted = this.#sql.insert.get(
        randomUUID(),
        trade.scope,
        trade.idempotencyKey,
        trade.requestHash,
        trade.kind,
        JSON.stringify(trade.request),
        now,
        now,
      );
      if (inserted) return { created: true, record: toRecord(inserted, []) };
      return { created: false, record: this.#record(this.#sql.byKey.get(trade.scope, trade.idempotencyKey)!) };
    });
  }

  markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    return this.#write(() => {
      const now = Date.now();
      const wallet = tx.wallet.toLowerCase();
      // Every check first, so that a refused write leaves nothing behind in the group's transaction.
      const before = this.#sql.tradeNonce.get(id);
      if (!before) throw new Error(`trade ${id} is not in the journal`);
      const holder = this.#sql.slot.get(wallet, tx.nonce);
      if (holder && holder.trade_id !== id) throw new Error(`nonce ${tx.nonce} of ${wallet} already has a slot`);
      this.#sql.signed.run(tx.wallet, tx.nonce, tx.txHash, tx.deadline, tx.nativeUsd?.toString() ?? null, now, id);
      // Signed again (the node refused the first nonce, so nothing of it was broadcast): the old slot goes.
      if (before.wallet !== null) this.#dropSlot(before.wallet as string, Number(before.nonce), id);
      if (holder) this.#dropSlot(wallet, tx.nonce, id);
      this.#sql.insertSlot.run(wallet, tx.nonce, "trade", id, tx.deadline, now, now);
      this.#sql.insertBroadcast.run(
        tx.txHash.toLowerCase(),
        wallet,
        tx.nonce,
        tx.rawTx,
        tx.maxFeePerGas.toString(),
        tx.maxPriorityFeePerGas.toString(),
        0,
        now,
      );
    });
  }

  markSubmitted(id: string): Promise<void> {
    return this.#write(() => {
      if (Number(this.#sql.submitted.run(Date.now(), id).changes) === 0) this.#expectTrade(id);
    });
  }

  markReorged(id: string): Promise<void> {
    return this.#write(() => {
      const now = Date.now();
      if (Number(this.#sql.reorged.run(now, id).changes) === 0) return this.#expectTrade(id);
      const at = this.#sql.tradeNonce.get(id)!;
      this.#sql.markTradeSlot.run("pending", null, null, null, now, at.wallet!, at.nonce!, id);
    });
  }

  markMined(id: string, receipt: TransactionReceipt): Promise<void> {
    return this.#mined(id, "mined", receipt);
  }

  markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    return this.#mined(id, "confirmed", receipt);
  }

  markFailed(id: string, error: { code: string; message: string }): Promise<void> {
    return this.#ended(id, "failed", error);
  }

  markExpired(id: string, error: { code: string; message: string }): Promise<void> {
    return this.#ended(id, "expired", error);
  }

  discard(id: string): Promise<void> {
    return this.#write(() => {
      if (this.#sql.discard.run(id).changes === 0 && this.#sql.byId.get(id)) {
        throw new Error(`trade ${id} has a signed transaction and cannot be discarded`);
      }
    });
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const row = this.#sql.byId.get(id);
    return row ? this.#record(row) : undefined;
  }

  async findByHash(txHash: string): Promise<TradeRecord | undefined> {
    const hash = txHash.toLowerCase();
    const owner = this.#sql.tradeOfBroadcast.get(hash)?.trade_id;
    if (typeof owner === "string") return this.get(owner);
    const row = this.#sql.byTxHash.get(hash);
    return row ? this.#record(row) : undefined;
  }

  /** Reads the rows in the order of one of the history indexes (migration 4), from the cursor on. */
  async page(query: TradePageQuery): Promise<TradePage> {
    const where = ["scope = ?"];
    const values: SQLInputValue[] = [query.scope];
    if (query.status !== undefined) {
      where.push("status = ?");
      values.push(query.status);
    }
    if (query.kind !== undefined) {
      where.push("kind = ?");
      values.push(query.kind);
    }
    rangeCondition(query, where, values);
    if (query.after !== undefined) {
      // Milliseconds here: a position's microseconds are always whole milliseconds of this journal's.
      const at = Number(query.after.createdAtUs / 1000n);
      where.push("created_at <= ? AND (created_at < ? OR id < ?)");
      values.push(at, at, query.after.id);
    }
    const sql = `SELECT * FROM trades WHERE ${where.join(" AND ")} ORDER BY created_at DESC, id DESC LIMIT ?`;
    const rows = this.#prepared(sql).all(...values, query.limit + 1);
    const trades = rows.slice(0, query.limit);
    const last = trades.at(-1);
    return {
      trades: trades.map((row) => this.#record(row)),
      next:
        rows.length > query.limit && last !== undefined
          ? { createdAtUs: BigInt(last.created_at as number) * 1000n, id: last.id as string }
          : null,
    };
  }

  /** Summed in JS with BigInt: SQLite's sum() is not exact beyond 2^63. */
  async summary(query: TradeSummaryQuery): Promise<TradeTotals[]> {
    const where = ["scope = ?"];
    const values: SQLInputValue[] = [query.scope];
    rangeCondition(query, where, values);
    const columns = `id, created_at, kind, lower(json_extract(request, '$.usdAddress')) AS stable,
       status IN ('mined', 'confirmed') AS executed, amount_in, amount_out, gas_wei, gas_usd`;
    const order = `ORDER BY created_at DESC, id DESC LIMIT ${SUMMARY_BATCH}`;
    const first = this.#prepared(`SELECT ${columns} FROM trades WHERE ${where.join(" AND ")} ${order}`);
    const next = this.#prepared(
      `SELECT ${columns} FROM trades WHERE ${where.join(" AND ")} AND created_at <= ? AND (created_at < ? OR id < ?) ${order}`,
    );
    const groups = new Map<string, TradeTotals>();
    let rows = first.all(...values);
    for (;;) {
      for (const row of rows) {
        const kind = row.kind as TradeTotals["kind"];
        const stable = String(row.stable ?? "");
        const key = `${kind}\u0000${stable}`;
        let group = groups.get(key);
        if (group === undefined) {
          group = { kind, stable, count: 0, executed: 0, amountIn: 0n, amountOut: 0n, gasWei: 0n, gasUsd: 0n };
          groups.set(key, group);
        }
        group.count += 1;
        if (Number(row.executed) !== 1) continue;
        group.executed += 1;
        group.amountIn += BigInt((row.amount_in as string | null) ?? 0);
        group.amountOut += BigInt((row.amount_out as string | null) ?? 0);
        group.gasWei += BigInt((row.gas_wei as string | null) ?? 0);
        // One executed trade without its gas in USD makes the group's unknown (TradeTotals.gasUsd).
        const gasUsd = row.gas_usd as string | null;
        group.gasUsd = group.gasUsd === null || gasUsd === null ? null : group.gasUsd + BigInt(gasUsd);
      }
      const last = rows.at(-1);
      if (rows.length < SUMMARY_BATCH || last === undefined) break;
      // node:sqlite is synchronous: between batches, every other request gets the thread.
      await new Promise((resolve) => setImmediate(resolve));
      const at = last.created_at as number;
      rows = next.all(...values, at, at, last.id as string);
    }
    return [...groups.values()].sort((a, b) =>
      a.kind === b.kind ? (a.stable < b.stable ? -1 : 1) : a.kind < b.kind ? -1 : 1,
    );
  }

  /** A statement built from the query's filters, prepared once per shape. */
  #prepared(sql: string): StatementSync {
    let statement = this.#dynamic.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#dynamic.set(sql, statement);
    }
    return statement;
  }

  async withNonce<T>(
    wallet: string,
    chainNonce: () => Promise<number>,
    send: (nonce: number) => Promise<T>,
    consumed?: NoncesConsumed<T>,
  ): Promise<T> {
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

  recordSlot(
    slot: { wallet: string; nonce: number; purpose: SlotPurpose; deadline: number | null },
    first: Broadcast,
  ): Promise<void> {
    return this.#write(() => {
      const now = Date.now();
      const wallet = slot.wallet.toLowerCase();
      // Checked first, so that a refused write leaves nothing behind in the group's transaction.
      if (this.#sql.slot.get(wallet, slot.nonce))
        throw new Error(`nonce ${slot.nonce} of ${wallet} already has a slot`);
      this.#insertBroadcast(wallet, slot.nonce, first);
      this.#sql.insertSlot.run(wallet, slot.nonce, slot.purpose, null, slot.deadline, now, now);
    });
  }

  recordBroadcast(wallet: string, nonce: number, broadcast: Broadcast): Promise<void> {
    return this.#write(() => {
      const lower = wallet.toLowerCase();
      const slot = this.#sql.slot.get(lower, nonce);
      if (!slot) throw new Error(`nonce ${nonce} of ${lower} has no slot`);
      this.#insertBroadcast(lower, nonce, broadcast);
      if (typeof slot.trade_id === "string") this.#sql.setTradeTx.run(broadcast.hash, Date.now(), slot.trade_id);
    });
  }

  async slot(wallet: string, nonce: number): Promise<NonceSlot | undefined> {
    const lower = wallet.toLowerCase();
    const row = this.#sql.slot.get(lower, nonce);
    return row && toSlot(row, this.#sql.slotBroadcasts.all(lower, nonce).map(toBroadcast));
  }

  async openSlots(wallet: string): Promise<NonceSlot[]> {
    const lower = wallet.toLowerCase();
    const broadcasts = new Map<number, Broadcast[]>();
    for (const row of this.#sql.openBroadcasts.all(lower)) {
      const nonce = Number(row.nonce);
      let list = broadcasts.get(nonce);
      if (list === undefined) {
        list = [];
        broadcasts.set(nonce, list);
      }
      list.push(toBroadcast(row));
    }
    return this.#sql.openSlots.all(lower).map((row) => toSlot(row, broadcasts.get(Number(row.nonce)) ?? []));
  }

  markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null): Promise<void> {
    return this.#write(() => {
      const changes = this.#sql.markSlot.run(
        state,
        mined?.hash ?? null,
        mined?.blockNumber ?? null,
        mined?.blockHash ?? null,
        Date.now(),
        wallet.toLowerCase(),
        nonce,
      ).changes;
      if (Number(changes) !== 1) throw new Error(`nonce ${nonce} of ${wallet.toLowerCase()} has no slot`);
    });
  }

  finalizeSlots(wallet: string, blockNumber: number): Promise<number> {
    return this.#write(() => Number(this.#sql.finalize.run(Date.now(), wallet.toLowerCase(), blockNumber).changes));
  }

  releaseSlot(wallet: string, nonce: number, hash: string): Promise<boolean> {
    return this.#write(() => {
      const lower = wallet.toLowerCase();
      const h = hash.toLowerCase();
      const slot = this.#sql.slot.get(lower, nonce);
      if (slot === undefined) return false;
      if (Number(this.#sql.release.run(lower, nonce, lower, nonce, lower, nonce, h).changes) !== 1) return false;
      this.#sql.releaseBroadcast.run(h, lower, nonce);
      if (typeof slot.trade_id === "string") this.#sql.unsignTrade.run(Date.now(), slot.trade_id, lower, nonce);
      return true;
    });
  }

  async highestNonce(wallet: string): Promise<number | undefined> {
    const highest = this.#sql.highestNonce.get(wallet.toLowerCase())?.nonce;
    return highest === null || highest === undefined ? undefined : Number(highest);
  }

  acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.#write(() => {
      const now = Date.now();
      return this.#sql.lease.get(name, holder, now + ttlMs, now)?.holder === holder;
    });
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return this.#write(() => {
      this.#sql.unlease.run(name, holder);
    });
  }

  #mined(id: string, status: "mined" | "confirmed", receipt: TransactionReceipt): Promise<void> {
    const json = JSON.stringify(receipt);
    return this.#write(() => {
      const now = Date.now();
      // The trade first: if it is unknown, this throws before the second statement writes anything.
      const amounts = amountColumns(receipt);
      // SQLite's arithmetic is not exact at this size: the gas in USD is computed here.
      const price = this.#sql.nativeUsd.get(id)?.native_usd;
      const gasUsd =
        typeof price === "string" && amounts[2] !== null
          ? gasUsdOf(BigInt(amounts[2]), BigInt(price)).toString()
          : null;
      expectOne(this.#sql.mined.run(status, json, receipt.transactionHash, ...amounts, gasUsd, now, id).changes, id);
      const at = this.#sql.tradeNonce.get(id)!;
      if (at.wallet !== null)
        this.#sql.markTradeSlot.run(
          "mined",
          receipt.transactionHash.toLowerCase(),
          receipt.blockNumber,
          receipt.blockHash,
          now,
          at.wallet!,
          at.nonce!,
          id,
        );
    });
  }

  #ended(id: string, status: "failed" | "expired", error: { code: string; message: string }): Promise<void> {
    const json = JSON.stringify({ code: error.code, message: error.message });
    if (status === "failed")
      return this.#write(() => {
        if (Number(this.#sql.failed.run(json, Date.now(), id).changes) === 0) this.#expectTrade(id); // expired: kept
      });
    return this.#write(() => expectOne(this.#sql.ended.run(status, json, Date.now(), id).changes, id));
  }

  /** Deletes the trade's slot at (wallet, nonce), with its broadcasts. */
  #dropSlot(wallet: string, nonce: number, id: string): void {
    this.#sql.dropSlotBroadcasts.run(wallet, nonce, wallet, nonce, id);
    this.#sql.dropTradeSlot.run(wallet, nonce, id);
  }

  #insertBroadcast(wallet: string, nonce: number, b: Broadcast): void {
    this.#sql.insertBroadcast.run(
      b.hash.toLowerCase(),
      wallet,
      nonce,
      b.rawTx,
      b.maxFeePerGas.toString(),
      b.maxPriorityFeePerGas.toString(),
      b.noop ? 1 : 0,
      b.sentAt.getTime(),
    );
  }

  #expectTrade(id: string): void {
    if (!this.#sql.exists.get(id)) throw new Error(`trade ${id} is not in the journal`);
  }

  #record(row: Row): TradeRecord {
    const broadcasts =
      row.wallet === null
        ? []
        : this.#sql.tradeBroadcastsOf
            .all((row.wallet as string).toLowerCase(), row.nonce!, row.id as string)
            .map(toBroadcast);
    return toRecord(row, broadcasts);
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

  get #quotes(): ReturnType<typeof quoteStatements> {
    this.#quoteSql ??= quoteStatements(this.#db);
    return this.#quoteSql;
  }

  saveQuote(quote: StoredQuote): Promise<void> {
    return this.#write(() => {
      this.#quotes.insert.run(...quoteRow(quote));
    });
  }

  async getQuote(id: string): Promise<StoredQuote | undefined> {
    const row = this.#quotes.byId.get(id);
    return row === undefined ? undefined : toQuote(row);
  }

  consumeQuote(id: string, scope: string, tradeId: string, now: Date): Promise<boolean> {
    return this.#write(() => Number(this.#quotes.consume.run(tradeId, id, scope, now.getTime()).changes) === 1);
  }

  releaseQuote(id: string, tradeId: string): Promise<void> {
    return this.#write(() => {
      this.#quotes.release.run(id, tradeId);
    });
  }

  sweepQuotes(before: Date): Promise<number> {
    return this.#write(() => Number(this.#quotes.sweep.run(before.getTime()).changes));
  }

  setWebhookScopes(scopes: readonly string[]): Promise<void> {
    return this.#outbox.setWebhookScopes(scopes);
  }

  claimWebhookEvents(holder: string, limit: number, leaseMs: number): Promise<WebhookEvent[]> {
    return this.#outbox.claimWebhookEvents(holder, limit, leaseMs);
  }

  recordWebhookAttempt(id: string, holder: string, attempt: WebhookAttempt, outcome: WebhookOutcome): Promise<boolean> {
    return this.#outbox.recordWebhookAttempt(id, holder, attempt, outcome);
  }

  listWebhookDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage> {
    return this.#outbox.listWebhookDeliveries(query);
  }

  retryWebhookDelivery(scope: string, id: string, now: Date): Promise<WebhookDelivery | "not_failed" | undefined> {
    return this.#outbox.retryWebhookDelivery(scope, id, now);
  }

  webhookStats(): Promise<WebhookOutboxStats> {
    return this.#outbox.webhookStats();
  }

  async close(): Promise<void> {
    this.#commit(); // what was written before close() is kept
    if (this.#db.isOpen) this.#db.close();
  }
}

/** createdAt in [since, until), in ms as the column holds it. */
function rangeCondition(
  range: { since?: Date | undefined; until?: Date | undefined },
  where: string[],
  values: SQLInputValue[],
): void {
  if (range.since !== undefined) {
    where.push("created_at >= ?");
    values.push(range.since.getTime());
  }
  if (range.until !== undefined) {
    where.push("created_at < ?");
    values.push(range.until.getTime());
  }
}

function expectOne(changes: number | bigint, id: string): void {
  if (Number(changes) !== 1) throw new Error(`trade ${id} is not in the journal`);
}

function toRecord(row: Row, broadcasts: Broadcast[]): TradeRecord {
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
    rawTx: broadcasts.at(-1)?.rawTx ?? (row.raw_tx as string | null),
    deadline: row.deadline === null ? null : Number(row.deadline),
    broadcasts,
    receipt: row.receipt === null ? null : (JSON.parse(row.receipt as string) as TransactionReceipt),
    error: row.error === null ? null : (JSON.parse(row.error as string) as TradeRecord["error"]),
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
  };
}

function toBroadcast(row: Row): Broadcast {
  return {
    hash: row.hash as string,
    rawTx: row.raw_tx as string,
    maxFeePerGas: BigInt(row.max_fee_per_gas as string),
    maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas as string),
    noop: Number(row.noop) === 1,
    sentAt: new Date(Number(row.sent_at)),
  };
}

function toSlot(row: Row, broadcasts: Broadcast[]): NonceSlot {
  return {
    wallet: row.wallet as string,
    nonce: Number(row.nonce),
    purpose: row.purpose as SlotPurpose,
    tradeId: row.trade_id as string | null,
    deadline: row.deadline === null ? null : Number(row.deadline),
    state: row.state as SlotState,
    broadcasts,
    mined:
      row.mined_hash === null
        ? null
        : {
            hash: row.mined_hash as string,
            blockNumber: Number(row.block_number),
            blockHash: row.block_hash as string,
          },
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
  };
}
