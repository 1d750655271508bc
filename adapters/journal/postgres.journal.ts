/**
 * The trade journal in PostgreSQL (pg), shared by several service instances: one journal,
 * and one nonce sequence per wallet, coordinated in the database.
 *
 * Durability: every write is its own committed statement (autocommit), so it is on disk
 * (with the server's default synchronous_commit=on) before the call resolves.
 *
 * Locking: `withNonce` holds a transaction-level advisory lock on "nonce:<wallet>" for the
 * whole `send`. PostgreSQL drops it with the transaction, so it is released when the holding
 * process dies: at once on kill -9 (the server sees the connection close), and within about
 * a minute if its host vanishes (TCP keepalives on the lock connections, see below).
 */
import { randomUUID } from "node:crypto";

import pg from "pg";

import type { NewTrade, NoncesConsumed, TradeJournal, TradeRecord } from "../../core/ports/journal.port.js";
import type { TransactionReceipt } from "../../core/types.js";
import { KeyedMutex, checkNonce, nextNonce } from "../shared/keyed-mutex.js";

/**
 * Plain SQL, applied in order once each; `schema_version` holds the versions applied. Append, never edit.
 * request, receipt and error are `json`, not `jsonb`: json keeps the text as written, so the
 * receipt comes back with the SPEC's key order, byte for byte (jsonb would reorder its keys).
 */
const MIGRATIONS = [
  `CREATE TABLE IF NOT EXISTS trades (
     seq BIGINT GENERATED ALWAYS AS IDENTITY,   -- insertion order, to break created_at ties
     id TEXT PRIMARY KEY,
     scope TEXT NOT NULL,
     idempotency_key TEXT,
     request_hash TEXT NOT NULL,
     kind TEXT NOT NULL,
     request JSON NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('accepted', 'signed', 'confirmed', 'failed')),
     wallet TEXT,
     nonce BIGINT,
     tx_hash TEXT,
     raw_tx TEXT,
     receipt JSON,
     error JSON,
     created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
     updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
   );
   CREATE UNIQUE INDEX IF NOT EXISTS trades_scope_key ON trades (scope, idempotency_key) WHERE idempotency_key IS NOT NULL;
   CREATE INDEX IF NOT EXISTS trades_unresolved ON trades (created_at, seq) WHERE status = 'signed';
   CREATE TABLE IF NOT EXISTS wallet_nonces (
     wallet TEXT PRIMARY KEY,                   -- lower-case address
     next_nonce BIGINT,                         -- NULL: ask the chain
     updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
   );`,
];

const COLUMNS =
  "id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx, receipt, error, created_at, updated_at";

export interface PostgresJournalOptions {
  /** Connections for reads and writes. Default 10. */
  max?: number;
  /**
   * Connections that hold wallets' nonce locks: at most this many wallets send at once from
   * this process. A separate pool, so a lock holder's `send` can always write the journal. Default 4.
   */
  nonceConnections?: number;
}

export async function openPostgresJournal(url: string, options: PostgresJournalOptions = {}): Promise<TradeJournal> {
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10 });
  const lockPool = new pg.Pool({ connectionString: url, max: options.nonceConnections ?? 4 });
  lockPool.on("connect", (client) => {
    // Queued before any query of the caller that asked for this connection. A long `send` holds its
    // transaction open, so no server-wide idle-in-transaction timeout may cut it; and server-side
    // keepalives make the server notice within ~60 s that this host vanished, and drop its locks.
    client
      .query(
        `SET idle_in_transaction_session_timeout = 0; SET tcp_keepalives_idle = 30;
         SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3`,
      )
      .catch(() => {}); // a connection that fails here fails the caller's next query too
  });
  // An idle connection that breaks (server restart, network) is dropped by the pool and the next
  // query reports the failure; without a listener the 'error' event would crash the process.
  pool.on("error", () => {});
  lockPool.on("error", () => {});
  try {
    await migrate(pool);
  } catch (error) {
    await Promise.allSettled([pool.end(), lockPool.end()]);
    throw error;
  }
  return new PostgresJournal(pool, lockPool);
}

/** Applies missing migrations under an advisory lock, so instances starting together take turns. */
async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended('trade-journal:migrate', 0))");
    await client.query(
      "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    );
    const { rows } = await client.query<{ version: number }>("SELECT coalesce(max(version), 0) AS version FROM schema_version");
    const current = rows[0]!.version;
    if (current > MIGRATIONS.length) {
      throw new Error(`trade journal schema version ${current} is newer than this service knows (${MIGRATIONS.length})`);
    }
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      await client.query(MIGRATIONS[version - 1]!);
      await client.query("INSERT INTO schema_version (version) VALUES ($1)", [version]);
    }
    await client.query("COMMIT");
    client.release();
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    client.release(true);
    throw error;
  }
}

class PostgresJournal implements TradeJournal {
  readonly #pool: pg.Pool;
  readonly #lockPool: pg.Pool;
  readonly #nonceLocks = new KeyedMutex();
  #closed = false;

  constructor(pool: pg.Pool, lockPool: pg.Pool) {
    this.#pool = pool;
    this.#lockPool = lockPool;
  }

