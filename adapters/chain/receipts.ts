/**
 * Waiting for a transaction the service sent: whichever of its nonce's broadcasts gets mined
 * (the first, a re-priced replacement, or a no-op), with the confirmations the service
 * requires, from the canonical chain.
 */
import type { JsonRpcApiProvider } from "ethers";

import { TradePendingError } from "../../core/index.js";
import type { RpcReceipt } from "./web3-receipt.js";

/**
 * What the journal holds for the nonce now: its broadcasts (replacements and no-ops the
 * lifecycle monitor of any instance sent), or the error a trade ended with meanwhile.
 */
export type NonceLookup = () => Promise<{ broadcasts?: ReadonlyArray<{ hash: string; noop: boolean }>; error?: Error }>;

export interface ReceiptsOptions {
  provider: JsonRpcApiProvider;
  /** Blocks a receipt must have on top of it, its own included, before it counts (1 = on inclusion). */
  confirmations: number;
  /** After this long without a receipt, TradePendingError. */
  timeoutMs: number;
  /** From when on the journal is asked for replacements of a trade, in ms after it was sent. */
  journalAfterMs: number;
}

/** What was mined at the nonce. */
export interface Outcome {
  receipt: RpcReceipt;
  /** The mined transaction was the no-op that freed the nonce (the trade expired). */
  noop: boolean;
  confirmations: number;
}

export class Receipts {
  readonly #opts: ReceiptsOptions;

  constructor(options: ReceiptsOptions) {
    this.#opts = options;
  }

  /** The node's receipt as it sent it (web3-receipt.ts formats it), or null while unmined. */
  async receipt(hash: string): Promise<RpcReceipt | null> {
    return (await this.#opts.provider.send("eth_getTransactionReceipt", [hash])) as RpcReceipt | null;
  }

  /** The head block's number. */
  async head(): Promise<number> {
    return Number(await this.#opts.provider.send("eth_blockNumber", []));
  }

  /**
   * The first of `hashes` that is mined in the canonical chain now, with its confirmations, or
   * undefined. A receipt is fetched again once it has enough confirmations, so what is answered
   * is in the canonical chain at that moment.
   */
  async find(hashes: ReadonlyArray<{ hash: string; noop: boolean }>): Promise<Outcome | undefined> {
    const receipts = await Promise.all(hashes.map(({ hash }) => this.receipt(hash)));
    const index = receipts.findIndex((receipt) => receipt !== null);
    if (index < 0) return undefined;
    const head = await this.head();
    const receipt = receipts[index]!;
    return { receipt, noop: hashes[index]!.noop, confirmations: Math.max(0, head - Number(receipt.blockNumber) + 1) };
  }

  /**
   * Waits for the nonce of the transaction `first` to be mined with the required confirmations.
   * Replacements and no-ops the lifecycle monitor sends at that nonce are found through
   * `lookup`, asked once a second from `journalAfterMs` on; an error it reports (the trade
   * failed or expired meanwhile) is thrown.
   *
   * @param sent - what the node already answered with the send, when it mined it at once
   * @throws TradePendingError once `timeoutMs` passed with nothing confirmed
   */
  async wait(first: string, sent: RpcReceipt | null, lookup: NonceLookup): Promise<Outcome> {
    const { confirmations, timeoutMs, journalAfterMs } = this.#opts;
    if (sent !== null && confirmations <= 1) return { receipt: sent, noop: false, confirmations: 1 };
    const start = Date.now();
    let hashes: Array<{ hash: string; noop: boolean }> = [{ hash: first, noop: false }];
    let asked = 0;
    for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
      // A node that stops answering while we wait does not fail the trade: it was sent.
      const found = await this.find(hashes).catch(() => undefined);
      if (found !== undefined && found.confirmations >= confirmations) return found;
      const elapsed = Date.now() - start;
      if (elapsed >= journalAfterMs && elapsed - asked >= 1000) {
        asked = elapsed;
        const known = await lookup().catch(() => ({ broadcasts: undefined, error: undefined }));
        if (known.error !== undefined) throw known.error;
        if (known.broadcasts !== undefined && known.broadcasts.length > 0)
          hashes = known.broadcasts.map(({ hash, noop }) => ({ hash, noop }));
      }
      if (elapsed > timeoutMs) throw new TradePendingError(hashes.at(-1)!.hash);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
