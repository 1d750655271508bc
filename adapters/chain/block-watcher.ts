/**
 * One look per block for every transaction the service waits for.
 *
 * The send queue tells the watcher of each transaction before it is broadcast (`expect`), and
 * whoever stops waiting for one tells it too (`release`): while any is expected, the watcher asks
 * for the head (eth_blockNumber) about once per block, and only when a new block is there fetches
 * its receipts, one eth_getBlockReceipts per new block, and keeps those of the expected
 * transactions. A node that does not offer eth_getBlockReceipts, a block it cannot serve yet,
 * or a jump of more than a few blocks (the watcher was idle, or the node was down) is read with
 * one batch of eth_getTransactionReceipt for the transactions still missing instead. Nothing
 * expected, nothing asked.
 *
 * When to ask: never twice within the interval (MONITOR_INTERVAL_MS), and otherwise when the
 * next block is due, by the block time seen so far (the median of the last few gaps between new
 * heads; the interval while unknown), half an interval early so that blocks are not seen later and later.
 *
 * Waiters (receipts.ts) ask `next`: it answers after the next new block, with the receipts of
 * their transactions found so far. A receipt is answered only from the latest look, the block it
 * is in read while it was the node's canonical one; one kept from an older look is fetched again
 * first (its block may have left the chain since).
 */
import { toQuantity, type JsonRpcApiProvider } from "ethers";

import type { RpcReceipt } from "./web3-receipt.js";

export interface BlockWatcherOptions {
  provider: JsonRpcApiProvider;
  /** The least time between two asks for the head, in ms, and the block time until one is seen. Default 1000. */
  intervalMs?: number;
  /** How long an expected transaction nobody waits for is kept, in ms. Default 10 minutes. */
  keepMs?: number;
}

/** What a waiter learns at a look: the head's number, and the receipts of its transactions found so far. */
export interface Look {
  head: number;
  receipts: Map<string, RpcReceipt>;
}

interface Expected {
  /** Its receipt, and the look (head number) it was read at. */
  found?: { receipt: RpcReceipt; at: number } | undefined;
  until: number;
  /** Its last lookup failed: it is asked for by transaction at the next look (a block read meanwhile may hold it). */
  recheck?: boolean;
}

/** Blocks read one by one after a look; a longer jump is read by transaction instead. */
const MAX_BLOCKS_PER_LOOK = 4;
/** Gaps between new heads the block time is estimated from. */
const BLOCK_TIME_SAMPLES = 8;
/** The longest wait between two asks while something is expected, in ms (whatever the estimate says). */
const MAX_DELAY_MS = 30_000;
/** A node found without eth_getBlockReceipts is asked again after this many blocks… */
const REPROBE_BLOCKS = 100;
/** …or this long (a failover may have put another node behind the endpoint), in ms. */
const REPROBE_MS = 600_000;

export class BlockWatcher {
  readonly #provider: JsonRpcApiProvider;
  readonly #intervalMs: number;
  readonly #keepMs: number;
  /** Expected transactions by lower-case hash. */
  readonly #expected = new Map<string, Expected>();
  /** Waiters for the next look. */
  #waiters: Array<() => void> = [];
  /** The head's number at the latest look; -1 before the first. */
  #head = -1;
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
  /** Whether the node answers eth_getBlockReceipts; unknown until it is asked. */
  #blockReceipts: boolean | undefined;
  /** When it was found not to (head, ms): asked again after REPROBE_BLOCKS or REPROBE_MS. */
  #unsupportedAt = { head: 0, at: 0 };

  constructor(options: BlockWatcherOptions) {
    this.#provider = options.provider;
    this.#intervalMs = options.intervalMs ?? 1_000;
    this.#keepMs = options.keepMs ?? 600_000;
  }

  /** A transaction about to be broadcast: every block from now on is read for it. */
  expect(hash: string): void {
    const key = hash.toLowerCase();
    const entry = this.#expected.get(key);
    if (entry === undefined) this.#expected.set(key, { until: Date.now() + this.#keepMs });
    else entry.until = Date.now() + this.#keepMs;
    this.#wake();
  }

