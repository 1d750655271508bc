/**
 * Waiting for a transaction the service sent: whichever of its nonce's broadcasts gets mined
 * (the first, a re-priced replacement, or a no-op), with the confirmations the service
 * requires, from the canonical chain.
 */
import type { JsonRpcApiProvider } from "ethers";

import { TradePendingError } from "../../../core/index.js";
import type { BlockWatcher } from "./block-watcher.js";
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
  /**
   * The look per block shared by every waiter (block-watcher.ts); unset: each waiter polls its
   * own receipts (tests that drive a bare provider).
   */
  watcher?: BlockWatcher;
}

/** How often a waiter on the watcher also asks for its own receipts, in case a look missed them, in ms. */
const RECHECK_MS = 15_000;

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

  /**
   * The head block's number, to count `anchor`'s confirmations (or how deep it is): the watcher's
   * when it read it within its interval and vouches for `anchor` (read by it, every head since
   * linked to it: the head is on `anchor`'s chain, and at most that old, so it counts short, never
   * long); else the node's, as the receipt's own endpoint answers it. A head pushed or polled from
   * another node (a fork, a lagging endpoint) is never set against a receipt it does not vouch for.
   */
  async head(anchor?: { number: number; hash: string }): Promise<number> {
    const { watcher, provider } = this.#opts;
    const vouched = anchor !== undefined && watcher?.canonical(anchor.number, anchor.hash) === true;
    return (vouched ? watcher.recentHead() : undefined) ?? Number(await provider.send("eth_blockNumber", []));
  }

  /**
   * True when the watcher read the block `hash` at `number` and finds it in the canonical chain as
   * of its latest look (block-watcher.ts `canonical`); undefined when it cannot tell (ask the node).
   */
  canonical(number: number, hash: string): true | undefined {
    return this.#opts.watcher?.canonical(number, hash);
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
    const receipt = receipts[index]!;
    const head = await this.head({ number: Number(receipt.blockNumber), hash: receipt.blockHash });
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
    const { confirmations, watcher } = this.#opts;
    if (sent !== null && confirmations <= 1) {
      // Answered with the send: nothing to wait for (the send queue had it expected).
      watcher?.release([first]);
      return { receipt: sent, noop: false, confirmations: 1 };
    }
    if (watcher !== undefined) return this.#watch(watcher, first, lookup);
    return this.#poll(first, lookup);
  }

  /**
   * wait() on the watcher's looks: no call of its own while its transaction is found in the
   * blocks the watcher reads. A hash learnt from the journal (a replacement another instance
   * sent, maybe mined already) is asked for once; and every RECHECK_MS without a receipt, all
   * of them are, in one batch, in case a look missed one.
   */
  async #watch(watcher: BlockWatcher, first: string, lookup: NonceLookup): Promise<Outcome> {
    const { confirmations, timeoutMs, journalAfterMs } = this.#opts;
    const start = Date.now();
    let hashes: Array<{ hash: string; noop: boolean }> = [{ hash: first, noop: false }];
    let asked = 0;
    let checked = 0;
    let ask = false;
    let seen = -1;
    /** Every hash this waiter had the watcher expect, released when it is done. */
    const expected = new Set<string>([first]);
    try {
      for (;;) {
        const elapsed = Date.now() - start;
        let found: Outcome | undefined;
        if (ask || elapsed - checked >= RECHECK_MS) {
          ask = false;
          checked = elapsed;
          found = await this.find(hashes).catch(() => undefined);
        } else {
          for (const { hash } of hashes) expected.add(hash);
          const look = await watcher.next(
            hashes.map(({ hash }) => hash),
            Math.min(timeoutMs - elapsed + 1, RECHECK_MS),
            seen,
          );
          seen = look.head;
          const index = hashes.findIndex(({ hash }) => look.receipts.has(hash));
          if (index >= 0) {
            const receipt = look.receipts.get(hashes[index]!.hash)!;
            found = {
              receipt,
              noop: hashes[index]!.noop,
              confirmations: Math.max(0, look.head - Number(receipt.blockNumber) + 1),
            };
          }
        }
        if (found !== undefined && found.confirmations >= confirmations) return found;
        const now = Date.now() - start;
        if (now >= journalAfterMs && now - asked >= 1000) {
          asked = now;
          const known = await lookup().catch(() => ({ broadcasts: undefined, error: undefined }));
          if (known.error !== undefined) throw known.error;
          if (known.broadcasts !== undefined && known.broadcasts.length > 0) {
            const before = new Set(hashes.map(({ hash }) => hash.toLowerCase()));
            hashes = known.broadcasts.map(({ hash, noop }) => ({ hash, noop }));
            // A broadcast this waiter did not know of may be mined already, in a block read before.
            ask = hashes.some(({ hash }) => !before.has(hash.toLowerCase()));
          }
        }
        if (now > timeoutMs) {
          // A last look of its own: one mined just before the deadline may be in a block the
          // watcher has not read yet (it asks once per block, at most once per interval).
          const last = await this.find(hashes).catch(() => undefined);
          if (last !== undefined && last.confirmations >= confirmations) return last;
          throw new TradePendingError(hashes.at(-1)!.hash);
        }
      }
    } finally {
      watcher.release([...expected]);
    }
  }

  async #poll(first: string, lookup: NonceLookup): Promise<Outcome> {
    const { confirmations, timeoutMs, journalAfterMs } = this.#opts;
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
