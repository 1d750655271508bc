/**
 * The SQLite journal's schema: its migrations, and `migrate`, which applies those a file lacks
 * when a journal opens it.
 */
import type { DatabaseSync } from "node:sqlite";

import type { TransactionReceipt } from "../../../core/index.js";
import { APPROVALS_MIGRATION } from "./approvals.js";
import { AUDIT_MIGRATION } from "./audit.js";
import { CANCELS_MIGRATION } from "./cancels.js";
import { amountColumns } from "./rows.js";
import { SPEND_PAYOUT_MIGRATION, SPENDING_MIGRATION } from "./spending.js";
import { WATCHED_NONCES_MIGRATION, WATCH_MIGRATION } from "./watch.js";
import { WEBHOOK_REGISTRATIONS_MIGRATION, WEBHOOK_RETENTION_MIGRATION, WEBHOOKS_MIGRATION } from "./webhooks.js";

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
  // 5: quotes (quotes.ts), until a trade uses one or it is swept after expiring.
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
  // 7: the webhook outbox (webhooks.ts): its events, written by a trigger on trades.
  WEBHOOKS_MIGRATION,
  // 8: webhook registrations (webhooks.ts): which scopes get events, held per process and
  // renewed while it runs, instead of one set each start overwrote.
  WEBHOOK_REGISTRATIONS_MIGRATION,
  // 9: when each webhook event finished (webhooks.ts), so the finished ones are deleted after
  // WEBHOOK_RETENTION_DAYS.
  WEBHOOK_RETENTION_MIGRATION,
  // 10: what each slot holds back until it is final (NonceLedger.reservations): a trade's spend
  // and a sell's payout, so that the trades after it count them whichever instance signed it, and
  // after a restart. The index serves the two ranges read: pending, and mined after a block.
  `ALTER TABLE nonce_slots ADD COLUMN reserves TEXT;  -- JSON [{holder, asset, amount}], amounts decimal text
   CREATE INDEX nonce_slots_reserving ON nonce_slots (state, block_number) WHERE reserves IS NOT NULL;`,
  // 11: the access file (spending.ts): the name of the key that sent each trade, and what each
  // trade counts against the spending limits, with a counter per limit scope.
  SPENDING_MIGRATION,
  // 12: the audit log (audit.ts), appended in the same transaction as what each record records.
  AUDIT_MIGRATION,
  // 13: a sell's coin decimals with its spend (spending.ts): once mined it counts what it paid.
  SPEND_PAYOUT_MIGRATION,
  // 14: the approvals (approvals.ts): the held, approved and rejected states, each held trade's
  // approval, the webhook events of the approvals, and a held or approved trade keeping its room.
  APPROVALS_MIGRATION,
  // 15: the watch (watch.ts): webhook events about a wallet or the swap, with no trade; the
  // outside transactions, the paused wallets and the alarms.
  WATCH_MIGRATION,
  // 16: the cancels (cancels.ts): the cancelled state, each trade's cancel, and their webhook events.
  CANCELS_MIGRATION,
  // 17: where the watch left each wallet (watch.ts), for a start to look at what it did meanwhile.
  WATCHED_NONCES_MIGRATION,
];

/** The migration that added the amount columns: the receipts already kept are read into them once. */
const AMOUNTS_MIGRATION = 4;

export function migrate(db: DatabaseSync): void {
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
