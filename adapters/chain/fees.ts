/**
 * EIP-1559 fees: what a new trade offers, what a replacement at the same nonce offers, and the
 * cap above which the service sends no trade.
 *
 * - New trade: maxFeePerGas = 2 × the next block's base fee + the priority fee, which survives
 *   about six full blocks of base-fee rises (12.5 % each) before the transaction is priced out.
 *   The priority fee is the node's `eth_maxPriorityFeePerGas`, else the median tip of recent blocks.
 * - Replacement (same nonce, not mined in time): each field is the higher of the market's and the
 *   last attempt's + 10 % + 1 wei. Nodes (geth's txpool rule) refuse a replacement that does not
 *   raise both fields by at least 10 %; taking the market's when it is higher lets a trade caught
 *   by a fee spike catch up in one replacement, as OpenZeppelin Defender does.
 * - Cap: no trade is sent while the next base fee is above it, and no replacement offers more
 *   than it. The no-op that frees an expired trade's nonce may go above it by the 10 % bump, so
 *   that a cap can never wedge the wallet (OpenZeppelin Relayer issue #808).
 */
import type { JsonRpcApiProvider } from "ethers";

import { ChainUnavailableError, FeesTooHighError } from "../../core/index.js";

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

export interface FeeOracleOptions {
  /** How long a market reading is reused, in ms (every send of a burst pays the same). Default 1000. */
  cacheMs?: number;
}

/**
 * Reads the fee market and the latest block from the node: one batched request, shared by
 * every caller within `cacheMs` (every send of a burst pays the same).
 */
export class FeeOracle {
  readonly #provider: JsonRpcApiProvider;
  readonly #cacheMs: number;
  #cache: { at: number; state: Promise<ChainState> } | undefined;

  constructor(provider: JsonRpcApiProvider, options: FeeOracleOptions = {}) {
    this.#provider = provider;
    this.#cacheMs = options.cacheMs ?? 1000;
  }

  /** The chain's state, read at most `cacheMs` ago (or now, when `fresh`). */
  read(fresh = false): Promise<ChainState> {
    const now = Date.now();
    if (fresh || !this.#cache || now - this.#cache.at > this.#cacheMs) {
      const state = this.#read();
      state.catch(() => {
        if (this.#cache?.state === state) this.#cache = undefined; // a failed read is not reused
      });
      this.#cache = { at: now, state };
    }
    return this.#cache.state;
  }

  async #read(): Promise<ChainState> {
    const provider = this.#provider;
    const [history, tip, block] = await Promise.all([
      provider.send("eth_feeHistory", ["0x5", "latest", [50]]) as Promise<{
        baseFeePerGas?: string[];
        reward?: string[][];
      }>,
      (provider.send("eth_maxPriorityFeePerGas", []) as Promise<string>).then(BigInt, () => undefined),
      provider.send("eth_getBlockByNumber", ["latest", false]) as Promise<{
        number: string;
        hash: string;
        timestamp: string;
      } | null>,
    ]);
    // baseFeePerGas holds one entry per block asked for, plus the next block's, last.
    const next = history.baseFeePerGas?.at(-1);
    if (next === undefined || block === null) throw new ChainUnavailableError("the node reports no EIP-1559 base fee");
    return {
      baseFee: BigInt(next),
      priorityFee: tip ?? medianTip(history.reward),
      head: { number: Number(block.number), hash: block.hash, timestamp: Number(block.timestamp) },
    };
  }
}

/** The median of recent blocks' median tips; 1 wei when the blocks were empty. */
function medianTip(rewards: string[][] | undefined): bigint {
  const tips = (rewards ?? []).map((r) => BigInt(r[0] ?? "0x0")).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return max(tips[Math.floor(tips.length / 2)] ?? 0n, 1n);
}
