/**
 * What each exchange wallet holds of each asset, as its trades see it, and the swap's
 * allowance to spend it: reserved per trade, released when the trade is over, topped up when
 * it falls short. Allowances stay finite, so each sell emits its Approval log.
 *
 * The swap's own reserves of each stable coin are booked the same way (`reserveBalance`):
 * the sells accepted together never pay out more than the swap holds, so none of them reverts
 * on chain for want of reserves.
 */
import { Interface, type JsonRpcApiProvider, formatUnits } from "ethers";

import { InsufficientFundsError } from "../../../core/index.js";
import { KeyedMutex } from "../../shared/keyed-mutex.js";
import { ERC20_ABI } from "../tx/index.js";
import type { CallBatcher } from "../rpc/index.js";

const erc20Interface = new Interface(ERC20_ABI);

/** An asset a trade spends: the token (sell) or a stable coin (buy, remittance). */
export interface Asset {
  address: string;
  symbol: string;
  decimals: number;
}

/**
 * One exchange wallet's holding of one asset, as its trades see it.
 * - `inFlight`: the amount of the trades reserved and not yet released (on their way, or
 *   sent and unmined), which the chain's balance and allowance may not show yet.
 * - `released`: the amount of all trades released so far. A read made when it stood lower
 *   may miss the trades released since, which no longer count as in flight: a check on that
 *   read counts them too.
 * - `read`: the balance and allowance read that trades arriving now share (one eth_call
 *   pair for a burst), with `released` as it stood when it was made.
 */
export interface Holding {
  key: string;
  inFlight: bigint;
  released: bigint;
  read?: { released: bigint; value: Promise<[bigint, bigint]> } | undefined;
  /** Whether the swap's allowance matters (the wallets' holdings), or only the balance (the swap's reserves). */
  withAllowance: boolean;
  calls: { balanceOf: string; allowance: string };
}

export interface AllowancesOptions {
  provider: JsonRpcApiProvider;
  /** The spender: the swap. */
  swap: string;
  /** Sets the swap's allowance of `asset` from `owner` to `value`, and waits until it is mined. */
  approve: (owner: string, asset: string, value: bigint) => Promise<void>;
  /**
   * Where the reads go: the trade adapter's batcher (call-batcher.ts), one eth_call with the
   * trade's proof. Unset: an eth_call each.
   */
  calls?: CallBatcher;
}

export class Allowances {
  readonly #opts: AllowancesOptions;
  readonly #locks = new KeyedMutex();
  /** Per wallet and asset (lower-case "wallet:asset"): see Holding. */
  readonly #holdings = new Map<string, Holding>();

  constructor(options: AllowancesOptions) {
    this.#opts = options;
  }