  async open(trade: NewTrade): Promise<{ created: boolean; record: TradeRecord }> {
    const id = randomUUID();
    // Retried only if the existing record is discarded between the two statements.
    for (let attempt = 0; attempt < 5; attempt++) {
      // Of concurrent inserts with one key, PostgreSQL lets exactly one through; the others wait
      // for it to commit, then do nothing, and read its row.
      const inserted = await this.#pool.query<Row>(
        `INSERT INTO trades (id, scope, idempotency_key, request_hash, kind, request, status)
         VALUES ($1, $2, $3, $4, $5, $6, 'accepted')
         ON CONFLICT (scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING ${COLUMNS}`,
        [id, trade.scope, trade.idempotencyKey, trade.requestHash, trade.kind, JSON.stringify(trade.request)],
      );
      if (inserted.rows[0]) return { created: true, record: toRecord(inserted.rows[0]) };
      const existing = await this.#pool.query<Row>(`SELECT ${COLUMNS} FROM trades WHERE scope = $1 AND idempotency_key = $2`, [
        trade.scope,
        trade.idempotencyKey,
      ]);
      if (existing.rows[0]) return { created: false, record: toRecord(existing.rows[0]) };
    }
    throw new Error("trade journal: the record for this idempotency key keeps being discarded; try again");
  }

  async markSigned(id: string, tx: { wallet: string; nonce: number; txHash: string; rawTx: string }): Promise<void> {
    await this.#updateOne(
      id,
      "status = 'signed', wallet = $2, nonce = $3, tx_hash = $4, raw_tx = $5",
      [tx.wallet, tx.nonce, tx.txHash, tx.rawTx],
    );
  }

  async markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    await this.#updateOne(id, "status = 'confirmed', receipt = $2", [JSON.stringify(receipt)]);
  }

  async markFailed(id: string, error: { code: string; message: string }): Promise<void> {
    await this.#updateOne(id, "status = 'failed', error = $2", [JSON.stringify({ code: error.code, message: error.message })]);
  }

  async discard(id: string): Promise<void> {
    // Never deletes a trade with a signed transaction: its money may have left the wallet.
    const deleted = await this.#pool.query("DELETE FROM trades WHERE id = $1 AND tx_hash IS NULL", [id]);
    if (deleted.rowCount === 0 && (await this.get(id))) {
      throw new Error(`trade ${id} has a signed transaction and cannot be discarded`);
    }
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const { rows } = await this.#pool.query<Row>(`SELECT ${COLUMNS} FROM trades WHERE id = $1`, [id]);
    return rows[0] ? toRecord(rows[0]) : undefined;
  }

  async unresolved(): Promise<TradeRecord[]> {
    const { rows } = await this.#pool.query<Row>(`SELECT ${COLUMNS} FROM trades WHERE status = 'signed' ORDER BY created_at, seq`);
    return rows.map(toRecord);
  }

  async withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>, consumed?: NoncesConsumed<T>): Promise<T> {
    const key = wallet.toLowerCase();
    // Queue in this process first, so it holds at most one connection per wallet waiting on the database.
    return this.#nonceLocks.run(key, async () => {
      const client = await this.#lockPool.connect();
      // A connection that breaks while checked out emits 'error'; the pending query rejects anyway.
      const onError = () => {};
      client.on("error", onError);
      let broken = false;
      try {
        await client.query("BEGIN");
        // Held until COMMIT or ROLLBACK, or until this connection dies.
        await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`nonce:${key}`]);
        // Read the stored nonce and clear it in one autocommit statement, durable before `send`:
        // if this process dies mid-send, the next holder resyncs from the chain rather than
        // reusing a nonce that may already be on it. A throwing send leaves it cleared.
        const { rows } = await this.#pool.query<{ next_nonce: string | null }>(
          `UPDATE wallet_nonces AS w SET next_nonce = NULL, updated_at = clock_timestamp()
           FROM wallet_nonces AS old WHERE w.wallet = $1 AND old.wallet = w.wallet
           RETURNING old.next_nonce`,
          [key],
        );
        const stored = rows[0]?.next_nonce ?? null;
        const nonce = stored === null ? checkNonce(await chainNonce()) : Number(stored);
        const result = await send(nonce);
        try {
          await client.query(
            `INSERT INTO wallet_nonces (wallet, next_nonce) VALUES ($1, $2)
             ON CONFLICT (wallet) DO UPDATE SET next_nonce = excluded.next_nonce, updated_at = clock_timestamp()`,
            [key, nextNonce(nonce, result, consumed)],
          );
          await client.query("COMMIT");
        } catch {
          // `send` succeeded, so its result stands: the stored nonce stays cleared and the next
          // call resyncs from the chain, which already counts this transaction.
          broken = true;
        }
        return result;
      } catch (error) {
        // Nothing of this transaction needs keeping: the clear above is already committed.
        await client.query("ROLLBACK").catch(() => (broken = true));
        throw error;
      } finally {
        client.off("error", onError);
        // A broken connection is destroyed rather than returned to the pool.
        client.release(broken);
      }
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([this.#pool.end(), this.#lockPool.end()]);
  }

  async #updateOne(id: string, set: string, values: unknown[]): Promise<void> {
    const updated = await this.#pool.query(`UPDATE trades SET ${set}, updated_at = clock_timestamp() WHERE id = $1`, [id, ...values]);
    if (updated.rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
  }
}

interface Row {
  id: string;
  scope: string;
  idempotency_key: string | null;
  request_hash: string;
  kind: TradeRecord["kind"];
  request: TradeRecord["request"];
  status: TradeRecord["status"];
  wallet: string | null;
  nonce: string | null; // BIGINT arrives as a string
  tx_hash: string | null;
  raw_tx: string | null;
  receipt: TransactionReceipt | null; // json arrives parsed, keys in stored order
  error: TradeRecord["error"];
  created_at: Date;
  updated_at: Date;
}

function toRecord(row: Row): TradeRecord {
  return {
    id: row.id,
    scope: row.scope,
    idempotencyKey: row.idempotency_key,
    requestHash: row.request_hash,
    kind: row.kind,
    request: row.request,
    status: row.status,
    wallet: row.wallet,
    nonce: row.nonce === null ? null : Number(row.nonce),
    txHash: row.tx_hash,
    rawTx: row.raw_tx,
    receipt: row.receipt,
    error: row.error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
