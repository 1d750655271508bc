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
import { tradeAmounts } from "../../core/index.js";
import { KeyedMutex, checkNonce, nextNonce } from "../shared/keyed-mutex.js";
import { QUOTE_SQL, quoteParams, toQuote } from "./postgres.quotes.js";
import { PostgresOutbox, WEBHOOKS_MIGRATION } from "./postgres.webhooks.js";

/**
 * Plain SQL, applied in order once each; `schema_version` holds the versions applied. Append, never edit.
 * request, receipt and error are `json`, not `jsonb`: json keeps the text as written, so the
 * receipt comes back with the SPEC's key order, byte for byte (jsonb would reorder its keys).
 */
export const MIGRATIONS = [
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
  // 2: the trade lifecycle: new statuses and the deadline; each nonce the service uses, and every
  // transaction broadcast at it; leases (which instance monitors a wallet).
  `ALTER TABLE trades DROP CONSTRAINT IF EXISTS trades_status_check;
   ALTER TABLE trades ADD CONSTRAINT trades_status_check
     CHECK (status IN ('accepted', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'expired'));
   ALTER TABLE trades ADD COLUMN deadline BIGINT;   -- unix seconds: the calldata's deadline
   ALTER TABLE trades ADD COLUMN owner TEXT;        -- the instance that accepted it (lease 'instance:<owner>')
   CREATE INDEX trades_accepted ON trades (created_at) WHERE status = 'accepted';
   DROP INDEX IF EXISTS trades_unresolved;
   CREATE INDEX trades_tx_hash ON trades (tx_hash);
   CREATE TABLE nonce_slots (
     wallet TEXT NOT NULL,                      -- lower-case address
     nonce BIGINT NOT NULL,
     purpose TEXT NOT NULL CHECK (purpose IN ('trade', 'approval', 'filler')),
     trade_id TEXT,
     deadline BIGINT,
     state TEXT NOT NULL CHECK (state IN ('pending', 'mined', 'final', 'lost')),
     mined_hash TEXT,
     block_number BIGINT,
     block_hash TEXT,
     created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
     updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
     PRIMARY KEY (wallet, nonce)
   );
   CREATE INDEX nonce_slots_open ON nonce_slots (wallet, nonce) WHERE state IN ('pending', 'mined');
   CREATE INDEX nonce_slots_trade ON nonce_slots (trade_id) WHERE trade_id IS NOT NULL;
   CREATE TABLE broadcasts (
     seq BIGINT GENERATED ALWAYS AS IDENTITY,   -- order of recording
     hash TEXT PRIMARY KEY,                     -- lower-case
     wallet TEXT NOT NULL,
     nonce BIGINT NOT NULL,
     raw_tx TEXT NOT NULL,
     max_fee_per_gas NUMERIC(78, 0) NOT NULL,   -- wei
     max_priority_fee_per_gas NUMERIC(78, 0) NOT NULL,
     noop BOOLEAN NOT NULL,
     sent_at TIMESTAMPTZ NOT NULL
   );
   CREATE INDEX broadcasts_slot ON broadcasts (wallet, nonce);
   CREATE TABLE leases (
     name TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     expires_at TIMESTAMPTZ NOT NULL
   );
   -- Trades a previous version left signed: watched like any other (their fees were not kept).
   INSERT INTO nonce_slots (wallet, nonce, purpose, trade_id, state, created_at, updated_at)
     SELECT DISTINCT ON (lower(wallet), nonce) lower(wallet), nonce, 'trade', id, 'pending', updated_at, updated_at
     FROM trades WHERE status = 'signed' ORDER BY lower(wallet), nonce, updated_at DESC
     ON CONFLICT DO NOTHING;
   INSERT INTO broadcasts (hash, wallet, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, noop, sent_at)
     SELECT lower(t.tx_hash), s.wallet, s.nonce, t.raw_tx, 0, 0, false, t.updated_at
     FROM trades t JOIN nonce_slots s ON s.trade_id = t.id
     ON CONFLICT DO NOTHING;`,
  // 3: the trade history. What a mined trade moved and spent, from its receipt (set with it,
  // cleared by a reorg), so the summary is one aggregate; and the history's order, per scope,
  // alone or under a status or kind filter, so a page reads its rows in index order and stops.
  `ALTER TABLE trades ADD COLUMN amount_in NUMERIC(78, 0), ADD COLUMN amount_out NUMERIC(78, 0),
     ADD COLUMN gas_wei NUMERIC(78, 0);   -- base units; gas: gasUsed × effectiveGasPrice, wei
   CREATE INDEX trades_history ON trades (scope, created_at DESC, id DESC);
   CREATE INDEX trades_history_status ON trades (scope, status, created_at DESC, id DESC);
   CREATE INDEX trades_history_kind ON trades (scope, kind, created_at DESC, id DESC);`,
  // 4: quotes (postgres.quotes.ts), until a trade uses one or it is swept after expiring.
  `CREATE TABLE quotes (
     id TEXT PRIMARY KEY,
     scope TEXT NOT NULL,
     kind TEXT NOT NULL,
     wallet TEXT NOT NULL,
     destinatary TEXT,                     -- NULL: the quote binds none
     stable TEXT NOT NULL,
     amount NUMERIC(78, 0) NOT NULL,       -- base units
     min_out NUMERIC(78, 0) NOT NULL,
     expires_at TIMESTAMPTZ NOT NULL,
     created_at TIMESTAMPTZ NOT NULL,
     trade_id TEXT                         -- the trade that used it
   );
   CREATE INDEX quotes_expiry ON quotes (expires_at);`,
  // 5: the gas in USD. The native coin's USD price a trade was signed at (USD per coin × 10^18),
  // and, once mined, its gas in USD (gas_wei × native_usd: USD × 10^36, exact), set with the
  // other amounts and cleared with them by a reorg. Trades signed before have neither.
  `ALTER TABLE trades ADD COLUMN native_usd NUMERIC(78, 0), ADD COLUMN gas_usd NUMERIC(78, 0);`,
  // 6: the webhook outbox (postgres.webhooks.ts): its events, written by a trigger on trades.
  WEBHOOKS_MIGRATION,
];