  /**
   * Checks the wallet's balance and makes sure the swap may spend `amount` on top of what
   * in-flight trades already spend, topping the allowance up to the wallet's balance when
   * it falls short. USDT refuses to change a non-zero allowance, so it is reset to zero first.
   *
   * The balance and allowance are read outside the lock, so concurrent trades do not queue
   * behind each other's round trips, and one read serves the trades that arrive together
   * (see Holding). Every trade that was in flight when the read was made, or reserved since,
   * counts as unpaid: one that was mined before the read is then counted twice, which errs
   * on the safe side. Only when that check falls short is the chain read again, in the lock.
   *
   * @returns the holding to release the amount from once the trade is over, and whether the
   *   allowance was topped up (a check made before the top-up may have failed for want of it)
   */
  async reserve(owner: string, asset: Asset, amount: bigint): Promise<{ holding: Holding; toppedUp: boolean }> {
    const holding = this.#holding(owner, asset.address, true);
    const shared = this.#sharedRead(holding, asset.address);
    let [balance, allowance] = await shared.value;
    return this.#locks.run(holding.key, async () => {
      // Trades released since the read may not show in it: they still count.
      let unpaid = holding.inFlight + (holding.released - shared.released);
      if (balance - unpaid < amount || allowance - unpaid < amount) {
        // Short, or a top-up may be needed: look again. Counted before the read is made, so a
        // trade released meanwhile still counts.
        unpaid = holding.inFlight;
        [balance, allowance] = await this.#read(holding, asset.address);
      }
      if (balance - unpaid < amount) {
        throw new InsufficientFundsError(
          `userAddress: ${owner} holds ${formatUnits(balance, asset.decimals)} ${asset.symbol}` +
            (unpaid > 0n ? ` (${formatUnits(unpaid, asset.decimals)} already committed)` : "") +
            `, the trade needs ${formatUnits(amount, asset.decimals)}`,
        );
      }
      let toppedUp = false;
      if (allowance - unpaid < amount) {
        // biome-ignore lint/complexity/useMathMinMax: bigints; Math.max takes numbers only.
        const target = balance > unpaid + amount ? balance : unpaid + amount;
        try {
          if (allowance !== 0n) await this.#opts.approve(owner, asset.address, 0n);
          await this.#opts.approve(owner, asset.address, target);
        } finally {
          holding.read = undefined; // it shows the allowance before the update: the next trade reads again
        }
        toppedUp = true;
      }
      holding.inFlight += amount;
      return { holding, toppedUp };
    });
  }

  /**
   * Books `amount` of the swap's own balance of `asset` (its reserves) for a trade that pays it
   * out, on top of what trades in flight pay out, or refuses the trade. Read and shared like a
   * wallet's balance (see reserve); read again, in the lock, only when short.
   */
  async reserveBalance(asset: Asset, amount: bigint): Promise<Holding> {
    const holding = this.#holding(this.#opts.swap, asset.address, false);
    const shared = this.#sharedRead(holding, asset.address);
    let [balance] = await shared.value;
    return this.#locks.run(holding.key, async () => {
      let unpaid = holding.inFlight + (holding.released - shared.released);
      if (balance - unpaid < amount) {
        unpaid = holding.inFlight;
        [balance] = await this.#read(holding, asset.address);
      }
      if (balance - unpaid < amount) {
        throw new InsufficientFundsError(
          `the swap's reserves hold ${formatUnits(balance, asset.decimals)} ${asset.symbol}` +
            (unpaid > 0n ? ` (${formatUnits(unpaid, asset.decimals)} already committed to trades in flight)` : "") +
            `, the trade pays out ${formatUnits(amount, asset.decimals)}`,
        );
      }
      holding.inFlight += amount;
      return holding;
    });
  }

  /**
   * Starts now the read of the swap's reserves of `asset` that reserveBalance shares, so that it
   * goes out with the trade's proof (one eth_call) rather than after it. A read started early is
   * as safe as one started later: trades released after it began still count as unpaid (see
   * reserve).
   */
  prefetchReserves(asset: Asset): void {
    this.#sharedRead(this.#holding(this.#opts.swap, asset.address, false), asset.address);
  }

  /** The trade is over (mined, or refused before it was sent): its amount no longer counts as in flight. */
  release(holding: Holding, amount: bigint): void {
    holding.inFlight -= amount;
    holding.released += amount;
  }

  /** The service's bookkeeping of one wallet's holding of one asset, made on first use. */
  #holding(owner: string, asset: string, withAllowance: boolean): Holding {
    const key = `${owner}:${asset}`.toLowerCase();
    let holding = this.#holdings.get(key);
    if (!holding) {
      holding = {
        key,
        inFlight: 0n,
        released: 0n,
        withAllowance,
        calls: {
          balanceOf: erc20Interface.encodeFunctionData("balanceOf", [owner]),
          allowance: erc20Interface.encodeFunctionData("allowance", [owner, this.#opts.swap]),
        },
      };
      this.#holdings.set(key, holding);
    }
    return holding;
  }

  /**
   * The balance and allowance read that a trade arriving now uses: the current one, unless a
   * trade was released since it was made (then a new one, shared in turn).
   */
  #sharedRead(holding: Holding, asset: string): NonNullable<Holding["read"]> {
    if (holding.read?.released !== holding.released) {
      const read = { released: holding.released, value: this.#read(holding, asset) };
      read.value.catch(() => {
        if (holding.read === read) holding.read = undefined; // a failed read is not shared
      });
      holding.read = read;
    }
    return holding.read;
  }

  /** The holder's balance and (for a wallet) the swap's allowance, read now (latest block). */
  #read(holding: Holding, asset: string): Promise<[bigint, bigint]> {
    if (!holding.withAllowance) return this.#readUint(asset, holding.calls.balanceOf).then((balance) => [balance, 0n]);
    return Promise.all([
      this.#readUint(asset, holding.calls.balanceOf),
      this.#readUint(asset, holding.calls.allowance),
    ]);
  }

  /** An eth_call against the latest block answering one uint256 (through the batcher when there is one). */
  async #readUint(to: string, data: string): Promise<bigint> {
    const calls = this.#opts.calls;
    const result =
      calls === undefined
        ? ((await this.#opts.provider.send("eth_call", [{ to, data }, "latest"])) as string)
        : await calls.read(to, data);
    return BigInt(result === "0x" ? "0x0" : result);
  }
}
