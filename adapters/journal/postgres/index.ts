/**
 * The trade journal in PostgreSQL (pg), shared by several service instances: one journal,
 * and one nonce sequence per wallet, coordinated in the database.
 *
 * Durability: every write is its own committed statement (autocommit), so it is on disk
 * (with the server's default synchronous_commit=on) before the call resolves.
 *
 * Locking: a wallet's nonces are held under an advisory lock, which PostgreSQL releases when
 * the holding process dies (nonces.ts).
 *
 * Its ports, one object each on the same pools (store.ts), and every port's methods as its own
 * (Journal, adapters/shared/journal.ts).
 */
import { randomUUID } from "node:crypto";

import type pg from "pg";

import { Journal } from "../../shared/journal.js";
import { PostgresApprovals } from "./approvals.js";
import { PostgresAudit } from "./audit.js";
import { PostgresLeases } from "./leases.js";
import { migrate } from "./migrations.js";
import { PostgresNonces } from "./nonces.js";
import { PostgresQuotes } from "./quotes.js";
import { openPools, type PostgresPools } from "./store.js";
import { PostgresTrades } from "./trades.js";
import { PostgresWatch } from "./watch.js";
import { PostgresOutbox } from "./webhooks.js";

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
  const pools = openPools(url, options);
  try {
    await migrate(pools.pool);
  } catch (error) {
    await Promise.allSettled([pools.pool.end(), pools.lockPool.end()]);
    throw error;
  }
  const journal = new PostgresJournal(pools, options.instanceId ?? randomUUID(), options.leaseMs ?? 15_000);
  await journal.keepAlive();
  return journal;
}

export class PostgresJournal extends Journal {
  readonly ports: {
    trades: PostgresTrades;
    nonces: PostgresNonces;
    leases: PostgresLeases;
    quotes: PostgresQuotes;
    webhooks: PostgresOutbox;
    audit: PostgresAudit;
    watch: PostgresWatch;
    approvals: PostgresApprovals;
  };
  readonly #pool: pg.Pool;
  readonly #lockPool: pg.Pool;
  #closed = false;

  readonly #instance: string;
  readonly #leaseMs: number;
  readonly #renewal: NodeJS.Timeout;

  constructor(pools: PostgresPools, instance: string, leaseMs: number) {
    super();
    const { pool, lockPool } = pools;
    const trades = new PostgresTrades(pool, instance);
    this.ports = {
      trades,
      nonces: new PostgresNonces(pools),
      leases: new PostgresLeases(pool),
      quotes: new PostgresQuotes(pool),
      webhooks: new PostgresOutbox(pool),
      audit: new PostgresAudit(pool),
      watch: new PostgresWatch(pool),
      approvals: new PostgresApprovals(pool, { name: instance, leaseMs }, (id) => trades.get(id)),
    };
    this.#pool = pool;
    this.#lockPool = lockPool;
    this.#instance = instance;
    this.#leaseMs = leaseMs;
    // While this instance lives, the trades it accepted are its own to finish.
    this.#renewal = setInterval(() => void this.keepAlive().catch(() => {}), Math.max(100, Math.floor(leaseMs / 3)));
    this.#renewal.unref();
  }

  /** Renews this instance's lease, which keeps its accepted trades from being forgotten. */
  async keepAlive(): Promise<void> {
    await this.ports.leases.acquireLease(`instance:${this.#instance}`, this.#instance, this.#leaseMs);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#renewal);
    await this.ports.leases.releaseLease(`instance:${this.#instance}`, this.#instance).catch(() => {});
    await Promise.all([this.#pool.end(), this.#lockPool.end()]);
  }
}
