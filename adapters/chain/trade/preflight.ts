/**
 * Proves, before anything is signed, that a trade succeeds against the latest block, with
 * which gas limit, and what it pays out.
 */
import { type JsonRpcApiProvider, toQuantity } from "ethers";

import type { CallBatcher } from "../rpc/index.js";

export interface PreflightOptions {
  provider: JsonRpcApiProvider;
  /** Headroom added to estimateGas, in percent. */
  gasHeadroomPercent: bigint;
  /**
   * Where the proof with a known gas limit goes: the trade adapter's batcher (call-batcher.ts),
   * one eth_call with the tick's other reads and proofs. Unset: an eth_call of its own.
   */
  calls?: CallBatcher;
}

export interface Proof {
  gasLimit: bigint;
  /** The call's return value: what the trade pays out at the latest block. */
  output: bigint;
  /** The number of the block the proof ran on, when the batcher proved it (its simulator says). */
  block?: number | undefined;
}

export class Preflight {
  readonly #opts: PreflightOptions;
  /** The gas limit each trade shape (kind and stable coin) is proven with, once an estimate raised it. */
  readonly #limits = new Map<string, bigint>();

  constructor(options: PreflightOptions) {
    this.#opts = options;
  }

  /**
   * One eth_call of the trade with the gas limit it will be signed with: the shape's limit
   * (`initialLimit`, from the gas snapshot, unless an estimate raised it). If that call succeeds,
   * the transaction succeeds with that limit on the same state, which is what an estimate proves,
   * at the cost of one execution instead of an estimate's binary search. If it fails, a full
   * estimate follows, alongside a plain eth_call: it names the revert, or finds a larger figure,
   * which (plus headroom) becomes the shape's limit. Without `initialLimit` the first trade of a
   * shape is estimated. With `calls`, the first eth_call rides in the tick's batch; the estimate
   * and the plain eth_call after a failure go out on their own, as they always did.
   */
  async check(shape: string, tx: { from: string; to: string; data: string }, initialLimit?: bigint): Promise<Proof> {
    const headroom = (gas: bigint) => (gas * (100n + this.#opts.gasHeadroomPercent)) / 100n;
    const known = this.#limits.get(shape) ?? initialLimit;
    const provider = this.#opts.provider;
    if (known !== undefined) {
      const proven = await this.#callWithLimit(tx, known).catch(() => undefined);
      if (proven !== undefined) return { gasLimit: known, output: uint(proven.output), block: proven.block };
    }
    const [gas, output] = await Promise.all([
      this.#estimateGas(tx),
      provider.send("eth_call", [tx, "latest"]) as Promise<string>,
    ]);
    const gasLimit = known === undefined || headroom(gas) > known ? headroom(gas) : known;
    this.#limits.set(shape, gasLimit);
    return { gasLimit, output: uint(output) };
  }

  /**
   * The trade's eth_call at the latest block with `gas` as its limit: its output (and the block it
   * ran on, when the batcher knows it), or undefined when it fails (reverts, or runs out of that
   * gas). Through the batcher when there is one: the same answer, in the tick's one eth_call.
   */
  async #callWithLimit(
    tx: { from: string; to: string; data: string },
    gas: bigint,
  ): Promise<{ output: string; block?: number | undefined } | undefined> {
    const calls = this.#opts.calls;
    if (calls === undefined) {
      const output = (await this.#opts.provider.send("eth_call", [
        { ...tx, gas: toQuantity(gas) },
        "latest",
      ])) as string;
      return { output };
    }
    const proof = await calls.prove(tx.from, tx.to, tx.data, gas);
    return proof.ok ? { output: proof.output, block: proof.block } : undefined;
  }

  /**
   * Estimates against the latest block. ethers estimates against "pending", which makes the
   * node replay every waiting transaction first: under interval mining, a burst of trades
   * would slow each preflight down in proportion to the burst.
   */
  async #estimateGas(tx: { from: string; to: string; data: string }): Promise<bigint> {
    return BigInt((await this.#opts.provider.send("eth_estimateGas", [tx, "latest"])) as string);
  }
}

/** A call's first 32-byte word as an unsigned integer (0 for an empty answer). */
function uint(result: string): bigint {
  return BigInt(result.length <= 2 ? "0x0" : result.slice(0, 66));
}

/**
 * The least output a trade accepts: `expected` less `slippageBps` basis points, rounded up, so
 * the tolerance is never wider than configured.
 */
export function minimumOut(expected: bigint, slippageBps: number): bigint {
  const kept = expected * BigInt(10_000 - slippageBps);
  return (kept + 9_999n) / 10_000n;
}
