/**
 * What each exchange wallet holds of each asset, as its trades see it, and the swap's
 * allowance to spend it: reserved per trade until the trade is final, topped up when it falls
 * short. Allowances stay finite, so each sell emits its Approval log.
 *
 * The swap's own reserves of each stable coin are booked the same way (`reserveBalance`):
 * the sells accepted together never pay out more than the swap holds, so none of them reverts
 * on chain for want of reserves.
 *
 * What is reserved, and for how long:
 * - from the reservation until the trade is signed and journalled, in this process's memory
 *   (`Holding.inFlight`);
 * - from then until the trade is final, in the journal, with its nonce slot
 *   (NonceLedger.reservations): while the slot is pending, and once mined, for a balance read at
 *   a block before the one it was mined in. So a trade that answered 504 (pending) still holds
 *   what it will spend, across a restart, and on every instance sharing a PostgreSQL journal;
 *   one that failed, expired or was never sent holds nothing.
 * A check counts both: the balance (or allowance) read at a block, less what the journal holds
 * back beyond that block, less this process's trades not yet journalled.
 */
import { Interface, type JsonRpcApiProvider, formatUnits, isError } from "ethers";

import {
  ChainUnavailableError,
  InsufficientFundsError,
  type Reservation,
  type SlotReservation,
} from "../../../core/index.js";
import { KeyedMutex } from "../../shared/keyed-mutex.js";
import { ERC20_ABI } from "../tx/index.js";
import { isChainUnreachable, type CallBatcher, type ReadAnswer } from "../rpc/index.js";

const erc20Interface = new Interface(ERC20_ABI);

/** How long trades arriving at one head share a balance read, in ms (a burst's). */
const SHARED_READ_MS = 1_000;

/** An asset a trade spends: the token (sell) or a stable coin (buy, remittance). */
export interface Asset {
  address: string;
  symbol: string;
  decimals: number;
}

/** A balance and allowance read: at the latest block, whose number it says when it is known. */
interface ChainRead {
  balance: bigint;
  allowance: bigint;
  block: number | undefined;
}

/**
 * What the journal held back of a holding when asked, beyond the trades this process still counts
 * itself, and its `released` as it stood when the journal was asked.
 */
interface Held {
  amount: bigint;
  released: bigint;
}

/**
 * One exchange wallet's holding of one asset (or the swap's reserves of one coin), as its trades see it.
 * - `inFlight`: the amount of this process's trades reserved and not yet released: on their way
 *   to being signed, or signed and not yet answered by the send queue. The journal's reservations
 *   of their slots are not counted meanwhile (Allowances.journalled).
 * - `released`: the amount of all trades released so far (handed over to the journal's slots,
 *   or refused). A journal read asked when it stood lower counts none of those released since
 *   (it left their slots out as this process's own): a check on that read counts them too.
 * - `read`: the chain read and what the journal holds back beyond its block, which trades
 *   arriving now share (one eth_call for a burst), with `released` as it stood when it was made.
 */
/** A balance read made once and shared by the trades of a burst (Holding.read), or handed from a trade's proof to its reservation. */
export interface SharedRead {
  released: bigint;
  head: number;
  at: number;
  value: Promise<[ChainRead, Held]>;
}

export interface Holding {
  key: string;
  owner: string;
  asset: string;
  inFlight: bigint;
  released: bigint;
  read?: SharedRead | undefined;
  /** Who waits for no trade of this holding to be in flight (a USDT-style reset, #drained). */
  drained: Array<() => void>;
  /** Whether the swap's allowance matters (the wallets' holdings), or only the balance (the swap's reserves). */
  withAllowance: boolean;
  calls: { balanceOf: string; allowance: string };
}

export interface AllowancesOptions {
  provider: JsonRpcApiProvider;
  /** The spender: the swap. */
  swap: string;
  /** What the journal's slots hold back (every instance's): NonceLedger.reservations. */
  reservations: (minedAfter: number) => Promise<SlotReservation[]>;
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
  /** The slots of this process's trades still in flight, by their first transaction's hash (lower-case), with how many hold each. */
  readonly #ownSlots = new Map<string, number>();
  /** Per token (lower-case): whether it refuses to change a non-zero allowance (#refusesChange). */
  readonly #refuses = new Map<string, Promise<boolean>>();

