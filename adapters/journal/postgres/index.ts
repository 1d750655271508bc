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
 * One object with every port's methods: those of its parts, one part per port, on the same
 * pools (store.ts; how the parts make one journal: ../parts.ts).
 */
import { randomUUID } from "node:crypto";

import type pg from "pg";

import { type CoversPorts, delegateToParts, type JournalPorts, type PartsOf } from "../parts.js";
import { PostgresLeases } from "./leases.js";
import { migrate } from "./migrations.js";
import { PostgresNonces } from "./nonces.js";
import { PostgresQuotes } from "./quotes.js";
import { openPools, type PostgresPools } from "./store.js";
import { PostgresTrades } from "./trades.js";
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

/** Its parts, one per port: each method of theirs is one of the journal's (delegateToParts, below). */
const PARTS = {
  trades: PostgresTrades,
  nonces: PostgresNonces,
  leases: PostgresLeases,
  quotes: PostgresQuotes,
  webhooks: PostgresOutbox,
};
type Parts = PartsOf<typeof PARTS>;
// Every port method is some part's: a missing one fails to compile.
true satisfies CoversPorts<Parts>;

/** Every port the journal implements, by its parts. */
export interface PostgresJournal extends JournalPorts {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the ports' methods are its parts', put on its prototype by delegateToParts (below)
export class PostgresJournal {
  protected readonly parts: Parts;
  readonly #pool: pg.Pool;
  readonly #lockPool: pg.Pool;
  #closed = false;

  readonly #instance: string;
  readonly #leaseMs: number;
  readonly #renewal: NodeJS.Timeout;

  constructor(pools: PostgresPools, instance: string, leaseMs: number) {
    const { pool, lockPool } = pools;
    this.parts = {
      trades: new PostgresTrades(pool, instance),
      nonces: new PostgresNonces(pools),
      leases: new PostgresLeases(pool),
      quotes: new PostgresQuotes(pool),
      webhooks: new PostgresOutbox(pool),
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
    await this.acquireLease(`instance:${this.#instance}`, this.#instance, this.#leaseMs);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#renewal);
    await this.releaseLease(`instance:${this.#instance}`, this.#instance).catch(() => {});
    await Promise.all([this.#pool.end(), this.#lockPool.end()]);
  }
}

delegateToParts(PostgresJournal, PARTS);
