/**
 * How a look of the block watcher (block-watcher.ts) reads the receipts of its new blocks: one
 * eth_getBlockReceipts per new block, asked by the block's hash; else (a node that does not offer
 * it, a block it cannot serve yet, receipts of another block, a jump of more than two blocks) one
 * batch of eth_getTransactionReceipt for the transactions still missing. A receipt from another
 * block than the one the watcher read at its number is not taken.
 */
import type { JsonRpcApiProvider } from "ethers";

import type { RpcReceipt } from "./web3-receipt.js";

/**
 * Blocks read one by one at a look: the head and its parent, the two whose hashes the head poll
 * gives; a longer jump is read by transaction instead.
 */
const MAX_BLOCKS_PER_LOOK = 2;
/** A node found without eth_getBlockReceipts is asked again after this many blocks… */
const REPROBE_BLOCKS = 100;
/** …or this long (a failover may have put another node behind the endpoint), in ms. */
const REPROBE_MS = 600_000;

export interface ReceiptReaderOptions {
  provider: JsonRpcApiProvider;
  /** The watcher's hashes (lower case) of the blocks read, by number: the same map, which the reader prunes of a stale hash. */
  ring: Map<number, string>;
  /** Whether the lookup of `hash` (lower case) failed at an earlier look. */
  recheck: (hash: string) => boolean;
  /** Told of every block whose receipts were all read (eth_getBlockReceipts), with them: the wallet watch's. */
  onBlock?: ((block: { number: number; hash: string }, receipts: readonly RpcReceipt[]) => void) | undefined;
}

/** The receipts of the transactions a look still misses (see the file's comment). */
export class ReceiptReader {
  readonly #provider: JsonRpcApiProvider;
  readonly #ring: Map<number, string>;
  readonly #recheck: (hash: string) => boolean;
  readonly #onBlock: ReceiptReaderOptions["onBlock"];
  /** Whether the node answers eth_getBlockReceipts; unknown until it is asked. */
  #blockReceipts: boolean | undefined;
  /** When it was found not to (head, ms): asked again after REPROBE_BLOCKS or REPROBE_MS. */
  #unsupportedAt = { head: 0, at: 0 };

  constructor(options: ReceiptReaderOptions) {
    this.#provider = options.provider;
    this.#ring = options.ring;
    this.#recheck = options.recheck;
    this.#onBlock = options.onBlock;
  }

  /**
   * The receipts of `missing` (lower-case hashes) in the blocks from `from` up to the head, and
   * the hashes nothing could be said about (their lookup failed). `deep`: blocks below `from` may
   * have been replaced too (missing ones are also asked for by transaction). `readHead`: the head
   * of the watcher's latest look (-1 before the first: every block is then read by transaction).
   */
  async receipts(
    from: number,
    latest: { head: number; hash: string; parentHash: string },
    missing: readonly string[],
    deep: boolean,
    readHead: number,
  ): Promise<{ found: Map<string, RpcReceipt>; failed: Set<string> }> {
    const { head } = latest;
    if (readHead < 0 || head - from + 1 > MAX_BLOCKS_PER_LOOK || !this.#blockReceiptsUsable(head))
      return this.byTransaction(missing);
    // By hash: the head's, and its parent's (the only blocks read at a look).
    const blocks = head === from ? [latest.hash] : [latest.parentHash, latest.hash];
    let answers: Array<RpcReceipt[] | null>;
    try {
      answers = await Promise.all(
        blocks.map((hash) => this.#provider.send("eth_getBlockReceipts", [hash]) as Promise<RpcReceipt[] | null>),
      );
      this.#blockReceipts = true;
    } catch (error) {
      if (isUnsupported(error)) {
        this.#blockReceipts = false;
        this.#unsupportedAt = { head, at: Date.now() };
      }
      // Unsupported, or a block the node cannot serve yet ("header not found" from a lagging
      // node behind a balancer): read by transaction this time, which covers every block.
      return this.byTransaction(missing);
    }
    // A block the node cannot serve (yet), or receipts of another block than the one asked for: read by transaction.
    if (
      answers.some(
        (receipts, i) =>
          !Array.isArray(receipts) || receipts.some((receipt) => receipt.blockHash.toLowerCase() !== blocks[i]),
      )
    )
      return this.byTransaction(missing);
    const wanted = new Set(missing);
    const found = new Map<string, RpcReceipt>();
    (answers as RpcReceipt[][]).forEach((receipts, i) => {
      this.#onBlock?.({ number: head - blocks.length + 1 + i, hash: blocks[i]! }, receipts);
    });
    for (const receipts of answers as RpcReceipt[][]) {
      for (const receipt of receipts) {
        const hash = receipt.transactionHash.toLowerCase();
        if (wanted.has(hash)) found.set(hash, receipt);
      }
    }
    // Those whose lookup failed at an earlier look may be in a block read then, and after a reorg
    // of unknown depth any may be in a replaced block below: asked for by transaction.
    const again = missing.filter((hash) => !found.has(hash) && (deep || this.#recheck(hash)));
    if (again.length === 0) return { found, failed: new Set() };
    const byTransaction = await this.byTransaction(again);
    for (const [hash, receipt] of byTransaction.found) found.set(hash, receipt);
    return { found, failed: byTransaction.failed };
  }

  /** Whether `receipt`'s block is the one read at its number, or one whose number was not read. */
  #onChain(receipt: RpcReceipt): boolean {
    const known = this.#ring.get(Number(receipt.blockNumber));
    return known === undefined || known === receipt.blockHash.toLowerCase();
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
   * One batch of eth_getTransactionReceipt (the provider batches concurrent calls). One that
   * fails (a 429 for one element of the batch, "transaction indexing is in progress") fails
   * that hash alone. One in another block than the one read at its number (#onChain: the node
   * moved to another chain since) is not answered: it fails too, and is asked for again; the
   * hash read at its number is forgotten unless it is the latest head's or its parent's (those
   * the next head poll checks), so that it is not refused for a stale hash forever.
   */
  async byTransaction(hashes: readonly string[]): Promise<{ found: Map<string, RpcReceipt>; failed: Set<string> }> {
    const answers = await Promise.allSettled(
      hashes.map((hash) => this.#provider.send("eth_getTransactionReceipt", [hash]) as Promise<RpcReceipt | null>),
    );
    const found = new Map<string, RpcReceipt>();
    const failed = new Set<string>();
    answers.forEach((answer, i) => {
      const hash = hashes[i]!.toLowerCase();
      if (answer.status === "rejected") failed.add(hash);
      else if (answer.value !== null && this.#onChain(answer.value)) found.set(hash, answer.value);
      else if (answer.value !== null) {
        failed.add(hash);
        const number = Number(answer.value.blockNumber);
        if (number < Math.max(...this.#ring.keys()) - 1) this.#ring.delete(number);
      }
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
