/**
 * One look per block for every transaction the service waits for.
 *
 * The send queue tells the watcher of each transaction before it is broadcast (`expect`), and
 * whoever stops waiting for one tells it too (`release`): while any is expected, the watcher asks
 * for the head block (eth_getBlockByNumber "latest": its number, hash and parent's hash) about
 * once per block, and only when a new block is there fetches its receipts, one
 * eth_getBlockReceipts per new block, asked by the block's HASH (the head's, and its parent's
 * for a look that finds two new blocks), and keeps those of the expected transactions. A node
 * that does not offer eth_getBlockReceipts, a block it cannot serve yet (or answers with receipts
 * of another block), or a jump of more than two blocks (the watcher was idle, or the node was
 * down: the hashes below the head's parent are not known) is read with one batch of
 * eth_getTransactionReceipt for the transactions still missing instead. Nothing expected,
 * nothing asked.
 *
 * Reorgs: the hashes of the blocks read are kept by number (a ring of the last RING_BLOCKS). A
 * head at the number already read with another hash, a lower head with another hash than the
 * one read at its number, or a new head whose parent is not the block read at its number, means
 * those blocks were replaced: they are read again (by hash: the head and its parent), and a
 * receipt found in a replaced block is dropped (its transaction is looked for again). When the
 * parent was replaced too, blocks below it may have been: the missing transactions are then also
 * asked for by transaction. A lower head whose hash is the one read (a lagging node behind a
 * balancer) is no news.
 *
 * When to ask: never twice within the interval (MONITOR_INTERVAL_MS), and otherwise when the
 * next block is due, by the block time seen so far (the median of the last few gaps between new
 * heads; the interval while unknown), half an interval early so that blocks are not seen later and later.
 *
 * Pushed heads (`heads`: eth_subscribe newHeads over a WebSocket, head-subscription.ts): while
 * subscribed, each header pushed is the head of the next look, instead of one asked for: the same
 * look (ring, replaced blocks, receipts by hash, waiters, `lastHead`), still never twice within
 * the interval (a header pushed sooner waits for it, and the latest one then is looked at). A
 * look with a pushed head asks for nothing unless a transaction is missing, so headers pushed
 * while nothing is expected are looked at too: the head, the ring and `lastHead` stay current at
 * no cost. While subscribed, the head is asked for only when no header came for `safetyPollMs` (a
 * node that stopped pushing); one that finds a block the subscription did not push puts the
 * watcher back on polling at block time until a pushed header catches up. While the subscription
 * is down (not yet made, connection lost), the watcher polls as above.
 *
 * Waiters (receipts.ts) ask `next`: it answers after the next new block, with the receipts of
 * their transactions found so far. A receipt is answered only from the latest look, read from the
 * head or one of its ancestors; one kept from an older look is fetched again first (its block may
 * have left the chain since), and not answered if its block is not the one read at its number
 * (watched.ts).
 */
import type { JsonRpcApiProvider } from "ethers";

import type { HeadBlock, PushedHead, PushedHeads } from "../rpc/index.js";
import { answerAt, type Expected } from "./watched.js";
import type { BlockTimes } from "./block-times.js";
import type { HeadSource } from "./fees.js";
import { ReceiptReader } from "./receipt-reader.js";
import { forgetReplaced } from "./reorg.js";
import type { BlockWatcherOptions, Look } from "./watcher-options.js";

export { headsOf, type BlockWatcherOptions, type Look } from "./watcher-options.js";

/** The head block as eth_getBlockByNumber("latest", false) gives it (the fields used). */
interface RpcBlock extends HeadBlock {
  parentHash: string;
}

/** Hashes of the blocks read kept, by number (to tell a replaced block). */
const RING_BLOCKS = 64;
/** Gaps between new heads the block time is estimated from. */
const BLOCK_TIME_SAMPLES = 8;
/** The longest wait between two asks while something is expected, in ms (whatever the estimate says); while subscribed, the wait for a pushed header before the head is asked for. */
const MAX_DELAY_MS = 30_000;

