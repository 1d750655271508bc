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

import { KeyedMutex } from "../shared/keyed-mutex.js";

export interface NonceStore {
  /** Runs `send(nonce)` alone for `wallet`; commits nonce + 1 if it resolves, forgets the count if it throws. */
  withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>): Promise<T>;
}

export class MemoryNonceStore implements NonceStore {
  readonly #next = new Map<string, number>();
  readonly #mutex = new KeyedMutex();

  withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>): Promise<T> {
    const key = wallet.toLowerCase();
    return this.#mutex.run(key, async () => {
      const nonce = this.#next.get(key) ?? (await chainNonce());
      try {
        const result = await send(nonce);
        this.#next.set(key, nonce + 1);
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