  constructor(options: AllowancesOptions) {
    this.#opts = options;
  }

  /**
   * Reserves `amount` of the wallet's balance of `asset` on top of what the trades not yet final
   * spend (see the header), when the swap's allowance covers it too; when it does not, reserves
   * nothing and answers the allowance to top it up to (`short`: the wallet's balance, or what
   * the trades need when that is more): topUp, then reserve again.
   *
   * The balance and allowance are read outside the lock, so concurrent trades do not queue
   * behind each other's round trips, and one read serves the trades that arrive together
   * (see Holding). Every trade that was in flight when the read was made, or reserved since,
   * counts as unpaid: one that was mined before the read is then counted twice, which errs
   * on the safe side. Only when that check falls short is the chain read again, in the lock.
   *
   * @param head a block the chain had when the trade began: what is read is read at it or later
   * @returns the holding to release the amount from once the send queue answered the trade, or
   *   the allowance it falls short of
   * @throws InsufficientFundsError when the balance cannot cover it
   */
  async reserve(
    owner: string,
    asset: Asset,
    amount: bigint,
    head: number,
    read?: SharedRead,
  ): Promise<{ holding: Holding } | { short: bigint }> {
    const holding = this.#holding(owner, asset.address, true);
    let [{ balance, allowance }, held] = await (read ?? this.#sharedRead(holding, head)).value;
    return this.#locks.run(holding.key, async () => {
      let unpaid = this.#unpaid(holding, held);
      if (balance - unpaid < amount || allowance - unpaid < amount) {
        // Short, or a top-up may be needed: look again.
        [{ balance, allowance }, held] = await this.#readWithHeld(holding, head);
        unpaid = this.#unpaid(holding, held);
      }
      if (balance - unpaid < amount) {
        throw new InsufficientFundsError(
          `userAddress: ${owner} holds ${formatUnits(balance, asset.decimals)} ${asset.symbol}` +
            (unpaid > 0n ? ` (${formatUnits(unpaid, asset.decimals)} already committed)` : "") +
            `, the trade needs ${formatUnits(amount, asset.decimals)}`,
        );
      }
      // biome-ignore lint/complexity/useMathMinMax: bigints; Math.max takes numbers only.
      if (allowance - unpaid < amount) return { short: balance > unpaid + amount ? balance : unpaid + amount };
      holding.inFlight += amount;
      return { holding };
    });
  }

  /**
   * Tops the swap's allowance of `asset` from `owner` up to `target` with `approve`, for a trade of
   * `amount` it fell short of (unless another top-up covered it meanwhile), holding the holding's
   * lock meanwhile: the trades arriving wait, and reserve against the new allowance.
   * A token that refuses to change a non-zero allowance (USDT) is reset to zero first
   * (`approve`'s `reset`): every trade proven on the old allowance is answered by the send queue
   * first (signed ahead of the reset in nonce order), so none is signed between the two.
   */
  async topUp(
    owner: string,
    asset: Asset,
    { amount, target, head }: { amount: bigint; target: bigint; head: number },
    approve: (reset: boolean) => Promise<void>,
  ): Promise<void> {
    const holding = this.#holding(owner, asset.address, true);
    await this.#locks.run(holding.key, async () => {
      try {
        // Another trade's top-up, which this one waited for, may have covered it already.
        const [{ allowance }, held] = await this.#readWithHeld(holding, head);
        if (allowance - this.#unpaid(holding, held) >= amount) return;
        const reset = allowance !== 0n && (await this.#refusesChange(owner, asset.address, target));
        if (reset) await this.#drained(holding);
        await approve(reset);
      } finally {
        holding.read = undefined; // it shows the allowance before the update: the next trade reads again
      }
    });
  }

  /**
   * Starts now the read of `owner`'s balance and allowance of `asset` that reserve shares, so that
   * it goes out with the trade's proof (one eth_call); the trade hands it to `reserve`, which uses
   * it whatever was released since (those still count: see reserve).
   */
  prefetch(owner: string, asset: Asset, head: number): SharedRead {
    return this.#sharedRead(this.#holding(owner, asset.address, true), head);
  }

  /**
   * Books `amount` of the swap's own balance of `asset` (its reserves) for a trade that pays it
   * out, on top of what the sells not yet final pay out, or refuses the trade. Read and shared
   * like a wallet's balance (see reserve); read again, in the lock, only when short.
   */
  async reserveBalance(asset: Asset, amount: bigint, head: number, read?: SharedRead): Promise<Holding> {
    const holding = this.#holding(this.#opts.swap, asset.address, false);
    let [{ balance }, held] = await (read ?? this.#sharedRead(holding, head)).value;
    return this.#locks.run(holding.key, async () => {
      let unpaid = this.#unpaid(holding, held);
      if (balance - unpaid < amount) {
        [{ balance }, held] = await this.#readWithHeld(holding, head);
        unpaid = this.#unpaid(holding, held);
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
  prefetchReserves(asset: Asset, head: number): SharedRead {
    return this.#sharedRead(this.#holding(this.#opts.swap, asset.address, false), head);
  }

  /**
   * A trade's slot is journalled with its reservations (its transaction `txHash`), while the trade
   * still counts here (until `release`): the journal's are left out meanwhile, so it is not
   * counted twice. By the transaction's hash, not its nonce: a nonce freed and used again by
   * another trade is that other trade's.
   * @returns the key to give `release`
   */
  journalled(txHash: string): string {
    const key = txHash.toLowerCase();
    this.#ownSlots.set(key, (this.#ownSlots.get(key) ?? 0) + 1);
    return key;
  }

  /** Resolves once no trade of `holding` is in flight here: each was answered by the send queue. */
  #drained(holding: Holding): Promise<void> {
    if (holding.inFlight === 0n) return Promise.resolve();
    return new Promise((resolve) => holding.drained.push(resolve));
  }

  /**
   * The trade no longer counts here: the send queue answered it, so its slot, when it has one,
   * holds it back from now on until it is final (`slots`: what `journalled` gave it); or it was
   * refused before anything of it could be mined. Its amount of each holding goes in one step
   * with its slots, so it is never counted by neither.
   */
  release(parts: ReadonlyArray<{ holding: Holding; amount: bigint }>, slots: readonly string[] = []): void {
    for (const { holding, amount } of parts) {
      holding.inFlight -= amount;
      holding.released += amount;
      if (holding.inFlight === 0n) for (const resolve of holding.drained.splice(0)) resolve();
    }
    for (const key of slots) {
      const count = (this.#ownSlots.get(key) ?? 1) - 1;
      if (count > 0) this.#ownSlots.set(key, count);
      else this.#ownSlots.delete(key);
    }
  }

  /** The service's bookkeeping of one wallet's holding of one asset, made on first use. */
  #holding(owner: string, asset: string, withAllowance: boolean): Holding {
    const key = `${owner}:${asset}`.toLowerCase();
    let holding = this.#holdings.get(key);
    if (!holding) {
      holding = {
        key,
        owner: owner.toLowerCase(),
        asset: asset.toLowerCase(),
        inFlight: 0n,
        released: 0n,
        drained: [],
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
   * The read that a trade arriving now uses: the current one, while it was made at the same head
   * and within SHARED_READ_MS, and no trade was released since (else a new one, shared in turn).
   * Another instance's trades show only in a new read.
   */
  #sharedRead(holding: Holding, head: number): SharedRead {
    const current = holding.read;
    const now = Date.now();
    if (
      current === undefined ||
      current.released !== holding.released ||
      current.head !== head ||
      now - current.at > SHARED_READ_MS
    ) {
      const read = { released: holding.released, head, at: now, value: this.#readWithHeld(holding, head) };
      read.value.catch(() => {
        if (holding.read === read) holding.read = undefined; // a failed read is not shared
      });
      holding.read = read;
    }
    return holding.read!;
  }

  /**
   * What a check counts as unpaid: what the journal held back (beyond this process's own trades),
   * this process's trades in flight, and those released since the journal was asked (which it
   * left out as this process's own).
   */
  #unpaid(holding: Holding, held: Held): bigint {
    return held.amount + holding.inFlight + (holding.released - held.released);
  }

  /**
   * The holder's balance and allowance at the latest block, then what the journal holds back of
   * them beyond that block (or beyond `head`, when the read cannot say its block: it was read at
   * `head` or later), less the slots of this process's trades still in flight, which count
   * here. Asked after the read, so a slot mined meanwhile is counted by one or both.
   */
  async #readWithHeld(holding: Holding, head: number): Promise<[ChainRead, Held]> {
    const read = await this.#read(holding);
    const released = holding.released;
    const own = new Set(this.#ownSlots.keys());
    // The read's block when the batch told it and it is a number of the chain's own (on Arbitrum a
    // contract's block.number is L1's, far lower): else `head`, which the read is at or after.
    const minedAfter = read.block !== undefined && read.block >= head ? read.block : head;
    const reservations = await this.#opts.reservations(minedAfter);
    let amount = 0n;
    for (const r of reservations)
      if (r.holder === holding.owner && r.asset === holding.asset && !own.has(r.tx)) amount += r.amount;
    return [read, { amount, released }];
  }

  /** The holder's balance and (for a wallet) the swap's allowance, read now (latest block). */
  async #read(holding: Holding): Promise<ChainRead> {
    if (!holding.withAllowance) {
      const balance = await this.#readUint(holding.asset, holding.calls.balanceOf);
      return { balance: balance.value, allowance: 0n, block: balance.block };
    }
    const [balance, allowance] = await Promise.all([
      this.#readUint(holding.asset, holding.calls.balanceOf),
      this.#readUint(holding.asset, holding.calls.allowance),
    ]);
    const block =
      balance.block === undefined || allowance.block === undefined
        ? undefined
        : Math.min(balance.block, allowance.block);
    return { balance: balance.value, allowance: allowance.value, block };
  }

  /** An eth_call against the latest block answering one uint256 (through the batcher when there is one). */
  async #readUint(to: string, data: string): Promise<{ value: bigint; block: number | undefined }> {
    const calls = this.#opts.calls;
    const answer: ReadAnswer =
      calls === undefined
        ? { data: (await this.#opts.provider.send("eth_call", [{ to, data }, "latest"])) as string }
        : await calls.readAt(to, data);
    return { value: BigInt(answer.data === "0x" ? "0x0" : answer.data), block: answer.block };
  }

  /**
   * Whether `asset` refuses to change `owner`'s non-zero allowance to the swap to another
   * non-zero value (USDT's rule): its approve, called as the owner would call it, reverts. Known
   * once per token.
   */
  async #refusesChange(owner: string, asset: string, value: bigint): Promise<boolean> {
    const key = asset.toLowerCase();
    let known = this.#refuses.get(key);
    if (known === undefined) {
      const data = erc20Interface.encodeFunctionData("approve", [this.#opts.swap, value]);
      known = this.#opts.provider.send("eth_call", [{ from: owner, to: asset, data }, "latest"]).then(
        () => false,
        (error: unknown) => {
          // Only a revert says the token refuses; any other failure (a rate limit, a timeout)
          // says nothing, is not kept, and the trade is refused for now.
          if (!isError(error, "CALL_EXCEPTION")) {
            this.#refuses.delete(key);
            throw isChainUnreachable(error)
              ? error
              : new ChainUnavailableError(`could not ask ${asset} about its approve: retry`);
          }
          return true;
        },
      );
      this.#refuses.set(key, known);
    }
    return known;
  }
}

/**
 * What a trade holds back with its slot until it is final: what its wallet spends, and, for a
 * sell (`payout`: the swap, and the stable coin and amount it pays), the swap's reserves it pays out.
 */
export function reservesOf(
  trade: { wallet: string; spent: Asset; amount: bigint },
  payout: { swap: string; stable: string; amount: bigint } | undefined,
): Reservation[] {
  const spend = { holder: trade.wallet, asset: trade.spent.address, amount: trade.amount };
  return payout === undefined ? [spend] : [spend, { holder: payout.swap, asset: payout.stable, amount: payout.amount }];
}
