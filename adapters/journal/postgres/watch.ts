/**
 * The PostgreSQL journal's part of the watch (core/ports/watch.port.ts), and its migration: the
 * outside transactions recorded once each (the first instance to see one records it; the others'
 * inserts find it there and write nothing), the wallets paused, the alarms raised. Each change is
 * one transaction with its events (one per watcher scope a live registration holds) and, last,
 * its audit record (audit_append locks the chain's head until the commit).
 */
import type pg from "pg";

import type {
  AuditEntry,
  OutsideTransaction,
  WalletPause,
  WatchEvent,
  WatchJournal,
  WatchedNonce,
} from "../../../core/index.js";
import { appendAudit } from "./audit.js";
import { transaction } from "./store.js";

/**
 * Migration 16: events without a trade (about a wallet or the swap: `data` instead of the trade,
 * and the `subject` whose events go out in order per scope); which registrations get them
 * (`watcher`); and the watch's own tables.
 */
export const WATCH_MIGRATION = `ALTER TABLE webhook_events ALTER COLUMN trade_id DROP NOT NULL, ALTER COLUMN trade DROP NOT NULL,
     ADD COLUMN subject TEXT, ADD COLUMN data JSON;
   CREATE INDEX webhook_events_subject ON webhook_events (subject, scope, seq) WHERE status = 'pending' AND subject IS NOT NULL;
   ALTER TABLE webhook_registrations ADD COLUMN watcher BOOLEAN NOT NULL DEFAULT false;
   CREATE TABLE outside_transactions (
     wallet TEXT NOT NULL,                    -- lower case
     nonce BIGINT NOT NULL,
     hash TEXT,                               -- NULL: only the nonce was seen used
     to_address TEXT,
     value NUMERIC(78, 0),                    -- wei
     block_number BIGINT NOT NULL,
     recorded_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
     PRIMARY KEY (wallet, nonce)
   );
   CREATE TABLE wallet_pauses (
     wallet TEXT PRIMARY KEY,                 -- lower case
     since TIMESTAMPTZ NOT NULL,
     nonce BIGINT NOT NULL,
     hash TEXT
   );
   CREATE TABLE watch_alarms (
     name TEXT PRIMARY KEY,
     raised BOOLEAN NOT NULL,
     updated_at TIMESTAMPTZ NOT NULL
   );`;

/**
 * Migration 18: where the watch left each wallet on each chain (WatchedNonce), so that a start
 * looks at the nonces the wallet used while no instance ran.
 */
export const WATCHED_NONCES_MIGRATION = `CREATE TABLE watched_nonces (
     wallet TEXT NOT NULL,                    -- lower case
     chain_id BIGINT NOT NULL,
     nonce BIGINT NOT NULL,                   -- the next nonce: every one below it explained
     block_number BIGINT NOT NULL,            -- as of this block
     updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
     PRIMARY KEY (wallet, chain_id)
   );`;

/** One event per watcher scope a live registration holds; its values from `$1`: type, subject, data, at. */
const WATCH_EVENT = `INSERT INTO webhook_events (id, scope, trade_id, type, trade, subject, data, created_at, next_attempt_at, window_start)
   SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), r.scope, NULL, $1, NULL, $2, $3::json, $4, $4, $4
   FROM (SELECT DISTINCT scope FROM webhook_registrations WHERE watcher AND expires_at > clock_timestamp()) r`;

interface PauseRow {
  wallet: string;
  since: Date;
  nonce: string;
  hash: string | null;
}