/** The migration that added the amount columns: the receipts already kept are read into them once. */
const AMOUNTS_MIGRATION = 3;

const COLUMNS =
  "id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx, deadline, receipt, error, created_at, updated_at";
const BROADCAST_COLUMNS =
  "b.hash, b.wallet, b.nonce, b.raw_tx, b.max_fee_per_gas::text AS max_fee_per_gas, b.max_priority_fee_per_gas::text AS max_priority_fee_per_gas, b.noop, b.sent_at";

export interface PostgresJournalOptions {
  /** This instance's name: it owns the trades it accepts, while it renews its lease. Default: random. */
  instanceId?: string;
  /** How long this instance's lease lasts unrenewed (it renews every third of it). Default 15000 ms. */
  leaseMs?: number;
  /** Connections for reads and writes. Default 10. */
  max?: number;
  /**
   * Connections that hold wallets' nonce locks: at most this many wallets send at once from
   * this process. A separate pool, so a lock holder's `send` can always write the journal. Default 4.
   */
  nonceConnections?: number;
}

export async function openPostgresJournal(url: string, options: PostgresJournalOptions = {}): Promise<PostgresJournal> {
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
  const journal = new PostgresJournal(pool, lockPool, options.instanceId ?? randomUUID(), options.leaseMs ?? 15_000);
  await journal.keepAlive();
  return journal;
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
    const { rows } = await client.query<{ version: number }>(
      "SELECT coalesce(max(version), 0) AS version FROM schema_version",
    );
    const current = rows[0]!.version;
    if (current > MIGRATIONS.length) {
      throw new Error(
        `trade journal schema version ${current} is newer than this service knows (${MIGRATIONS.length})`,
      );
    }
    for (let version = current + 1; version <= MIGRATIONS.length; version++) {
      await client.query(MIGRATIONS[version - 1]!);
      if (version === AMOUNTS_MIGRATION) await backfillAmounts(client);
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

/** Fills the amount columns of the trades mined before they existed. */
async function backfillAmounts(client: pg.PoolClient): Promise<void> {
  // A page of receipts at a time, each page one UPDATE: a million trades are a thousand round
  // trips each way, not a million, and never all in memory at once.
  for (let after = ""; ; ) {
    const { rows } = await client.query<{ id: string; receipt: TransactionReceipt }>(
      "SELECT id, receipt FROM trades WHERE receipt IS NOT NULL AND id > $1 ORDER BY id LIMIT 1000",
      [after],
    );
    if (rows.length === 0) return;
    const columns = rows.map((row) => amountColumns(row.receipt));
    await client.query(
      `UPDATE trades SET amount_in = v.amount_in::numeric, amount_out = v.amount_out::numeric, gas_wei = v.gas_wei::numeric
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS v(id, amount_in, amount_out, gas_wei)
       WHERE trades.id = v.id`,
      [rows.map((row) => row.id), ...[0, 1, 2].map((i) => columns.map((c) => c[i]))],
    );
    after = rows.at(-1)!.id;
  }
}

/** amount_in, amount_out and gas_wei of a receipt, as decimal text or null. */
function amountColumns(receipt: TransactionReceipt): [string | null, string | null, string | null] {
  const { amountIn, amountOut, gasWei } = tradeAmounts(receipt);
  return [amountIn?.toString() ?? null, amountOut?.toString() ?? null, gasWei?.toString() ?? null];
}

export class PostgresJournal implements TradeJournal, NonceStore, NonceLedger, QuoteStore, WebhookOutbox {
  readonly #pool: pg.Pool;
  readonly #lockPool: pg.Pool;
  readonly #nonceLocks = new KeyedMutex();
  #closed = false;

  readonly #instance: string;
  readonly #leaseMs: number;
  readonly #renewal: NodeJS.Timeout;
  readonly #outbox: PostgresOutbox;

  constructor(pool: pg.Pool, lockPool: pg.Pool, instance: string, leaseMs: number) {
    this.#pool = pool;
    this.#lockPool = lockPool;
    this.#instance = instance;
    this.#leaseMs = leaseMs;
    this.#outbox = new PostgresOutbox(pool);
    // While this instance lives, the trades it accepted are its own to finish.
    this.#renewal = setInterval(() => void this.keepAlive().catch(() => {}), Math.max(100, Math.floor(leaseMs / 3)));
    this.#renewal.unref();
  }

  /** Renews this instance's lease, which keeps its accepted trades from being forgotten. */
  async keepAlive(): Promise<void> {
    await this.acquireLease(`instance:${this.#instance}`, this.#instance, this.#leaseMs);
  }

  async forgetUnsigned(staleAfterMs?: number): Promise<number> {
    // Another instance's, once its lease ran out; this one's own, once unchanged for staleAfterMs
    // (by the database's clock, as the leases; none of its own without a bound).
    const { rowCount } = await this.#pool.query(
      `DELETE FROM trades t WHERE t.status = 'accepted' AND t.tx_hash IS NULL
       AND (t.owner IS NULL OR (t.owner <> $1 AND NOT EXISTS (
         SELECT 1 FROM leases l WHERE l.name = 'instance:' || t.owner AND l.expires_at > clock_timestamp()))
         OR (t.owner = $1 AND t.updated_at < clock_timestamp() - make_interval(secs => $2::float8 / 1000)))`,
      [this.#instance, staleAfterMs ?? null],
    );
    return rowCount ?? 0;
  }

  async open(trade: NewTrade): Promise<{ created: boolean; record: TradeRecord }> {
    const id = randomUUID();
    // Retried only if the existing record is discarded between the two statements.
    for (let attempt = 0; attempt < 5; attempt++) {
      // Of concurrent inserts with one key, PostgreSQL lets exactly one through; the others wait
      // for it to commit, then do nothing, and read its row.
      const inserted = await this.#pool.query<Row>(
        `INSERT INTO trades (id, scope, idempotency_key, request_hash, kind, request, status, owner)
         VALUES ($1, $2, $3, $4, $5, $6, 'accepted', $7)
         ON CONFLICT (scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING ${COLUMNS}`,
        [
          id,
          trade.scope,
          trade.idempotencyKey,
          trade.requestHash,
          trade.kind,
          JSON.stringify(trade.request),
          this.#instance,
        ],
      );
      if (inserted.rows[0]) return { created: true, record: toRecord(inserted.rows[0], []) };
      const existing = await this.#pool.query<Row>(
        `SELECT ${COLUMNS} FROM trades WHERE scope = $1 AND idempotency_key = $2`,
        [trade.scope, trade.idempotencyKey],
      );
      const record = existing.rows[0] && (await this.get(existing.rows[0].id));
      if (record) return { created: false, record };
    }
    throw new Error("trade journal: the record for this idempotency key keeps being discarded; try again");
  }

  async markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    const wallet = tx.wallet.toLowerCase();
    await this.#transaction(async (client) => {
      const { rowCount } = await client.query("SELECT 1 FROM trades WHERE id = $1 FOR UPDATE", [id]);
      if (rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
      // Signed again (the node refused the first nonce, so nothing of it was broadcast): the old slot goes.
      await client.query(
        "DELETE FROM broadcasts b USING nonce_slots s WHERE s.trade_id = $1 AND b.wallet = s.wallet AND b.nonce = s.nonce",
        [id],
      );
      await client.query("DELETE FROM nonce_slots WHERE trade_id = $1", [id]);
      await client.query(
        "INSERT INTO nonce_slots (wallet, nonce, purpose, trade_id, deadline, state) VALUES ($1, $2, 'trade', $3, $4, 'pending')",
        [wallet, tx.nonce, id, tx.deadline],
      );
      await insertBroadcast(client, wallet, tx.nonce, {
        hash: tx.txHash,
        rawTx: tx.rawTx,
        maxFeePerGas: tx.maxFeePerGas,
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
        noop: false,
        sentAt: new Date(),
      });
      await client.query(
        `UPDATE trades SET status = 'signed', wallet = $2, nonce = $3, tx_hash = $4, raw_tx = $5, deadline = $6,
         native_usd = $7, updated_at = clock_timestamp() WHERE id = $1`,
        [id, tx.wallet, tx.nonce, tx.txHash, tx.rawTx, tx.deadline, tx.nativeUsd?.toString() ?? null],
      );
    });
  }

  async markSubmitted(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query(
      "UPDATE trades SET status = 'submitted', updated_at = clock_timestamp() WHERE id = $1 AND status = 'signed'",
      [id],
    );
    if (rowCount === 0) await this.#expectTrade(id);
  }

  async markReorged(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `WITH t AS (
         UPDATE trades SET status = 'submitted', receipt = NULL, amount_in = NULL, amount_out = NULL, gas_wei = NULL,
         gas_usd = NULL, updated_at = clock_timestamp() WHERE id = $1 AND status IN ('mined', 'confirmed') RETURNING id
       )
       UPDATE nonce_slots s SET state = 'pending', mined_hash = NULL, block_number = NULL, block_hash = NULL, updated_at = clock_timestamp()
       FROM t WHERE s.trade_id = t.id AND s.state <> 'final'`,
      [id],
    );
    if (rowCount === 0) await this.#expectTrade(id);
  }

  async markMined(id: string, receipt: TransactionReceipt): Promise<void> {
    await this.#mined(id, "mined", receipt);
  }

  async markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    await this.#mined(id, "confirmed", receipt);
  }

  async markFailed(id: string, error: { code: string; message: string }): Promise<void> {
    // An expired trade stays expired: its no-op took the nonce, and that is its outcome.
    const { rowCount } = await this.#pool.query(
      "UPDATE trades SET status = 'failed', error = $2, updated_at = clock_timestamp() WHERE id = $1 AND status <> 'expired'",
      [id, JSON.stringify({ code: error.code, message: error.message })],
    );
    if (rowCount === 0) await this.#expectTrade(id);
  }

  async markExpired(id: string, error: { code: string; message: string }): Promise<void> {
    await this.#updateOne(id, "status = 'expired', error = $2", [
      JSON.stringify({ code: error.code, message: error.message }),
    ]);
  }

  async discard(id: string): Promise<void> {
    // Never deletes a trade with a signed transaction: its money may have left the wallet.
    const deleted = await this.#pool.query("DELETE FROM trades WHERE id = $1 AND tx_hash IS NULL", [id]);
    if (deleted.rowCount === 0 && (await this.get(id))) {
      throw new Error(`trade ${id} has a signed transaction and cannot be discarded`);
    }
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const [{ rows }, broadcasts] = await Promise.all([
      this.#pool.query<Row>(`SELECT ${COLUMNS} FROM trades WHERE id = $1`, [id]),
      this.#pool.query<BroadcastRow>(
        `SELECT ${BROADCAST_COLUMNS} FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
         WHERE s.trade_id = $1 ORDER BY b.seq`,
        [id],
      ),
    ]);
    return rows[0] ? toRecord(rows[0], broadcasts.rows.map(toBroadcast)) : undefined;
  }

  async findByHash(txHash: string): Promise<TradeRecord | undefined> {
    const { rows } = await this.#pool.query<{ id: string }>(
      `SELECT s.trade_id AS id FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
       WHERE b.hash = $1 AND s.trade_id IS NOT NULL
       UNION ALL SELECT id FROM trades WHERE tx_hash = $1 LIMIT 1`,
      [txHash.toLowerCase()],
    );
    return rows[0] ? this.get(rows[0].id) : undefined;
  }

  /**
   * Reads the rows in the order of one of the history indexes (migration 3), from the cursor on.
   * Positions are in microseconds, as created_at holds them.
   */
  async page(query: TradePageQuery): Promise<TradePage> {
    const values: unknown[] = [query.scope];
    const where = ["scope = $1"];
    const param = (value: unknown) => `$${values.push(value)}`;
    if (query.status !== undefined) where.push(`status = ${param(query.status)}`);
    if (query.kind !== undefined) where.push(`kind = ${param(query.kind)}`);
    if (query.since !== undefined) where.push(`created_at >= ${param(query.since)}`);
    if (query.until !== undefined) where.push(`created_at < ${param(query.until)}`);
    if (query.after !== undefined) {
      const at = `('epoch'::timestamptz + ${param(query.after.createdAtUs.toString())}::bigint * interval '1 microsecond')`;
      where.push(`created_at <= ${at} AND (created_at < ${at} OR id < ${param(query.after.id)})`);
    }
    const { rows } = await this.#pool.query<Row & { created_us: string }>(
      `SELECT ${COLUMNS}, (extract(epoch FROM created_at) * 1000000)::bigint::text AS created_us
       FROM trades WHERE ${where.join(" AND ")} ORDER BY created_at DESC, id DESC LIMIT ${param(query.limit + 1)}`,
      values,
    );
    const trades = rows.slice(0, query.limit);
    const broadcasts = new Map<string, Broadcast[]>();
    if (trades.length > 0) {
      const found = await this.#pool.query<BroadcastRow & { trade_id: string }>(
        `SELECT s.trade_id, ${BROADCAST_COLUMNS} FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
         WHERE s.trade_id = ANY($1) ORDER BY b.seq`,
        [trades.map((row) => row.id)],
      );
      for (const row of found.rows) {
        const list = broadcasts.get(row.trade_id) ?? [];
        list.push(toBroadcast(row));
        broadcasts.set(row.trade_id, list);
      }
    }
    const last = trades.at(-1);
    return {
      trades: trades.map((row) => toRecord(row, broadcasts.get(row.id) ?? [])),
      next:
        rows.length > query.limit && last !== undefined ? { createdAtUs: BigInt(last.created_us), id: last.id } : null,
    };
  }

  /** One aggregate; NUMERIC sums are exact. */
  async summary(query: TradeSummaryQuery): Promise<TradeTotals[]> {
    const values: unknown[] = [query.scope];
    const where = ["scope = $1"];
    if (query.since !== undefined) where.push(`created_at >= $${values.push(query.since)}`);
    if (query.until !== undefined) where.push(`created_at < $${values.push(query.until)}`);
    const executed = "FILTER (WHERE status IN ('mined', 'confirmed'))";
    const { rows } = await this.#pool.query<{
      kind: TradeTotals["kind"];
      stable: string;
      count: number;
      executed: number;
      amount_in: string;
      amount_out: string;
      gas_wei: string;
      gas_usd: string | null;
    }>(
      // One executed trade without its gas in USD makes the group's unknown (TradeTotals.gasUsd).
      `SELECT kind, lower(request->>'usdAddress') AS stable, count(*)::int AS count, count(*) ${executed}::int AS executed,
         coalesce(sum(amount_in) ${executed}, 0)::text AS amount_in,
         coalesce(sum(amount_out) ${executed}, 0)::text AS amount_out,
         coalesce(sum(gas_wei) ${executed}, 0)::text AS gas_wei,
         CASE WHEN count(*) FILTER (WHERE status IN ('mined', 'confirmed') AND gas_usd IS NULL) > 0 THEN NULL
           ELSE coalesce(sum(gas_usd) ${executed}, 0)::text END AS gas_usd
       FROM trades WHERE ${where.join(" AND ")}
       GROUP BY 1, 2 ORDER BY kind COLLATE "C", lower(request->>'usdAddress') COLLATE "C"`,
      values,
    );
    return rows.map((row) => ({
      kind: row.kind,
      stable: row.stable ?? "",
      count: row.count,
      executed: row.executed,
      amountIn: BigInt(row.amount_in),
      amountOut: BigInt(row.amount_out),
      gasWei: BigInt(row.gas_wei),
      gasUsd: row.gas_usd === null ? null : BigInt(row.gas_usd),
    }));
  }

  async recordSlot(
    slot: { wallet: string; nonce: number; purpose: SlotPurpose; deadline: number | null },
    first: Broadcast,
  ): Promise<void> {
    const wallet = slot.wallet.toLowerCase();
    await this.#transaction(async (client) => {
      await client.query(
        "INSERT INTO nonce_slots (wallet, nonce, purpose, deadline, state) VALUES ($1, $2, $3, $4, 'pending')",
        [wallet, slot.nonce, slot.purpose, slot.deadline],
      );
      await insertBroadcast(client, wallet, slot.nonce, first);
    });
  }

  async recordBroadcast(wallet: string, nonce: number, broadcast: Broadcast): Promise<void> {
    const lower = wallet.toLowerCase();
    await this.#transaction(async (client) => {
      const { rows } = await client.query<{ trade_id: string | null }>(
        "SELECT trade_id FROM nonce_slots WHERE wallet = $1 AND nonce = $2 FOR UPDATE",
        [lower, nonce],
      );
      if (rows.length === 0) throw new Error(`nonce ${nonce} of ${lower} has no slot`);
      await insertBroadcast(client, lower, nonce, broadcast);
      await client.query("UPDATE nonce_slots SET updated_at = clock_timestamp() WHERE wallet = $1 AND nonce = $2", [
        lower,
        nonce,
      ]);
      const tradeId = rows[0]!.trade_id;
      if (tradeId !== null) {
        await client.query(
          "UPDATE trades SET tx_hash = $2, raw_tx = $3, updated_at = clock_timestamp() WHERE id = $1",
          [tradeId, broadcast.hash, broadcast.rawTx],
        );
      }
    });
  }

  async slot(wallet: string, nonce: number): Promise<NonceSlot | undefined> {
    const lower = wallet.toLowerCase();
    const [slots, broadcasts] = await Promise.all([
      this.#pool.query<SlotRow>(
        `SELECT wallet, nonce, purpose, trade_id, deadline, state, mined_hash, block_number, block_hash, created_at, updated_at
         FROM nonce_slots WHERE wallet = $1 AND nonce = $2`,
        [lower, nonce],
      ),
      this.#pool.query<BroadcastRow>(
        `SELECT ${BROADCAST_COLUMNS} FROM broadcasts b WHERE b.wallet = $1 AND b.nonce = $2 ORDER BY b.seq`,
        [lower, nonce],
      ),
    ]);
    return slots.rows[0] && toSlot(slots.rows[0], broadcasts.rows.map(toBroadcast));
  }

  async openSlots(wallet: string): Promise<NonceSlot[]> {
    const lower = wallet.toLowerCase();
    const [slots, broadcasts] = await Promise.all([
      this.#pool.query<SlotRow>(
        `SELECT wallet, nonce, purpose, trade_id, deadline, state, mined_hash, block_number, block_hash, created_at, updated_at
         FROM nonce_slots WHERE wallet = $1 AND state IN ('pending', 'mined') ORDER BY nonce`,
        [lower],
      ),
      this.#pool.query<BroadcastRow>(
        `SELECT ${BROADCAST_COLUMNS} FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
         WHERE s.wallet = $1 AND s.state IN ('pending', 'mined') ORDER BY b.nonce, b.seq`,
        [lower],
      ),
    ]);
    const byNonce = new Map<number, Broadcast[]>();
    for (const row of broadcasts.rows) {
      const nonce = Number(row.nonce);
      let list = byNonce.get(nonce);
      if (list === undefined) {
        list = [];
        byNonce.set(nonce, list);
      }
      list.push(toBroadcast(row));
    }
    // A slot whose broadcasts were not yet committed when read: left for the next look.
    return slots.rows
      .map((row) => toSlot(row, byNonce.get(Number(row.nonce)) ?? []))
      .filter((slot) => slot.broadcasts.length > 0);
  }

  async markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `UPDATE nonce_slots SET state = $3, mined_hash = $4, block_number = $5, block_hash = $6, updated_at = clock_timestamp()
       WHERE wallet = $1 AND nonce = $2`,
      [wallet.toLowerCase(), nonce, state, mined?.hash ?? null, mined?.blockNumber ?? null, mined?.blockHash ?? null],
    );
    if (rowCount !== 1) throw new Error(`nonce ${nonce} of ${wallet.toLowerCase()} has no slot`);
  }

  async finalizeSlots(wallet: string, blockNumber: number): Promise<number> {
    const { rowCount } = await this.#pool.query(
      "UPDATE nonce_slots SET state = 'final', updated_at = clock_timestamp() WHERE wallet = $1 AND state = 'mined' AND block_number <= $2",
      [wallet.toLowerCase(), blockNumber],
    );
    return rowCount ?? 0;
  }

  async releaseSlot(wallet: string, nonce: number, hash: string): Promise<boolean> {
    const lower = wallet.toLowerCase();
    return this.#transaction(async (client) => {
      const { rows } = await client.query<{ hash: string }>(
        "SELECT hash FROM broadcasts WHERE wallet = $1 AND nonce = $2 FOR UPDATE",
        [lower, nonce],
      );
      if (rows.length !== 1 || rows[0]!.hash !== hash.toLowerCase()) return false;
      const released = await client.query<{ trade_id: string | null }>(
        "DELETE FROM nonce_slots WHERE wallet = $1 AND nonce = $2 AND state = 'pending' RETURNING trade_id",
        [lower, nonce],
      );
      if (released.rowCount !== 1) return false;
      await client.query("DELETE FROM broadcasts WHERE hash = $1", [rows[0]!.hash]);
      // Its trade is no longer signed, in the same transaction (see NonceLedger.releaseSlot).
      const tradeId = released.rows[0]?.trade_id;
      if (tradeId)
        await client.query(
          `UPDATE trades SET status = 'accepted', wallet = NULL, nonce = NULL, tx_hash = NULL, raw_tx = NULL, deadline = NULL,
           updated_at = clock_timestamp() WHERE id = $1 AND status = 'signed' AND lower(wallet) = $2 AND nonce = $3`,
          [tradeId, lower, nonce],
        );
      return true;
    });
  }

  async highestNonce(wallet: string): Promise<number | undefined> {
    const { rows } = await this.#pool.query<{ nonce: string | null }>(
      "SELECT max(nonce)::text AS nonce FROM nonce_slots WHERE wallet = $1",
      [wallet.toLowerCase()],
    );
    const highest = rows[0]?.nonce;
    return highest === null || highest === undefined ? undefined : Number(highest);
  }

  async acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    // The database's clock decides, so instances whose clocks differ still agree.
    const { rows } = await this.#pool.query<{ holder: string }>(
      `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3 / 1000.0))
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE leases.holder = excluded.holder OR leases.expires_at < clock_timestamp()
       RETURNING holder`,
      [name, holder, ttlMs],
    );
    return rows[0]?.holder === holder;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    await this.#pool.query("DELETE FROM leases WHERE name = $1 AND holder = $2", [name, holder]);
  }

  async withNonce<T>(
    wallet: string,
    chainNonce: () => Promise<number>,
    send: (nonce: number) => Promise<T>,
    consumed?: NoncesConsumed<T>,
  ): Promise<T> {
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

  async saveQuote(quote: StoredQuote): Promise<void> {
    await this.#pool.query(QUOTE_SQL.insert, quoteParams(quote));
  }

  async getQuote(id: string): Promise<StoredQuote | undefined> {
    const { rows } = await this.#pool.query(QUOTE_SQL.byId, [id]);
    return rows[0] === undefined ? undefined : toQuote(rows[0] as Record<string, unknown>);
  }

  async consumeQuote(id: string, scope: string, tradeId: string, now: Date): Promise<boolean> {
    return (await this.#pool.query(QUOTE_SQL.consume, [tradeId, id, scope, now])).rowCount === 1;
  }

  async releaseQuote(id: string, tradeId: string): Promise<void> {
    await this.#pool.query(QUOTE_SQL.release, [id, tradeId]);
  }

  async sweepQuotes(before: Date): Promise<number> {
    return (await this.#pool.query(QUOTE_SQL.sweep, [before])).rowCount ?? 0;
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
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#renewal);
    await this.releaseLease(`instance:${this.#instance}`, this.#instance).catch(() => {});
    await Promise.all([this.#pool.end(), this.#lockPool.end()]);
  }

  async #mined(id: string, status: "mined" | "confirmed", receipt: TransactionReceipt): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `WITH t AS (
         UPDATE trades SET status = $2, receipt = $3, tx_hash = $4, amount_in = $7, amount_out = $8, gas_wei = $9,
         gas_usd = $9 * native_usd, error = NULL, updated_at = clock_timestamp() WHERE id = $1 RETURNING id
       ), s AS (
         UPDATE nonce_slots s SET state = 'mined', mined_hash = lower($4), block_number = $5, block_hash = $6, updated_at = clock_timestamp()
         FROM t WHERE s.trade_id = t.id AND s.state <> 'final'
       )
       SELECT 1 FROM t`,
      [
        id,
        status,
        JSON.stringify(receipt),
        receipt.transactionHash,
        receipt.blockNumber,
        receipt.blockHash,
        ...amountColumns(receipt),
      ],
    );
    if (rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
  }

  async #expectTrade(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query("SELECT 1 FROM trades WHERE id = $1", [id]);
    if (rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
  }

  /** Runs `work` in one transaction on one pooled connection. */
  async #transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      client.release();
      return result;
    } catch (error) {
      const rolledBack = await client.query("ROLLBACK").then(
        () => true,
        () => false,
      );
      client.release(!rolledBack);
      throw error;
    }
  }

  async #updateOne(id: string, set: string, values: unknown[]): Promise<void> {
    const updated = await this.#pool.query(`UPDATE trades SET ${set}, updated_at = clock_timestamp() WHERE id = $1`, [
      id,
      ...values,
    ]);
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
  deadline: string | null;
  receipt: TransactionReceipt | null; // json arrives parsed, keys in stored order
  error: TradeRecord["error"];
  created_at: Date;
  updated_at: Date;
}

interface BroadcastRow {
  hash: string;
  wallet: string;
  nonce: string;
  raw_tx: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  noop: boolean;
  sent_at: Date;
}

interface SlotRow {
  wallet: string;
  nonce: string;
  purpose: SlotPurpose;
  trade_id: string | null;
  deadline: string | null;
  state: SlotState;
  mined_hash: string | null;
  block_number: string | null;
  block_hash: string | null;
  created_at: Date;
  updated_at: Date;
}

async function insertBroadcast(client: pg.PoolClient, wallet: string, nonce: number, b: Broadcast): Promise<void> {
  await client.query(
    `INSERT INTO broadcasts (hash, wallet, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, noop, sent_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      b.hash.toLowerCase(),
      wallet,
      nonce,
      b.rawTx,
      b.maxFeePerGas.toString(),
      b.maxPriorityFeePerGas.toString(),
      b.noop,
      b.sentAt,
    ],
  );
}

function toRecord(row: Row, broadcasts: Broadcast[]): TradeRecord {
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
    deadline: row.deadline === null ? null : Number(row.deadline),
    broadcasts,
    receipt: row.receipt,
    error: row.error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toBroadcast(row: BroadcastRow): Broadcast {
  return {
    hash: row.hash,
    rawTx: row.raw_tx,
    maxFeePerGas: BigInt(row.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas),
    noop: row.noop,
    sentAt: row.sent_at,
  };
}

function toSlot(row: SlotRow, broadcasts: Broadcast[]): NonceSlot {
  return {
    wallet: row.wallet,
    nonce: Number(row.nonce),
    purpose: row.purpose,
    tradeId: row.trade_id,
    deadline: row.deadline === null ? null : Number(row.deadline),
    state: row.state,
    broadcasts,
    mined:
      row.mined_hash === null
        ? null
        : { hash: row.mined_hash, blockNumber: Number(row.block_number), blockHash: row.block_hash ?? "" },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
