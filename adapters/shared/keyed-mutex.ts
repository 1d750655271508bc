import type { NoncesConsumed } from "../../core/index.js";

/**
 * One task at a time per key, in call order, within this process. The nonce stores use it
 * per wallet (SQLite and memory rely on it alone; PostgreSQL so that one process holds at
 * most one database connection waiting for a wallet's lock), the chain adapter per
 * wallet and asset for allowances.
 */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => done);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await task();
    } finally {
      release();
      // Forget idle keys, so a long-running service does not keep one entry per wallet ever seen.
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}

/** A nonce from the chain must be a non-negative safe integer; anything else is a bug upstream. */
export function checkNonce(nonce: number): number {
  if (!Number.isSafeInteger(nonce) || nonce < 0)
    throw new Error(`chainNonce() returned ${String(nonce)}, not a non-negative integer`);
  return nonce;
}

/** The next nonce to store after a `withNonce` send from `nonce`: one on by default, null to resync from the chain. */
export function nextNonce<T>(nonce: number, result: T, consumed?: NoncesConsumed<T>): number | null {
  if (consumed === undefined) return nonce + 1;
  const used = consumed(result);
  if (used === null) return null;
  if (!Number.isSafeInteger(used) || used < 0)
    throw new Error(`consumed() returned ${String(used)}, not a count of nonces`);
  return nonce + used;
}