  /** Nobody waits for these any more: once nothing is expected, the watcher stops asking. */
  release(hashes: readonly string[]): void {
    for (const hash of hashes) this.#expected.delete(hash.toLowerCase());
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
      this.#head > seen && hashes.some((hash) => this.#expected.get(hash.toLowerCase())?.found?.at === this.#head);
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
    // not from one a look made while the stale ones below were fetched again.
    const head = this.#head;
    const receipts = new Map<string, RpcReceipt>();
    const stale: Array<{ hash: string; was: Expected["found"] }> = [];
    for (const hash of hashes) {
      const found = this.#expected.get(hash.toLowerCase())?.found;
      if (found === undefined) continue;
      if (found.at === head) receipts.set(hash, found.receipt);
      else stale.push({ hash, was: found });
    }
    // Kept from an older look: its block may have left the chain since; asked again. Fetched after
    // `head` was seen, so it is in the canonical chain of a head at least that high.
    if (stale.length > 0) {
      const { found: fresh, failed } = await this.#byTransaction(stale.map(({ hash }) => hash));
      for (const { hash, was } of stale) {
        const key = hash.toLowerCase();
        if (failed.has(key)) continue; // not answered: kept as it was (not reported), asked again next time
        const receipt = fresh.get(key);
        const entry = this.#expected.get(key);
        // Unless a look changed it meanwhile.
        if (entry !== undefined && entry.found === was)
          entry.found = receipt === undefined ? undefined : { receipt, at: head };
        if (receipt !== undefined) receipts.set(hash, receipt);
      }
    }
    return { head, receipts };
  }

