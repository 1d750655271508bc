/**
 * In-process nonce assignment for one signing wallet.
 *
 * Signing and broadcasting are serialized (one at a time per wallet); waiting for
 * receipts is not, so trades are pipelined. A nonce is committed only when its
 * transaction was accepted by the node: a failed send leaves no gap. After any
 * failure the local count is dropped and re-read from the chain's pending count,
 * which also recovers from someone else using the wallet ("nonce too low") and from
 * a node that dropped pending transactions ("nonce too high").
 */
import { isError, type Provider } from "ethers";

export class NonceSequencer {
  #next: number | undefined;
  #tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly address: string,
    private readonly provider: Provider,
  ) {}

  /**
   * Runs `send(nonce)` alone. Resolves with its result and advances the nonce;
   * on a "nonce too low" it resyncs and retries once; on any other failure it
   * resyncs and rethrows.
   */
  send<T>(send: (nonce: number) => Promise<T>): Promise<T> {
    const run = this.#tail.then(async () => {
      for (let attempt = 0; ; attempt += 1) {
        this.#next ??= await this.provider.getTransactionCount(this.address, "pending");
        const nonce = this.#next;
        try {
          const result = await send(nonce);
          this.#next = nonce + 1;
          return result;
        } catch (error) {
          this.#next = undefined;
          if (attempt === 0 && isNonceConflict(error)) continue;
          throw error;
        }
      }
    });
    this.#tail = run.catch(() => undefined);
    return run;
  }
}

function isNonceConflict(error: unknown): boolean {
  if (isError(error, "NONCE_EXPIRED") || isError(error, "REPLACEMENT_UNDERPRICED")) return true;
  const message = String((error as { message?: unknown })?.message ?? "");
  // "Nonce too high": the node forgot transactions (a dropped mempool entry, a reset dev chain).
  return /nonce too (low|high)|nonce has already been used|replacement transaction underpriced/i.test(message);
}

/** A mutex: runs tasks one after another. */
export class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(task);
    this.#tail = run.catch(() => undefined);
    return run;
  }
}
