import { TradeRevertedError } from "../errors.js";
import type { TradeJournal } from "../ports/journal.port.js";
import type { SignedTrade, TradePort } from "../ports/trade.port.js";

/**
 * Settles journalled trades whose outcome is not known yet (a receipt timeout, or a
 * crash between broadcast and receipt) by asking the chain, never by resending.
 * Each watched trade is polled until it is mined (→ confirmed, or failed if it
 * reverted) or dropped (→ failed: its nonce went to another transaction, or it was
 * never broadcast, so nothing was paid).
 */
export class TradeSettlement {
  readonly #watching = new Map<string, Promise<void>>();
  #closed = false;

  constructor(
    private readonly journal: TradeJournal,
    private readonly trade: TradePort,
    private readonly pollMs = 1000,
  ) {}

  /** Resolves every trade the journal holds as signed but unsettled; returns how many it started watching. */
  async recover(): Promise<number> {
    const unresolved = await this.journal.unresolved();
    for (const record of unresolved) {
      if (record.wallet === null || record.nonce === null || record.txHash === null || record.rawTx === null) continue;
      this.watch(record.id, { wallet: record.wallet, nonce: record.nonce, txHash: record.txHash, rawTx: record.rawTx });
    }
    return unresolved.length;
  }

  /** Watches one trade in the background until it is settled. */
  watch(id: string, tx: SignedTrade): void {
    if (this.#watching.has(id) || this.#closed) return;
    const run = this.#settle(id, tx).finally(() => this.#watching.delete(id));
    this.#watching.set(id, run);
  }

  /** Settles `id` now if the chain already knows its outcome; true when settled. */
  async settleOnce(id: string, tx: SignedTrade): Promise<boolean> {
    const resolution = await this.trade.resolve(tx);
    if (resolution.state === "pending") return false;
    if (resolution.state === "mined") {
      if (resolution.receipt.status) await this.journal.markConfirmed(id, resolution.receipt);
      else {
        const error = new TradeRevertedError(`transaction ${tx.txHash} reverted when mined`);
        await this.journal.markFailed(id, { code: error.code, message: error.message });
      }
    } else {
      const error = new TradeRevertedError(`transaction ${tx.txHash} was dropped and never mined; nothing was paid`);
      await this.journal.markFailed(id, { code: error.code, message: error.message });
    }
    return true;
  }

  /** Stops watching; trades left unsettled are picked up by `recover()` at the next start. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled(this.#watching.values());
  }

  async #settle(id: string, tx: SignedTrade): Promise<void> {
    while (!this.#closed) {
      try {
        if (await this.settleOnce(id, tx)) return;
      } catch {
        // The chain or the journal is unreachable: try again on the next poll.
      }
      await new Promise((resolve) => setTimeout(resolve, this.pollMs));
    }
  }
}
