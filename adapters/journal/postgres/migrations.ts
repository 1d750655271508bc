/**
 * The PostgreSQL journal's schema: its migrations, and `migrate`, which applies those a database
 * lacks when a journal opens.
 */
import type pg from "pg";

import type { TransactionReceipt } from "../../../core/index.js";
import { APPROVALS_MIGRATION } from "./approvals.js";
import { CANCELS_MIGRATION } from "./cancels.js";
import { AUDIT_MIGRATION } from "./audit.js";
import { amountColumns } from "./rows.js";
import { SPEND_ADMIT_MIGRATION } from "./spend-admit.js";
import { SPEND_LOCKS_MIGRATION } from "./spend-locks.js";
import { SPEND_PAID_MIGRATION } from "./spend-paid.js";
import { SPENDING_MIGRATION } from "./spending.js";
import { WATCHED_NONCES_MIGRATION, WATCH_MIGRATION } from "./watch.js";
import { WEBHOOK_REGISTRATIONS_MIGRATION, WEBHOOK_RETENTION_MIGRATION, WEBHOOKS_MIGRATION } from "./webhooks.js";
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
  // 4: quotes (quotes.ts), until a trade uses one or it is swept after expiring.
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
  // 6: the webhook outbox (webhooks.ts): its events, written by a trigger on trades.
  WEBHOOKS_MIGRATION,
  // 7: webhook registrations (webhooks.ts): which scopes get events, held per instance and
  // renewed while it runs, instead of one set each instance overwrote at start.
  WEBHOOK_REGISTRATIONS_MIGRATION,
  // 8: when each webhook event finished (webhooks.ts), so the finished ones are deleted after
  // WEBHOOK_RETENTION_DAYS.
  WEBHOOK_RETENTION_MIGRATION,
  // 9: what each slot holds back until it is final (NonceLedger.reservations): a trade's spend
  // and a sell's payout, so that the trades after it count them whichever instance signed it, and
  // after a restart. The index serves the two ranges read: pending, and mined after a block.
  `ALTER TABLE nonce_slots ADD COLUMN reserves text;  -- JSON [{holder, asset, amount}], amounts decimal text
   CREATE INDEX nonce_slots_reserving ON nonce_slots (state, block_number) WHERE reserves IS NOT NULL;`,
  // 10: the access file (spending.ts): the name of the key that sent each trade, and what each
  // trade counts against the spending limits, with a counter per limit scope.
  SPENDING_MIGRATION,
  // 11: spend_admit reads a limit's window only to create its counter, and ages a counter only
  // when it is behind or full (spend-admit.ts), not on every trade; spend_open admits a new
  // trade's spend in the statement that inserts it.
  SPEND_ADMIT_MIGRATION,
  // 12: the audit log and its head (audit.ts), appended in the same transaction as what each
  // record records, one chain for every instance.
  AUDIT_MIGRATION,
  // 13: the scope locks that make a new counter's first sum whole across instances (spend-locks.ts).
  SPEND_LOCKS_MIGRATION,
  // 14: a sell counted at what its receipt says it paid, once mined (spend-paid.ts).
  SPEND_PAID_MIGRATION,
  // 15: the approvals (approvals.ts): the held, approved and rejected states, each held trade's
  // approval, the webhook events of the approvals, and a held or approved trade keeping its room.
  APPROVALS_MIGRATION,
  // 16: the watch (watch.ts): webhook events about a wallet or the swap, with no trade; the
  // outside transactions, the paused wallets and the alarms.
  WATCH_MIGRATION,
  // 17: the cancels (cancels.ts): the cancelled state, each trade's cancel, and their webhook events.
  CANCELS_MIGRATION,
  // 18: where the watch left each wallet (watch.ts), for a start to look at what it did meanwhile.
  WATCHED_NONCES_MIGRATION,
];

/** The migration that added the amount columns: the receipts already kept are read into them once. */
const AMOUNTS_MIGRATION = 3;

/** Applies missing migrations under an advisory lock, so instances starting together take turns. */
export async function migrate(pool: pg.Pool): Promise<void> {
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
