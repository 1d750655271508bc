/**
 * A PricePort decorator: a short-lived cache with single-flight in front of the chain.
 *
 * Every uncached quote costs several JSON-RPC reads (the swap's price and maximum age,
 * both fiat feeds, the latest block). Within `ttlMs` the last good record is served
 * from memory, and concurrent misses share one read of the port.
 *
 * - A record's age counts from the moment its read *started*, so a served quote is
 *   never older than `ttlMs` (it may lag the chain by at most that much).
 * - Errors are never cached: a PriceUnavailableError or an unreachable chain is asked
 *   again on the next call (callers that joined the failing read share its error).
 * - `ttlMs` 0 turns it off: every call goes to the port, without single-flight.
 */
import type { PricePort, PriceRecord } from "../../../core/index.js";

export interface CachedPriceOptions {
  /** How long a good record is served, in ms; 0 disables the cache. */
  ttlMs: number;
  /** A monotonic clock in ms (tests inject one). Default: performance.now. */
  now?: () => number;
}

export class CachedPricePort implements PricePort {
  readonly #port: PricePort;
  readonly #ttlMs: number;
  readonly #now: () => number;
  #cached: { record: PriceRecord; expiresAt: number } | undefined;
  #inFlight: Promise<PriceRecord> | undefined;

  constructor(port: PricePort, options: CachedPriceOptions) {
    if (!Number.isFinite(options.ttlMs) || options.ttlMs < 0)
      throw new RangeError(`ttlMs: must be a finite number >= 0, got ${options.ttlMs}`);
    this.#port = port;
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The cached record while it is fresh (PricePort.current). */
  current(): PriceRecord | undefined {
    const cached = this.#cached;
    return cached !== undefined && this.#now() < cached.expiresAt ? cached.record : undefined;
  }

  getPrice(): Promise<PriceRecord> {
    if (this.#ttlMs === 0) return this.#port.getPrice();
    const now = this.#now();
    if (this.#cached !== undefined && now < this.#cached.expiresAt) return Promise.resolve(this.#cached.record);
    if (this.#inFlight !== undefined) return this.#inFlight;

    const startedAt = now;
    // The handlers run asynchronously, so always after `#inFlight` is set below, even when
    // the port throws synchronously.
    const read = Promise.resolve()
      .then(() => this.#port.getPrice())
      .then(
        (record) => {
          this.#inFlight = undefined;
          this.#cached = { record, expiresAt: startedAt + this.#ttlMs };
          return record;
        },
        (error: unknown) => {
          this.#inFlight = undefined;
          this.#cached = undefined;
          throw error;
        },
      );
    this.#inFlight = read;
    return read;
  }
}
