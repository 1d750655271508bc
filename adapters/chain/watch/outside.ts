/**
 * Someone else used the key: every transaction mined from an exchange wallet is matched against
 * the journal's nonce slots, and one the service never signed is recorded at once (an error line,
 * the counter, a `wallet.outside_transaction` event, an audit record, and the wallet's pause under
 * OUTSIDE_TX_POLICY=pause: WatchJournal.recordOutsideTransaction, once across instances).
 *
 * Two ways to see them, whichever the block watcher's work leaves:
 * - while it reads every new block's receipts (trades in flight), each receipt from a wallet is
 *   one of the transactions it expects, or one the journal knows (unknownTransactions), or an
 *   outside one, read by its hash for its nonce and value: no call unless one is found;
 * - otherwise (idle, or blocks it skipped), the wallet's nonce, read with the watch's reading:
 *   each nonce used since the last one known must be a slot whose broadcast was mined; one that is
 *   not is looked for in the blocks since (eth_getBlockByNumber with transactions, the newest
 *   first, at most SCAN_BLOCKS), and recorded, with its hash when found.
 * Each wallet's next nonce as of a block is kept: the blocks whose receipts were all read move it
 * on by the wallet's transactions in them, so a nonce read is needed only after a block was missed.
 * The journal keeps it too (WatchedNonce, at most every SAVE_EVERY_MS and when the watch stops), so
 * that the first reading after a start explains the nonces the wallet used while no instance ran,
 * as any other reading does. Only before the first reading ever on a chain (the deploy's own
 * transactions, the funding) is what the wallet did not looked at.
 */
import type { JsonRpcApiProvider } from "ethers";

import {
  type NonceLedger,
  type NonceSlot,
  type OutsideTransaction,
  outsideTransactionEntry,
  type WatchData,
  type WatchJournal,
} from "../../../core/index.js";
import type { RpcReceipt } from "../blocks/index.js";
import type { OutsideTxPolicy, WatchLog, WatchObserver } from "./options.js";

/** How many blocks back a nonce used outside is looked for, from the latest. */
const SCAN_BLOCKS = 32;

/** How many blocks of each wallet's known nonce are kept, to go back to across a reorg. */
const HISTORY_BLOCKS = 64;

/**
 * How often, at most, a wallet's explained nonce is written to the journal while it moves. One
 * behind is safe: a start explains again, by the journal's slots, nonces already explained.
 */
const SAVE_EVERY_MS = 10_000;

export interface OutsideContext {
  provider: JsonRpcApiProvider;
  journal: WatchJournal & Pick<NonceLedger, "slot">;
  /** The chain's id: where the watch left a wallet is kept per chain. */
  chainId: number;
  /** Lower-case addresses. */
  wallets: readonly string[];
  policy: OutsideTxPolicy;
  log: WatchLog;
  observer?: WatchObserver | undefined;
  /** Whether the block watcher expects `hash`: one of this process's own, about to be or just broadcast. */
  expects(hash: string): boolean;
  /** The wallet's state, for the event's data. */
  walletState(wallet: string): WatchData;
  /** Told once a wallet was paused (the pauses are read again). */
  paused(): Promise<void>;
}

/** A transaction as eth_getTransactionByHash and eth_getBlockByNumber(…, true) give it (the fields used). */
interface RpcTransaction {
  hash: string;
  from: string;
  to: string | null;
  nonce: string;
  value: string;
  blockNumber: string | null;
}

export class OutsideDetector {
  readonly #c: OutsideContext;
  readonly #wallets: ReadonlySet<string>;
  /** Per wallet: its next nonce as of a block (every nonce below explained). */
  readonly #known = new Map<string, { nonce: number; block: number }>();
  /** The checks under way, one after the other. */
  #queue: Promise<void> = Promise.resolve();
  /** Per wallet: what was known as of each of the last HISTORY_BLOCKS blocks counted, oldest first. */
  readonly #history = new Map<string, Array<{ nonce: number; block: number }>>();
  /** Per wallet: the nonce last written to the journal, and when. */
  readonly #saved = new Map<string, { nonce: number; at: number }>();