export class PostgresWatch implements WatchJournal {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  recordOutsideTransaction(
    tx: OutsideTransaction,
    event: WatchEvent,
    audit: AuditEntry,
    pause: boolean,
  ): Promise<boolean> {
    const wallet = tx.wallet.toLowerCase();
    return transaction(this.#pool, async (client) => {
      const inserted = await client.query(
        `INSERT INTO outside_transactions (wallet, nonce, hash, to_address, value, block_number)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
        [wallet, tx.nonce, tx.hash, tx.to, tx.value === null ? null : tx.value.toString(), tx.blockNumber],
      );
      if (inserted.rowCount !== 1) return false;
      if (pause)
        await client.query(
          `INSERT INTO wallet_pauses (wallet, since, nonce, hash) VALUES ($1, clock_timestamp(), $2, $3)
           ON CONFLICT DO NOTHING`,
          [wallet, tx.nonce, tx.hash],
        );
      await emit(client, event);
      await appendAudit(client, audit);
      return true;
    });
  }

  setWatchAlarm(name: string, raised: boolean, event: WatchEvent): Promise<boolean> {
    return transaction(this.#pool, async (client) => {
      // A cleared alarm that was never raised is no change: only a raise inserts.
      const changed = await client.query(
        `INSERT INTO watch_alarms AS a (name, raised, updated_at)
         SELECT $1, $2, clock_timestamp() WHERE $2 OR EXISTS (SELECT 1 FROM watch_alarms WHERE name = $1)
         ON CONFLICT (name) DO UPDATE SET raised = EXCLUDED.raised, updated_at = EXCLUDED.updated_at
         WHERE a.raised IS DISTINCT FROM EXCLUDED.raised`,
        [name, raised],
      );
      if (changed.rowCount !== 1) return false;
      await emit(client, event);
      return true;
    });
  }

  async watchAlarms(): Promise<string[]> {
    const { rows } = await this.#pool.query<{ name: string }>(
      "SELECT name FROM watch_alarms WHERE raised ORDER BY name",
    );
    return rows.map((row) => row.name);
  }

  async unknownTransactions(wallet: string, hashes: readonly string[]): Promise<string[]> {
    if (hashes.length === 0) return [];
    const { rows } = await this.#pool.query<{ hash: string }>(
      "SELECT hash FROM broadcasts WHERE wallet = $1 AND hash = ANY($2::text[])",
      [wallet.toLowerCase(), hashes.map((hash) => hash.toLowerCase())],
    );
    const known = new Set(rows.map((row) => row.hash));
    return hashes.filter((hash) => !known.has(hash.toLowerCase()));
  }

  async walletPauses(): Promise<WalletPause[]> {
    const { rows } = await this.#pool.query<PauseRow>("SELECT * FROM wallet_pauses ORDER BY wallet");
    return rows.map(pauseOf);
  }

  resumeWallet(wallet: string, audit: AuditEntry): Promise<WalletPause | undefined> {
    return transaction(this.#pool, async (client) => {
      const { rows } = await client.query<PauseRow>("DELETE FROM wallet_pauses WHERE wallet = $1 RETURNING *", [
        wallet.toLowerCase(),
      ]);
      if (rows[0] === undefined) return undefined;
      await appendAudit(client, audit);
      return pauseOf(rows[0]);
    });
  }

  async watchedNonce(wallet: string, chainId: number): Promise<WatchedNonce | undefined> {
    const { rows } = await this.#pool.query<{ nonce: string; block_number: string }>(
      "SELECT nonce, block_number FROM watched_nonces WHERE wallet = $1 AND chain_id = $2",
      [wallet.toLowerCase(), chainId],
    );
    const row = rows[0];
    return row === undefined ? undefined : { chainId, nonce: Number(row.nonce), block: Number(row.block_number) };
  }

  async saveWatchedNonce(wallet: string, at: WatchedNonce, back = false): Promise<void> {
    // Forward only, unless back: two instances reading the same wallet never take it back.
    await this.#pool.query(
      `INSERT INTO watched_nonces (wallet, chain_id, nonce, block_number) VALUES ($1, $2, $3, $4)
       ON CONFLICT (wallet, chain_id) DO UPDATE SET nonce = excluded.nonce, block_number = excluded.block_number,
         updated_at = clock_timestamp()
       WHERE excluded.nonce > watched_nonces.nonce OR $5`,
      [wallet.toLowerCase(), at.chainId, at.nonce, at.block, back],
    );
  }
}

async function emit(client: pg.PoolClient, event: WatchEvent): Promise<void> {
  await client.query(WATCH_EVENT, [event.type, event.subject, JSON.stringify(event.data), event.at]);
}

function pauseOf(row: PauseRow): WalletPause {
  return { wallet: row.wallet, since: row.since, nonce: Number(row.nonce), hash: row.hash };
}