  /** Stops looking (waiters are answered with what is known). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#expected.clear();
    for (const done of this.#waiters.splice(0)) done();
  }

  /** The block time seen lately, in ms (the interval while unknown). */
  blockTimeMs(): number {
    if (this.#gaps.length === 0) return this.#intervalMs;
    const sorted = [...this.#gaps].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)]!;
  }

  #wake(): void {
    if (this.#timer === undefined && !this.#looking)
      this.#schedule(Math.max(0, this.#lastLookAt + this.#intervalMs - Date.now()));
  }

  #schedule(delay: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#look();
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

  /** One look: the head, and the receipts of the new blocks when there are any. */
  async #look(): Promise<void> {
    this.#looking = true;
    try {
      const now = Date.now();
      this.#lastLookAt = now;
      for (const [hash, entry] of this.#expected) if (entry.until < now) this.#expected.delete(hash);
      if (this.#expected.size === 0 && this.#waiters.length === 0) return;
      const head = Number(await this.#provider.send("eth_blockNumber", []));
      if (head <= this.#head) return; // not yet: asked again at the next due time
      const seenAt = Date.now();
      const missing = [...this.#expected].filter(([, entry]) => entry.found === undefined).map(([hash]) => hash);
      if (missing.length > 0) {
        const { found, failed } = await this.#receipts(head, missing);
        for (const hash of missing) {
          const entry = this.#expected.get(hash);
          if (entry === undefined) continue;
          entry.recheck = failed.has(hash);
          const receipt = found.get(hash);
          if (receipt !== undefined) entry.found = { receipt, at: head };
        }
      }
      if (this.#sampleFrom !== undefined && this.#head >= 0) {
        this.#gaps.push((seenAt - this.#sampleFrom.at) / (head - this.#sampleFrom.head));
        if (this.#gaps.length > BLOCK_TIME_SAMPLES) this.#gaps.shift();
      }
      this.#sampleFrom = { head, at: seenAt };
      this.#head = head;
      this.#headSeenAt = seenAt;
      for (const done of this.#waiters.splice(0)) done();
    } catch {
      // The node did not answer: the next look tries again; waiters keep waiting (up to their limit).
    } finally {
      this.#looking = false;
      if (this.#expected.size > 0 || this.#waiters.length > 0) this.#schedule(Math.max(0, this.#nextDelay()));
      else this.#sampleFrom = undefined; // idle: the next gap measured would span the idle spell
    }
  }

  /** Whether to read the new blocks with eth_getBlockReceipts (a node found without it is asked again now and then). */
  #blockReceiptsUsable(head: number): boolean {
    if (this.#blockReceipts !== false) return true;
    if (head - this.#unsupportedAt.head < REPROBE_BLOCKS && Date.now() - this.#unsupportedAt.at < REPROBE_MS)
      return false;
    this.#blockReceipts = undefined;
    return true;
  }

  /**
   * The receipts of `missing` (lower-case hashes) in the blocks after the last look up to `head`,
   * and the hashes nothing could be said about (their lookup failed).
   */
  async #receipts(
    head: number,
    missing: readonly string[],
  ): Promise<{ found: Map<string, RpcReceipt>; failed: Set<string> }> {
    const from = this.#head + 1;
    if (this.#head < 0 || head - from + 1 > MAX_BLOCKS_PER_LOOK || !this.#blockReceiptsUsable(head))
      return this.#byTransaction(missing);
    const blocks = Array.from({ length: head - from + 1 }, (_, i) => from + i);
    let answers: Array<RpcReceipt[] | null>;
    try {
      answers = await Promise.all(
        blocks.map(
          (number) => this.#provider.send("eth_getBlockReceipts", [toQuantity(number)]) as Promise<RpcReceipt[] | null>,
        ),
      );
      this.#blockReceipts = true;
    } catch (error) {
      if (isUnsupported(error)) {
        this.#blockReceipts = false;
        this.#unsupportedAt = { head, at: Date.now() };
      }
      // Unsupported, or a block the node cannot serve yet ("header not found" from a lagging
      // node behind a balancer): read by transaction this time, which covers every block.
      return this.#byTransaction(missing);
    }
    // A block the node cannot serve yet: read by transaction.
    if (answers.some((receipts) => !Array.isArray(receipts))) return this.#byTransaction(missing);
    const wanted = new Set(missing);
    const found = new Map<string, RpcReceipt>();
    for (const receipts of answers as RpcReceipt[][]) {
      for (const receipt of receipts) {
        const hash = receipt.transactionHash.toLowerCase();
        if (wanted.has(hash)) found.set(hash, receipt);
      }
    }
    // Those whose lookup failed at an earlier look may be in a block read then: asked for by transaction.
    const again = missing.filter((hash) => !found.has(hash) && this.#expected.get(hash)?.recheck === true);
    if (again.length === 0) return { found, failed: new Set() };
    const byTransaction = await this.#byTransaction(again);
    for (const [hash, receipt] of byTransaction.found) found.set(hash, receipt);
    return { found, failed: byTransaction.failed };
  }

  /**
   * One batch of eth_getTransactionReceipt (the provider batches concurrent calls). One that
   * fails (a 429 for one element of the batch, "transaction indexing is in progress") fails
   * that hash alone.
   */
  async #byTransaction(hashes: readonly string[]): Promise<{ found: Map<string, RpcReceipt>; failed: Set<string> }> {
    const answers = await Promise.allSettled(
      hashes.map((hash) => this.#provider.send("eth_getTransactionReceipt", [hash]) as Promise<RpcReceipt | null>),
    );
    const found = new Map<string, RpcReceipt>();
    const failed = new Set<string>();
    answers.forEach((answer, i) => {
      const hash = hashes[i]!.toLowerCase();
      if (answer.status === "rejected") failed.add(hash);
      else if (answer.value !== null) found.set(hash, answer.value);
    });
    return { found, failed };
  }
}

/**
 * The node does not offer the method: JSON-RPC -32601, or a message saying the method is not
 * there or not allowed. A block it cannot serve ("header not found", "block not found") is not that.
 */
export function isUnsupported(error: unknown): boolean {
  const texts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 4; depth += 1) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (code === -32601) return true;
    if (typeof message === "string") texts.push(message);
    current = (current as { error?: unknown }).error ?? (current as { info?: { error?: unknown } }).info?.error;
  }
  const text = texts.join(" | ");
  if (/-32601/.test(text)) return true;
  if (/(header|block|receipts?) (not found|not available|unavailable)|unknown block/i.test(text)) return false;
  return /method not found|not supported|unsupported|not allowed|not whitelisted|does not exist|is not available|not available on/i.test(
    text,
  );
}