  constructor(context: OutsideContext) {
    this.#c = context;
    this.#wallets = new Set(context.wallets);
  }

  /** Whether a nonce must be read: a wallet not known yet, or known as of a block before `head`. */
  needsNonces(head: number | undefined): boolean {
    return this.#c.wallets.some((wallet) => {
      const known = this.#known.get(wallet);
      return known === undefined || head === undefined || known.block < head;
    });
  }

  /** Settles once the checks asked for so far are done (tests). */
  idle(): Promise<void> {
    return this.#queue;
  }

  /** A block whose receipts were all read (the block watcher's look). */
  onBlock(block: { number: number }, receipts: readonly RpcReceipt[]): void {
    const fromWallets = new Map<string, string[]>();
    for (const receipt of receipts) {
      const from = receipt.from.toLowerCase();
      if (!this.#wallets.has(from)) continue;
      fromWallets.set(from, [...(fromWallets.get(from) ?? []), receipt.transactionHash.toLowerCase()]);
    }
    // The receipts no transaction of this process's, with each wallet's nonce as known before the block.
    const checks = [...fromWallets].flatMap(([wallet, hashes]) => {
      const strangers = hashes.filter((hash) => !this.#c.expects(hash));
      return strangers.length === 0 ? [] : [{ wallet, strangers, was: this.#known.get(wallet) }];
    });
    for (const wallet of this.#c.wallets) {
      // A block at a height already counted replaces what was read there (a reorg): what was
      // known as of the block below it stands, and the wallet's transactions in the blocks replaced
      // are counted again only as the new ones hold them.
      if ((this.#known.get(wallet)?.block ?? -1) >= block.number) this.#rewind(wallet, block.number - 1);
      const known = this.#known.get(wallet);
      // Only the block right after the one known: a skipped block leaves the nonce to be read.
      if (known !== undefined && known.block === block.number - 1)
        this.#set(wallet, { nonce: known.nonce + (fromWallets.get(wallet)?.length ?? 0), block: block.number });
    }
    for (const { wallet, strangers, was } of checks)
      this.#then(async () => {
        // A stranger not made out (a lagging node's null, a failed read): the wallet's nonce is
        // known again only as of the block before, so the next reading reads it and explains
        // every nonce since by the journal's slots.
        const madeOut = await this.#checkHashes(wallet, strangers, block.number).catch((error: unknown) => {
          this.#forget(wallet, was);
          throw error;
        });
        if (!madeOut) this.#forget(wallet, was);
      });
    for (const wallet of fromWallets.keys()) this.#then(() => this.#save(wallet, false));
  }

  /** Writes what is known of each wallet now, once the checks under way are done (the watch stops). */
  flush(): Promise<void> {
    for (const wallet of this.#c.wallets) this.#then(() => this.#save(wallet, true));
    return this.#queue;
  }

  /**
   * Writes `wallet`'s known nonce to the journal when it moved since the last write: at most every
   * SAVE_EVERY_MS, unless `now`. What it writes is explained: the checks queued before it are done.
   */
  async #save(wallet: string, now: boolean, back = false): Promise<void> {
    const known = this.#known.get(wallet);
    if (known === undefined) return;
    const saved = this.#saved.get(wallet);
    if (!back && saved !== undefined && saved.nonce === known.nonce) return;
    const at = Date.now();
    if (!now && !back && saved !== undefined && at - saved.at < SAVE_EVERY_MS) return;
    await this.#c.journal.saveWatchedNonce(wallet, { chainId: this.#c.chainId, ...known }, back);
    this.#saved.set(wallet, { nonce: known.nonce, at });
  }

  /** What is known of `wallet` now, kept in its history too. */
  #set(wallet: string, known: { nonce: number; block: number }): void {
    this.#known.set(wallet, known);
    const history = this.#history.get(wallet) ?? [];
    while (history.length > 0 && history.at(-1)!.block >= known.block) history.pop();
    history.push(known);
    if (history.length > HISTORY_BLOCKS) history.shift();
    this.#history.set(wallet, history);
  }

  /**
   * Takes what is known of `wallet` back to what it was as of block `block`; with nothing kept
   * that far back (a reorg deeper than the history), to unknown: the next reading explains the
   * nonces since by the journal's slots (#firstReading).
   */
  #rewind(wallet: string, block: number): void {
    const history = this.#history.get(wallet) ?? [];
    while (history.length > 0 && history.at(-1)!.block > block) history.pop();
    const kept = history.at(-1);
    if (kept === undefined) this.#known.delete(wallet);
    else this.#known.set(wallet, kept);
  }

  /** What is known of `wallet` set back to `was`, and its history with it. */
  #rewindTo(wallet: string, was: { nonce: number; block: number }): void {
    this.#rewind(wallet, was.block);
    this.#set(wallet, was);
  }

  /** Takes the wallet's known nonce back to `was` (what it was before a block), or to unknown before its first read. */
  #forget(wallet: string, was: { nonce: number; block: number } | undefined): void {
    const now = this.#known.get(wallet);
    if (was === undefined) {
      this.#known.delete(wallet);
      this.#history.delete(wallet);
    } else if (now === undefined || now.nonce >= was.nonce) this.#rewindTo(wallet, was);
  }

  /** The wallets' next nonces, read as of `block`. */
  onNonces(nonces: ReadonlyMap<string, number>, block: number): void {
    this.#then(async () => {
      for (const [wallet, nonce] of nonces) {
        const known = this.#known.get(wallet);
        if (known === undefined) {
          await this.#firstReading(wallet, nonce, block);
          continue;
        }
        if (nonce <= known.nonce) {
          // Nothing new.
          this.#set(wallet, { nonce: known.nonce, block: Math.max(block, known.block) });
          continue;
        }
        await this.#explain(wallet, known.nonce, nonce, known.block);
        this.#set(wallet, { nonce, block });
        await this.#save(wallet, false);
      }
    });
  }

  /**
   * This process's first reading of `wallet`: the nonces it used since the journal last knew it
   * (while no instance watched) are explained as any others; with nothing known on this chain,
   * what it did before is not looked at. A nonce below what the journal knew is a chain started
   * again under the same id: it is known from here, as a first reading.
   */
  async #firstReading(wallet: string, nonce: number, block: number): Promise<void> {
    const left = await this.#c.journal.watchedNonce(wallet, this.#c.chainId);
    if (left !== undefined && nonce > left.nonce) await this.#explain(wallet, left.nonce, nonce, left.block);
    const current = this.#known.get(wallet);
    // A block read meanwhile may have moved it on already.
    if (current === undefined || current.nonce < nonce) this.#set(wallet, { nonce, block });
    await this.#save(wallet, true, left !== undefined && nonce < left.nonce);
  }

  #then(work: () => Promise<void>): void {
    this.#queue = this.#queue.then(work).catch((error: unknown) => {
      this.#c.log.warn(
        { err: error },
        "wallet watch: could not match a wallet's transactions against the journal; trying again at the next reading",
      );
    });
  }

  /**
   * Receipts from `wallet` no transaction of this process's: those the journal does not know are
   * outside. Whether each was made out (known, or recorded): a node that answers null for a
   * receipt just read lags, and leaves the transaction to the nonce's look.
   */
  async #checkHashes(wallet: string, hashes: string[], block: number): Promise<boolean> {
    const unknown = await this.#c.journal.unknownTransactions(wallet, hashes);
    let madeOut = true;
    for (const hash of unknown) {
      const tx = (await this.#c.provider.send("eth_getTransactionByHash", [hash])) as RpcTransaction | null;
      if (tx !== null) await this.#record(outsideOf(wallet, tx, block), "block receipts");
      else madeOut = false;
    }
    return madeOut;
  }

  /** Nonces [from, to) of `wallet` were used since `since`: each must be a slot whose broadcast was mined. */
  async #explain(wallet: string, from: number, to: number, since: number): Promise<void> {
    const unexplained: Array<{ nonce: number; slot: NonceSlot | undefined }> = [];
    for (let nonce = from; nonce < to; nonce++) {
      const slot = await this.#c.journal.slot(wallet, nonce);
      const mined = slot?.mined?.hash.toLowerCase();
      if (mined !== undefined && slot!.broadcasts.some((b) => b.hash.toLowerCase() === mined)) continue;
      unexplained.push({ nonce, slot });
    }
    if (unexplained.length === 0) return;
    const found = await this.#scan(wallet, new Set(unexplained.map((u) => u.nonce)), since);
    for (const { nonce, slot } of unexplained) {
      const tx = found.get(nonce);
      const ours = tx !== undefined && slot?.broadcasts.some((b) => b.hash.toLowerCase() === tx.hash.toLowerCase());
      // Mined as the slot holds it (the monitor records it); or a slot whose transaction was not
      // found in the blocks looked at: the monitor's verdict (a lost slot) follows its own looks.
      if (ours || (tx === undefined && slot !== undefined)) continue;
      await this.#record(
        tx === undefined
          ? { wallet, nonce, hash: null, to: null, value: null, blockNumber: since + 1 }
          : outsideOf(wallet, tx, since + 1),
        "nonce",
      );
    }
  }

  /** The transactions of `wallet` at `nonces` in the blocks after `since`, newest first, at most SCAN_BLOCKS. */
  async #scan(wallet: string, nonces: Set<number>, since: number): Promise<Map<number, RpcTransaction>> {
    const found = new Map<number, RpcTransaction>();
    let tag: string = "latest";
    for (let scanned = 0; scanned < SCAN_BLOCKS && found.size < nonces.size; scanned++) {
      const block = (await this.#c.provider.send("eth_getBlockByNumber", [tag, true])) as {
        number: string;
        transactions: RpcTransaction[];
      } | null;
      if (block === null) break;
      for (const tx of block.transactions)
        if (tx.from.toLowerCase() === wallet && nonces.has(Number(tx.nonce))) found.set(Number(tx.nonce), tx);
      const number = Number(block.number);
      if (number <= since + 1 || number === 0) break;
      tag = `0x${(number - 1).toString(16)}`;
    }
    return found;
  }

  /** `seen`: how it was seen, in the log line (the receipts of a block read, or the wallet's nonce). */
  async #record(tx: OutsideTransaction, seen: "block receipts" | "nonce"): Promise<void> {
    const { journal, policy, log } = this.#c;
    const pause = policy === "pause";
    const value = tx.value === null ? null : tx.value.toString();
    const data: WatchData = {
      ...this.#c.walletState(tx.wallet),
      ...(pause ? { paused: true } : {}),
      policy,
      transaction: { hash: tx.hash, nonce: tx.nonce, to: tx.to, value, blockNumber: tx.blockNumber },
    };
    const event = { type: "wallet.outside_transaction" as const, subject: tx.wallet, data, at: new Date() };
    const first = await journal.recordOutsideTransaction(tx, event, outsideTransactionEntry(tx, pause), pause);
    const fields = {
      wallet: tx.wallet,
      hash: tx.hash,
      nonce: tx.nonce,
      to: tx.to,
      value,
      block: tx.blockNumber,
      policy,
      seen,
    };
    if (first) {
      log.error(
        fields,
        pause
          ? "outside transaction: a transaction this service never signed was mined from an exchange wallet; the wallet is paused until an admin resumes it"
          : "outside transaction: a transaction this service never signed was mined from an exchange wallet",
      );
      this.#c.observer?.outsideTransaction(tx.wallet);
    }
    if (pause) await this.#c.paused();
  }
}

/** An outside transaction as the node gave it. */
function outsideOf(wallet: string, tx: RpcTransaction, block: number): OutsideTransaction {
  return {
    wallet,
    nonce: Number(tx.nonce),
    hash: tx.hash.toLowerCase(),
    to: tx.to === null ? null : tx.to.toLowerCase(),
    value: BigInt(tx.value),
    blockNumber: tx.blockNumber === null ? block : Number(tx.blockNumber),
  };
}