export class BlockWatcher implements HeadSource {
  readonly #provider: JsonRpcApiProvider;
  readonly #intervalMs: number;
  readonly #keepMs: number;
  /** Expected transactions by lower-case hash. */
  readonly #expected = new Map<string, Expected>();
  /** Waiters for the next look. */
  #waiters: Array<() => void> = [];
  /** The head's number at the latest look; -1 before the first. */
  #head = -1;
  /** Looks that read blocks so far: the latest one's number (a receipt is answered only from it). */
  #looks = 0;
  /** The hashes (lower case) of the blocks read, and of the head's parent, by number; the chain as last seen. */
  readonly #ring = new Map<number, string>();
  /** The latest head block read, and when (ms): the fee oracle's head while it is young (fees.ts). */
  #lastHead: { block: HeadBlock; at: number } | undefined;
  /**
   * The lowest number from which the ring's hashes up to the head are one chain as of the
   * latest look: each head's parent hash matched the hash read at the number below. A head whose
   * parent was not read (a jump, the first look, a reorg) starts it again at that parent.
   */
  #linkedFrom = Number.POSITIVE_INFINITY;
  /** When the current head was first seen (ms). */
  #headSeenAt = 0;
  /** When the head was last asked for (ms). */
  #lastLookAt = Number.NEGATIVE_INFINITY;
  /** The last new head seen while the watcher kept looking (gaps are not measured across idle spells). */
  #sampleFrom: { head: number; at: number } | undefined;
  /** Recent gaps between new heads, per block, in ms. */
  readonly #gaps: number[] = [];
  #timer: NodeJS.Timeout | undefined;
  #looking = false;
  readonly #heads: PushedHeads | undefined;
  /** How to stop hearing pushed heads; undefined while not listening. */
  #stopHearing: (() => void) | undefined;
  /** The latest header pushed and not looked at yet. */
  #pushed: PushedHead | undefined;
  /** The number of the last header pushed; -1 before one. */
  #pushedHead = -1;
  /**
   * A poll while subscribed found a head above the last one pushed: the node keeps the connection
   * but stopped pushing (or pushes late). Heads are polled at block time again until a pushed
   * header catches up.
   */
  #pushesBehind = false;
  /** When the subscription was last seen to start (ms): one that pushed nothing for `safetyPollMs` since is behind too. */
  #subscribedAt = 0;
  readonly #safetyPollMs: number;
  /** Reads the receipts of the blocks a look finds new (receipt-reader.ts). */
  readonly #reader: ReceiptReader;
  readonly #times: BlockTimes | undefined;

