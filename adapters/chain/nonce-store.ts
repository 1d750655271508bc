/**
 * Nonce assignment per signing wallet.
 *
 * Signing and broadcasting are serialized per wallet; waiting for receipts is not, so
 * trades are pipelined. A nonce is committed only when its transaction was accepted by
 * the node: a failed send leaves no gap. After any failure the count is dropped and
 * re-read from the chain's pending count, which also recovers from someone else using
 * the wallet ("nonce too low") and from a node that dropped pending transactions
 * ("nonce too high").
 *
 * `MemoryNonceStore` serves one process. The trade journals implement the same
 * `withNonce` with the count in their database, shared by every instance.
 */
import { isError } from "ethers";

import type { NoncesConsumed } from "../../core/ports/journal.port.js";
import { KeyedMutex, nextNonce } from "../shared/keyed-mutex.js";

export interface NonceStore {
  /**
   * Runs `send(nonce)` alone for `wallet`; commits nonce + 1 (or nonce + `consumed(result)`)
   * if it resolves, forgets the count if it throws (or `consumed` answers null).
   */
  withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>, consumed?: NoncesConsumed<T>): Promise<T>;
}

export class MemoryNonceStore implements NonceStore {
  readonly #next = new Map<string, number>();
  readonly #mutex = new KeyedMutex();

  withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>, consumed?: NoncesConsumed<T>): Promise<T> {
    const key = wallet.toLowerCase();
    return this.#mutex.run(key, async () => {
      const nonce = this.#next.get(key) ?? (await chainNonce());
      try {
        const result = await send(nonce);
        const next = nextNonce(nonce, result, consumed);
        if (next === null) this.#next.delete(key);
        else this.#next.set(key, next);
        return result;
      } catch (error) {
        this.#next.delete(key);
        throw error;
      }
    });
  }
}

/** The node refused the nonce: someone else used it, or the node forgot pending transactions. */
export function isNonceConflict(error: unknown): boolean {
  if (isError(error, "NONCE_EXPIRED") || isError(error, "REPLACEMENT_UNDERPRICED")) return true;
  const message = String((error as { message?: unknown })?.message ?? "");
  return /nonce too (low|high)|nonce has already been used|replacement transaction underpriced/i.test(message);
}
