/**
 * Rate limits, as token buckets held in this process's memory (several instances each keep
 * their own: behind a load balancer spreading over N instances, a key gets up to N times the
 * rate):
 * - per api key: `rate` requests a second with bursts of `burst` (OpenZeppelin Relayer answers
 *   100/s with a burst of 300 per key); off unless configured;
 * - per client address (client-address.ts: the peer's, or behind a trusted proxy the one
 *   X-Forwarded-For names), for refused keys: each 401 (gRPC UNAUTHENTICATED) takes a token, and
 *   while an address has none left its requests without a valid key are refused. A valid key is
 *   never refused by it (the key is checked first, one hash lookup), nor are the probes: one
 *   client with a wrong key behind a NAT or a proxy does not take the service away from the
 *   others there. Guessing keys gets nowhere by their length, not by this throttle.
 *
 * Over a limit: HTTP 429 with Retry-After and `{"code": "resource_exhausted", ...}` on the JSON
 * routes and Connect, gRPC RESOURCE_EXHAUSTED (8) on gRPC and gRPC-Web.
 */

/** A bucket's settings: `rate` tokens added a second, holding at most `burst`. */
export interface BucketLimit {
  rate: number;
  burst: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Token buckets by key, refilled lazily; full buckets are forgotten, so memory follows the active keys. */
export class TokenBuckets {
  readonly #limit: BucketLimit;
  readonly #now: () => number;
  readonly #buckets = new Map<string, Bucket>();
  #sweptAt: number;

  constructor(limit: BucketLimit, now: () => number = () => performance.now()) {
    if (!(limit.rate > 0) || !(limit.burst >= 1))
      throw new RangeError(`rate must be > 0 and burst >= 1, got ${limit.rate} and ${limit.burst}`);
    this.#limit = limit;
    this.#now = now;
    this.#sweptAt = now();
  }

  /** Takes a token for `key`; when there is none, how long until there is one, in seconds (rounded up). */
  take(key: string): { ok: true } | { ok: false; retryAfterS: number } {
    const bucket = this.#refilled(key);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterS: this.#retryAfterS(bucket.tokens) };
  }

  /** Whether `key` has a token left, without taking it; when not, the seconds until it has. */
  peek(key: string): { ok: true } | { ok: false; retryAfterS: number } {
    const bucket = this.#buckets.get(key);
    if (bucket === undefined) return { ok: true };
    const tokens = this.#tokensAt(bucket, this.#now());
    return tokens >= 1 ? { ok: true } : { ok: false, retryAfterS: this.#retryAfterS(tokens) };
  }

  /** Buckets held (for tests and metrics). */
  get size(): number {
    return this.#buckets.size;
  }

  #refilled(key: string): Bucket {
    const now = this.#now();
    this.#sweep(now);
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      bucket = { tokens: this.#limit.burst, at: now };
      this.#buckets.set(key, bucket);
      return bucket;
    }
    bucket.tokens = this.#tokensAt(bucket, now);
    bucket.at = now;
    return bucket;
  }

  /** What `bucket` holds at `now`: refilled at the rate since it was last counted, up to the burst. */
  #tokensAt(bucket: Bucket, now: number): number {
    return Math.min(this.#limit.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.#limit.rate);
  }

  /** Seconds until a bucket holding `tokens` has a whole one, rounded up (at least 1). */
  #retryAfterS(tokens: number): number {
    return Math.max(1, Math.ceil((1 - tokens) / this.#limit.rate));
  }

  /** Forgets buckets that have refilled, at most once per refill time. */
  #sweep(now: number): void {
    const fullAfterMs = (this.#limit.burst / this.#limit.rate) * 1000;
    if (now - this.#sweptAt < Math.min(fullAfterMs, 60_000)) return;
    this.#sweptAt = now;
    for (const [key, bucket] of this.#buckets) if (now - bucket.at >= fullAfterMs) this.#buckets.delete(key);
  }
}

export interface RateLimitOptions {
  /** Per api key; undefined = no limit. */
  perKey?: BucketLimit;
  /** Refused keys per client address; undefined = no limit. */
  authFailures?: BucketLimit;
}