  constructor(options: BlockWatcherOptions) {
    this.#provider = options.provider;
    this.#times = options.times;
    this.#intervalMs = options.intervalMs ?? 1_000;
    this.#keepMs = options.keepMs ?? 600_000;
    this.#safetyPollMs = options.safetyPollMs ?? MAX_DELAY_MS;
    this.#heads = options.heads;
    this.#reader = new ReceiptReader({
      provider: options.provider,
      ring: this.#ring,
      recheck: (hash) => this.#expected.get(hash)?.recheck === true,
      onBlock: options.onBlock,
    });
    this.#listen();
  }

  /** A transaction about to be broadcast: every block from now on is read for it. */
  expect(hash: string): void {
    const key = hash.toLowerCase();
    const entry = this.#expected.get(key);
    if (entry === undefined) this.#expected.set(key, { until: Date.now() + this.#keepMs });
    else entry.until = Date.now() + this.#keepMs;
    this.#listen();
    this.#wake();
  }

  /** Nobody waits for these any more: once nothing is expected, the watcher stops asking. */
  release(hashes: readonly string[]): void {
    for (const hash of hashes) this.#expected.delete(hash.toLowerCase());
  }

  /** Whether `hash` is expected now: one the send queue is about to broadcast, or has. */
  expects(hash: string): boolean {
    return this.#expected.has(hash.toLowerCase());
  }

  /** Transactions expected now (for tests and metrics). */
  get expected(): number {
    return this.#expected.size;
  }

  /**
   * The receipts of `hashes` (each expected from now on, if it was not), answered after the next
   * new block, or at once when one of them was found at the latest look; at the latest after
   * `maxWaitMs`. `seen`: the head of the caller's previous look (it is told of a receipt at once
   * only once per look).
   */
  async next(hashes: readonly string[], maxWaitMs: number, seen = -1): Promise<Look> {
    for (const hash of hashes) this.expect(hash);
    const ready =
      this.#head > seen && hashes.some((hash) => this.#expected.get(hash.toLowerCase())?.found?.at === this.#looks);
    if (!ready) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        // Given up on: no longer a waiter (it would keep the watcher looking).
        const timer = setTimeout(
          () => {
            const at = this.#waiters.indexOf(done);
            if (at >= 0) this.#waiters.splice(at, 1);
            resolve();
          },
          Math.max(0, maxWaitMs),
        );
        this.#waiters.push(done);
      });
    }
    // The look this answer is about: a receipt read at it counts its confirmations from this head,
    // not from one a look made while the stale ones were fetched again (watched.ts).
    const [head, look] = [this.#head, this.#looks];
    const receipts = await answerAt(hashes, look, this.#expected, this.#reader);
    return { head, receipts };
  }

  /** Stops looking (waiters are answered with what is known) and listening to pushed heads (until the next `expect`). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#expected.clear();
    this.#stopHearing?.();
    this.#stopHearing = undefined;
    this.#pushed = undefined;
    for (const done of this.#waiters.splice(0)) done();
  }

  /** The head's number when a look read it within the last interval (then no call is needed for it). */
  recentHead(): number | undefined {
    const read = this.#lastHead;
    return read !== undefined && Date.now() - read.at <= this.#intervalMs ? Number(read.block.number) : undefined;
  }

  /** The latest head block read, and when (ms). */
  lastHead(): { block: HeadBlock; at: number } | undefined {
    return this.#lastHead;
  }

  /**
   * Whether the block `hash` at `number` is in the canonical chain as of a look made within the
   * last block time (plus an interval): true only when the watcher read that very block, and every
   * head since was linked to it by parent hash. Undefined (unknown: ask the node) otherwise, and
   * while the watcher is idle (nothing expected, no head read lately).
   */
  canonical(number: number, hash: string): true | undefined {
    const read = this.#lastHead;
    if (read === undefined || Date.now() - read.at > this.blockTimeMs() + this.#intervalMs) return undefined;
    if (number < this.#linkedFrom || number > this.#head) return undefined;
    return this.#ring.get(number) === hash.toLowerCase() ? true : undefined;
  }

  /** The block time seen lately, in ms (the interval while unknown). */
  blockTimeMs(): number {
    if (this.#gaps.length === 0) return this.#intervalMs;
    const sorted = [...this.#gaps].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)]!;
  }

  /** Whether pushed heads stand for the head poll now. */
  get #subscribed(): boolean {
    return this.#stopHearing !== undefined && this.#heads?.subscribed === true && !this.#pushesBehind;
  }

  #listen(): void {
    if (this.#heads === undefined || this.#stopHearing !== undefined) return;
    this.#subscribedAt = Date.now();
    this.#stopHearing = this.#heads.onHead(
      (head) => this.#push(head),
      (subscribed) => {
        this.#pushesBehind = false;
        this.#pushedHead = -1;
        this.#subscribedAt = Date.now();
        // Lost: polled from the next due time (the safety poll set while subscribed is far off).
        if (!subscribed && !this.#looking && (this.#expected.size > 0 || this.#waiters.length > 0))
          this.#schedule(Math.max(0, this.#nextDelay()));
      },
    );
  }

  /** A header pushed: looked at once the interval since the last look is over (the latest one by then). */
  #push(head: PushedHead): void {
    this.#pushed = head;
    this.#pushedHead = Number(head.number);
    if (this.#pushedHead >= this.#head) this.#pushesBehind = false;
    if (!this.#looking) this.#schedule(Math.max(0, this.#lastLookAt + this.#intervalMs - Date.now()));
  }

  #wake(): void {
    if (this.#timer !== undefined || this.#looking) return;
    // Subscribed: the next header pushed looks; a poll only if none comes.
    if (this.#subscribed && this.#pushed === undefined) this.#schedule(this.#safetyPollMs);
    else this.#schedule(Math.max(0, this.#lastLookAt + this.#intervalMs - Date.now()));
  }

  #schedule(delay: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const pushed = this.#pushed;
      this.#pushed = undefined;
      void this.#look(pushed);
    }, delay);
    this.#timer.unref();
  }

  /**
   * When to look next, in ms from now: when the next block is due (half an interval early),
   * never within the interval of this look, never later than MAX_DELAY_MS.
   */
  #nextDelay(): number {
    const due = this.#headSeenAt + this.blockTimeMs() - this.#intervalMs / 2 - Date.now();
    const earliest = this.#lastLookAt + this.#intervalMs - Date.now();
    return Math.max(earliest, Math.min(due, MAX_DELAY_MS));
  }

  /**
   * One look: the head (`pushed`, else asked for), and the receipts of the new (or replaced)
   * blocks when there are any. A pushed head is looked at even when nothing is expected: it
   * costs no call then.
   */
  async #look(pushed?: PushedHead): Promise<void> {
    this.#looking = true;
    try {
      const now = Date.now();
      this.#lastLookAt = now;
      for (const [hash, entry] of this.#expected) if (entry.until < now) this.#expected.delete(hash);
      if (pushed === undefined && this.#expected.size === 0 && this.#waiters.length === 0) return;
      const latest =
        pushed ?? ((await this.#provider.send("eth_getBlockByNumber", ["latest", false])) as RpcBlock | null);
      if (latest === null || typeof latest !== "object") return; // asked again at the next due time
      const head = Number(latest.number);
      // A poll while subscribed that finds a block the subscription did not push: it is behind.
      if (
        pushed === undefined &&
        this.#heads?.subscribed === true &&
        head > this.#pushedHead &&
        (this.#pushedHead >= 0 || Date.now() - this.#subscribedAt >= this.#safetyPollMs)
      )
        this.#pushesBehind = true;
      // The latest block as of now (a lagging node's lower head is not).
      if (head >= this.#head) this.#lastHead = { block: latest, at: Date.now() };
      this.#times?.record(head, Number(latest.timestamp));
      const [hash, parentHash] = [latest.hash.toLowerCase(), latest.parentHash.toLowerCase()];
      const known = this.#ring.get(head);
      // Not yet, or a lagging node's older head on the same chain: asked again at the next due time.
      if (head <= this.#head && (known === undefined || known === hash)) return;
      const parent = this.#ring.get(head - 1);
      /** The lowest number whose block read was replaced; undefined: none. */
      let replaced: number | undefined;
      if (head <= this.#head) replaced = parent === undefined || parent === parentHash ? head : head - 1;
      else if (parent !== undefined && parent !== parentHash) replaced = head - 1;
      /** Blocks below the head's parent may have been replaced too (the reorg's depth is not known). */
      const deep = replaced !== undefined && (parent === undefined || parent !== parentHash);
      if (replaced !== undefined) forgetReplaced(this.#ring, this.#expected.values(), replaced, deep);
      // Linked on from below only when the head's parent is the block read at its number.
      if (parent !== parentHash) this.#linkedFrom = head - 1;
      this.#ring.set(head - 1, parentHash);
      this.#ring.set(head, hash);
      for (const number of this.#ring.keys())
        if (number < head - RING_BLOCKS || number > head) this.#ring.delete(number);
      this.#linkedFrom = Math.max(this.#linkedFrom, head - RING_BLOCKS);
      const seenAt = Date.now();
      const missing = [...this.#expected].filter(([, entry]) => entry.found === undefined).map(([key]) => key);
      const look = this.#looks + 1;
      if (missing.length > 0) {
        const from = replaced ?? this.#head + 1;
        const { found, failed } = await this.#reader.receipts(
          from,
          { head, hash, parentHash },
          missing,
          deep,
          this.#head,
        );
        for (const key of missing) {
          const entry = this.#expected.get(key);
          if (entry === undefined) continue;
          entry.recheck = failed.has(key);
          const receipt = found.get(key);
          if (receipt !== undefined && entry.found === undefined) entry.found = { receipt, at: look };
        }
      }
      if (this.#sampleFrom !== undefined && this.#head >= 0 && head > this.#sampleFrom.head) {
        this.#gaps.push((seenAt - this.#sampleFrom.at) / (head - this.#sampleFrom.head));
        if (this.#gaps.length > BLOCK_TIME_SAMPLES) this.#gaps.shift();
      }
      if (this.#sampleFrom === undefined || head > this.#sampleFrom.head) this.#sampleFrom = { head, at: seenAt };
      if (head > this.#head) this.#headSeenAt = seenAt;
      this.#head = head;
      this.#looks = look;
      for (const done of this.#waiters.splice(0)) done();
    } catch {
      // The node did not answer: the next look tries again; waiters keep waiting (up to their limit).
    } finally {
      this.#looking = false;
      const busy = this.#expected.size > 0 || this.#waiters.length > 0;
      if (this.#pushed !== undefined) this.#schedule(Math.max(0, this.#lastLookAt + this.#intervalMs - Date.now()));
      else if (busy && this.#subscribed) this.#schedule(this.#safetyPollMs);
      else if (busy) this.#schedule(Math.max(0, this.#nextDelay()));
      if (!busy) this.#sampleFrom = undefined; // idle: the next gap measured would span the idle spell
    }
  }
}
