/**
 * EIP-1559 fees: what a new trade offers, what a replacement at the same nonce offers, and the
 * cap above which the service sends no trade.
 *
 * - New trade: maxFeePerGas = 2 × the next block's base fee + the priority fee, which survives
 *   about six full blocks of base-fee rises (12.5 % each) before the transaction is priced out.
 *   The next base fee is computed from the latest header (nextBaseFee); the priority fee is the
 *   node's `eth_maxPriorityFeePerGas`, else the median tip of recent blocks (FeeOracle).
 * - Replacement (same nonce, not mined in time): each field is the higher of the market's and the
 *   last attempt's + 10 % + 1 wei. Nodes (geth's txpool rule) refuse a replacement that does not
 *   raise both fields by at least 10 %; taking the market's when it is higher lets a trade caught
 *   by a fee spike catch up in one replacement, as OpenZeppelin Defender does.
 * - Cap: no trade is sent while the next base fee is above it, and no replacement offers more
 *   than it. The no-op that frees an expired trade's nonce may go above it by the 10 % bump, so
 *   that a cap can never wedge the wallet (OpenZeppelin Relayer issue #808).
 */
import { type JsonRpcApiProvider, toQuantity } from "ethers";

import { ChainUnavailableError, FeesTooHighError } from "../../../core/index.js";
import type { HeadBlock } from "../rpc/index.js";
import type { BlockTimes } from "./block-times.js";

export interface Fees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** The fee market now: the next block's base fee, and a priority fee that gets a transaction included. */
export interface Market {
  baseFee: bigint;
  priorityFee: bigint;
}

/** The chain as last read: its fee market and its latest block. */
export interface ChainState extends Market {
  /** The latest block's number, hash and timestamp (unix seconds). */
  head: { number: number; hash: string; timestamp: number };
}

const GWEI = 10n ** 9n;

/** How many of the latest blocks trades were proven on readFrom keeps the state of. */
const KEPT_BLOCKS = 8;

/** How long readFrom waits before asking a node again for a block it did not have. */
const BLOCK_RETRY_MS = 250;

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const min = (a: bigint, b: bigint) => (a < b ? a : b);

/** Fees for a new transaction in this market (not capped). */
export function marketFees(market: Market): Fees {
  return { maxFeePerGas: 2n * market.baseFee + market.priorityFee, maxPriorityFeePerGas: market.priorityFee };
}

/** The least a replacement must offer: each field + 10 % + 1 wei (rounded down, then + 1, so always more than 10 %). */
export function bumped(last: Fees): Fees {
  return {
    maxFeePerGas: last.maxFeePerGas + last.maxFeePerGas / 10n + 1n,
    maxPriorityFeePerGas: last.maxPriorityFeePerGas + last.maxPriorityFeePerGas / 10n + 1n,
  };
}

/**
 * Fees for a replacement of `last` at the same nonce: each field the higher of the market's and
 * bumped(last), then capped. Null when the cap leaves no room for a replacement nodes accept.
 */
export function replacementFees(last: Fees, market: Fees, cap: bigint): Fees | null {
  const least = bumped(last);
  if (least.maxFeePerGas > cap) return null;
  const maxFeePerGas = min(max(market.maxFeePerGas, least.maxFeePerGas), cap);
  const maxPriorityFeePerGas = min(max(market.maxPriorityFeePerGas, least.maxPriorityFeePerGas), maxFeePerGas);
  if (maxPriorityFeePerGas < least.maxPriorityFeePerGas) return null;
  return { maxFeePerGas, maxPriorityFeePerGas };
}

/**
 * Fees for the no-op that takes an expired trade's nonce: the market's up to the cap, and never
 * less than bumped(last), even above the cap, so that nodes accept it in place of `last`.
 */
export function noopFees(last: Fees, market: Fees, cap: bigint): Fees {
  const least = bumped(last);
  const maxFeePerGas = max(least.maxFeePerGas, min(market.maxFeePerGas, cap));
  const maxPriorityFeePerGas = max(least.maxPriorityFeePerGas, min(market.maxPriorityFeePerGas, maxFeePerGas));
  return { maxFeePerGas, maxPriorityFeePerGas };
}

/** Fees for a new trade, or FeesTooHighError when the next base fee is above the cap. */
export function tradeFees(market: Market, cap: bigint): Fees {
  if (market.baseFee > cap) {
    throw new FeesTooHighError(
      `the chain's base fee is ${gwei(market.baseFee)} gwei, above this service's cap of ${gwei(cap)} gwei; ` +
        "nothing was sent: retry once fees fall",
    );
  }
  const fees = marketFees(market);
  const maxFeePerGas = min(fees.maxFeePerGas, cap);
  return { maxFeePerGas, maxPriorityFeePerGas: min(fees.maxPriorityFeePerGas, maxFeePerGas - market.baseFee) };
}

/** Wei as gwei, decimal text (e.g. 2240000000n → "2.24"). */
export function gwei(wei: bigint): string {
  const whole = wei / GWEI;
  const fraction = (wei % GWEI).toString().padStart(9, "0").replace(/0+$/, "");
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`;
}

/** This oracle's own read of the head: when it was asked for, and its number once answered. */
interface HeadRead {
  at: number;
  block: Promise<HeadBlock>;
  number?: number;
}

/** Where the latest head block comes from when someone read it lately (the block watcher does, about once per block). */
export interface HeadSource {
  /** The latest head block read, and when (ms), if any. */
  lastHead(): { block: HeadBlock; at: number } | undefined;
}

export interface FeeOracleOptions {
  /** How long a head block read is reused, in ms (every send of a burst pays the same). Default 1000. */
  cacheMs?: number;
  /** How long the priority fee is reused, in ms. Default 30,000. */
  tipCacheMs?: number;
  /** Heads someone else reads anyway (the block watcher's): used while younger than `cacheMs`. */
  heads?: HeadSource;
  /** Where each head this oracle reads itself is recorded, for the chain's block time (block-times.ts). */
  times?: BlockTimes;
}

/**
 * The next block's base fee, from its parent's header, by EIP-1559's rule (elasticity 2, change
 * at most 1/8 per block): exact on Ethereum and on the chains that keep its parameters (anvil,
 * EDR, geth); an estimate elsewhere, which the 2× in `marketFees` absorbs.
 */
export function nextBaseFee(head: { baseFee: bigint; gasUsed: bigint; gasLimit: bigint }): bigint {
  const { baseFee, gasUsed } = head;
  const target = head.gasLimit / 2n;
  if (target === 0n || gasUsed === target) return baseFee;
  if (gasUsed > target) {
    const rise = (baseFee * (gasUsed - target)) / target / 8n;
    return baseFee + (rise > 1n ? rise : 1n);
  }
  return baseFee - (baseFee * (target - gasUsed)) / target / 8n;
}

/**
 * Reads the fee market and the latest block. The base fee comes from the latest block's header
 * (nextBaseFee): the head the block watcher read within `cacheMs`, else one eth_getBlockByNumber,
 * shared by every caller within `cacheMs`. The priority fee (eth_maxPriorityFeePerGas, else the
 * median tip of recent blocks from eth_feeHistory) moves slowly and is reused for `tipCacheMs`:
 * a trade caught by a rise is re-priced by the lifecycle monitor (replacementFees takes the
 * market's when it is higher). So sequential trades pay no call of their own for fees while the
 * watcher is looking, and a burst pays at most one head read.
 */
export class FeeOracle {
  readonly #provider: JsonRpcApiProvider;
  readonly #cacheMs: number;
  readonly #tipCacheMs: number;
  readonly #heads: HeadSource | undefined;
  readonly #times: BlockTimes | undefined;
  #headRead: HeadRead | undefined;
  #tip: { at: number; value: Promise<bigint> } | undefined;
  /** The state the last read answered (latest), without asking anything. */
  #latest: ChainState | undefined;
  /** The chain's state at each block a trade was proven on beyond the reused head (readFrom), by number: a few recent ones. */
  readonly #blocks = new Map<number, Promise<ChainState>>();

  constructor(provider: JsonRpcApiProvider, options: FeeOracleOptions = {}) {
    this.#provider = provider;
    this.#cacheMs = options.cacheMs ?? 1000;
    this.#tipCacheMs = options.tipCacheMs ?? 30_000;
    this.#heads = options.heads;
    this.#times = options.times;
  }

  /** The chain's state, from a head read at most `cacheMs` ago (or now, when `fresh`). */
  async read(fresh = false): Promise<ChainState> {
    const [block, priorityFee] = await Promise.all([this.#head(fresh), this.#priorityFee()]);
    const state = stateOf(block, priorityFee);
    if (this.#latest === undefined || state.head.number >= this.#latest.head.number) this.#latest = state;
    return state;
  }

  /** The state the last read answered, at no call (the wallet watch's price of gas); undefined before one. */
  latest(): ChainState | undefined {
    return this.#latest;
  }

  /**
   * The chain's state as of the block a trade's proof ran on (`block`), or a later one: the
   * reused head when it is that new, else that very block's header, read by number once for
   * every trade proven on it. A node that does not have it yet (a lagging backend) is asked again
   * a moment later; still without it, the trade is refused: it is never checked against the fees
   * of a block older than the one it was proven on.
   * @throws ChainUnavailableError when the node has no such block
   */
  async readFrom(block: number): Promise<ChainState> {
    const state = await this.read();
    if (state.head.number >= block) return state;
    let read = this.#blocks.get(block);
    if (read === undefined) {
      const made = this.#readBlock(block);
      read = made;
      this.#blocks.set(block, made);
      made.catch(() => {
        if (this.#blocks.get(block) === made) this.#blocks.delete(block); // not kept: asked again next time
      });
      for (const number of this.#blocks.keys()) if (number <= block - KEPT_BLOCKS) this.#blocks.delete(number);
    }
    return read;
  }

  async #readBlock(number: number): Promise<ChainState> {
    for (let attempt = 1; ; attempt++) {
      const [block, priorityFee] = await Promise.all([
        this.#provider.send("eth_getBlockByNumber", [toQuantity(number), false]) as Promise<HeadBlock | null>,
        this.#priorityFee(),
      ]);
      if (block !== null && typeof block === "object") return stateOf(block, priorityFee);
      if (attempt === 2)
        throw new ChainUnavailableError(
          `the node has no block ${number}, which the trade was proven on, to check its fees against the cap; nothing was sent: retry`,
        );
      await new Promise((resolve) => setTimeout(resolve, BLOCK_RETRY_MS));
    }
  }

  #head(fresh: boolean): Promise<HeadBlock | null> {
    const now = Date.now();
    const young = (at: number) => now - at <= this.#cacheMs;
    const watched = this.#heads?.lastHead();
    const cached = this.#headRead;
    // The newer of the watcher's head and this oracle's own read, if young enough (and a header
    // with a base fee: a pushed one without it is not read here): by block number once both are
    // known, since either may come from a lagging node; while this oracle's read is on its way,
    // by when each was asked for (a read asked for after the watcher's is waited for).
    const watchedYoung =
      watched !== undefined && watched.block.baseFeePerGas !== undefined && young(watched.at) ? watched : undefined;
    const cachedYoung = cached !== undefined && young(cached.at) ? cached : undefined;
    if (!fresh && watchedYoung !== undefined) {
      const watchedNumber = Number(watchedYoung.block.number);
      const newer =
        cachedYoung === undefined ||
        (cachedYoung.number === undefined ? watchedYoung.at > cachedYoung.at : watchedNumber > cachedYoung.number);
      if (newer) return Promise.resolve(watchedYoung.block);
    }
    if (!fresh && cachedYoung !== undefined) return cachedYoung.block;
    const block = this.#provider.send("eth_getBlockByNumber", ["latest", false]) as Promise<HeadBlock>;
    const entry: HeadRead = { at: now, block };
    block.then(
      (read) => {
        if (read === null || typeof read !== "object") return;
        entry.number = Number(read.number);
        this.#times?.record(entry.number, Number(read.timestamp));
      },
      () => {
        if (this.#headRead === entry) this.#headRead = undefined; // a failed read is not reused
      },
    );
    this.#headRead = entry;
    return block;
  }

  #priorityFee(): Promise<bigint> {
    const now = Date.now();
    if (this.#tip !== undefined && now - this.#tip.at <= this.#tipCacheMs) return this.#tip.value;
    const value = (this.#provider.send("eth_maxPriorityFeePerGas", []) as Promise<string>).then(BigInt, async () =>
      medianTip(
        ((await this.#provider.send("eth_feeHistory", ["0x5", "latest", [50]])) as { reward?: string[][] }).reward,
      ),
    );
    const entry = { at: now, value };
    value.catch(() => {
      if (this.#tip === entry) this.#tip = undefined;
    });
    this.#tip = entry;
    return value;
  }
}

/** The chain's state from a header (its base fee gives the next one) and the priority fee. */
function stateOf(block: HeadBlock | null, priorityFee: bigint): ChainState {
  if (block === null || block.baseFeePerGas === undefined)
    throw new ChainUnavailableError("the node reports no EIP-1559 base fee");
  const latest = BigInt(block.baseFeePerGas);
  const next = nextBaseFee({ baseFee: latest, gasUsed: BigInt(block.gasUsed), gasLimit: BigInt(block.gasLimit) });
  return {
    // Never below the block's own: EIP-1559's rule with Ethereum's parameters predicts a fall
    // that chains with other parameters (OP stack, Arbitrum) do not make, and the cap's refusal
    // must not let through a trade the next block would price out.
    baseFee: next > latest ? next : latest,
    priorityFee,
    head: { number: Number(block.number), hash: block.hash, timestamp: Number(block.timestamp) },
  };
}

/** The median of recent blocks' median tips; 1 wei when the blocks were empty. */
function medianTip(rewards: string[][] | undefined): bigint {
  const tips = (rewards ?? []).map((r) => BigInt(r[0] ?? "0x0")).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return max(tips[Math.floor(tips.length / 2)] ?? 0n, 1n);
}
