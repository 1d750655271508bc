/**
 * The wallet watch: each exchange wallet's native balance (its gas money), token and stable-coin
 * balances, and the swap's reserves, read at most once a block; every transaction mined from a
 * wallet matched against the journal (outside.ts); alarms with hysteresis and the wallets' pauses
 * (alarms.ts). What the gauges and /readyz show is its last reading (`state`).
 *
 * What a reading costs:
 * - while trades are in flight (the block watcher expects transactions), its reads ride the call
 *   batcher's next eth_call, the one the next trade's proof goes out in, once per new block: no
 *   call of its own. The receipts the watcher reads of each new block are matched for outside
 *   transactions, at no call either. Only when the trades are done, or no trade's eth_call came
 *   for BUSY_PATIENCE periods, do its reads go out alone;
 * - otherwise (idle, or after a block the watcher did not read all of), one batched request per
 *   block, or per WATCH_INTERVAL_MS when blocks come faster: the eth_call of its reads and
 *   eth_getTransactionCount of each wallet, in one JSON-RPC batch.
 */
import { getAddress } from "ethers";

import type { WalletPause, WatchData } from "../../../core/index.js";
import { Alarms, type AlarmCheck, amountView, WalletPauses } from "./alarms.js";
import type { Threshold, WalletWatchOptions, WatchedAsset, WatchThresholds } from "./options.js";
import { OutsideDetector } from "./outside.js";
import { read, type Reading, type ReadingPlan } from "./readings.js";

/** Periods a reading waits to ride a trade's eth_call, while trades are in flight, before it goes alone. */
const BUSY_PATIENCE = 5;

/** What the last reading found, for the gauges and /readyz. */
export interface WatchState {
  /** The block it was read at (undefined before the first reading, or when read by plain calls). */
  block: number | undefined;
  /** When it was read. */
  at: Date | undefined;
  wallets: Array<{
    wallet: string;
    balances: Array<{ asset: string; units: bigint; decimals: number; threshold?: Threshold; low: boolean }>;
    /** How many trades of typical gas the native balance pays for at the fees trades are signed with now. */
    tradesLeft: number | undefined;
    pause: WalletPause | undefined;
  }>;
  reserves: Array<{ asset: string; units: bigint; decimals: number; threshold?: Threshold; low: boolean }>;
}

/** A reading under way: since when, whether its reads went alone, and the nonces asked with them when sent alone later. */
interface ReadingUnderWay {
  since: number;
  alone: boolean;
  nonces?: Promise<number[]>;
}

export class WalletWatch {
  readonly #o: WalletWatchOptions;
  readonly #thresholds: WatchThresholds;
  readonly #plan: ReadingPlan;
  readonly #alarms: Alarms;
  readonly #outside: OutsideDetector;
  /** The wallets paused: the trade adapter and the send queue refuse their trades. */
  readonly pauses: WalletPauses;
  #timer: NodeJS.Timeout | undefined;
  #stopped = true;
  /** The reading under way, and since when (ms). */
  #reading: ReadingUnderWay | undefined;
  #last: { reading: Reading; block: number | undefined; at: number } | undefined;
  /** When the last reading was started (ms). */
  #startedAt = Number.NEGATIVE_INFINITY;
  #failing = false;

  constructor(options: WalletWatchOptions, thresholds: WatchThresholds) {
    this.#o = options;
    this.#thresholds = thresholds;
    const wallets = options.wallets.map((wallet) => wallet.toLowerCase());
    const coins: WatchedAsset[] = options.stableCoins.map((coin) => ({
      symbol: coin.symbol,
      address: coin.address,
      decimals: coin.decimals,
    }));
    this.#plan = {
      provider: options.provider,
      calls: options.calls,
      wallets,
      walletAssets: [
        { symbol: "native", address: undefined, decimals: 18 },
        { symbol: options.token.symbol, address: options.token.address, decimals: 18 },
        ...coins,
      ],
      swap: options.swap,
      reserveAssets: coins,
    };
    this.#alarms = new Alarms(options.journal, options.log);
    this.pauses = new WalletPauses(options.journal, options.wallets);
    this.#outside = new OutsideDetector({
      provider: options.provider,
      journal: options.journal,
      chainId: options.chainId,
      wallets,
      policy: options.settings.policy,
      log: options.log,
      // Counted under the wallet's name as the other wallet metrics label it (checksummed).
      observer: options.observer && {
        outsideTransaction: (wallet) => options.observer?.outsideTransaction(getAddress(wallet)),
      },
      expects: (hash) => options.watcher.expects(hash),
      walletState: (wallet) => this.#walletData(wallet),
      paused: () => this.pauses.refresh(),
    });
  }

  /** The block watcher's hook: a block whose receipts it read, all of them. */
  readonly onBlock = (block: { number: number; hash: string }, receipts: readonly unknown[]): void => {
    this.#outside.onBlock(block, receipts as Parameters<OutsideDetector["onBlock"]>[1]);
    // A new block while trades run: the reads wait to ride the next trade's eth_call, which
    // follows within the block (the trade after one just mined). After a block the watcher did not
    // read all of (its first look reads by transaction), the nonces at once, with the reads.
    if (this.#stopped || this.#o.watcher.expected === 0) return;
    const gap = this.#outside.needsNonces(block.number);
    const pending = this.#reading;
    if (pending !== undefined) {
      // Reads waiting to ride when a block was missed: they go now, with the nonces.
      if (gap && !pending.alone) this.#sendAlone(pending, true);
      return;
    }
    const last = this.#last?.block;
    if (last === undefined || block.number > last) this.#begin(gap, gap);
  };

  /** Reads the journal's alarms and pauses, then watches. */
  async start(): Promise<void> {
    if (!this.#stopped) return;
    this.#stopped = false;
    await Promise.all([this.#alarms.load(), this.pauses.refresh()]);
    this.#schedule(0);
  }

  /** Stops reading; where each wallet was left is written to the journal (resolves once it is). */
  stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    return this.#outside.flush();
  }

  /** Settles once the matching asked for so far is done (tests). */
  settled(): Promise<void> {
    return this.#outside.idle();
  }

  #period(): number {
    return Math.max(this.#o.settings.intervalMs, this.#o.times.blockTimeMs() ?? 0);
  }

  #schedule(delay: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#tick(), delay);
    this.#timer.unref();
  }

  #tick(): void {
    const period = this.#period();
    const now = Date.now();
    const reading = this.#reading;
    if (reading !== undefined) {
      // Riding, and the trades are done (the next reading reads the nonces), or no trade's
      // eth_call came for a while: it goes alone.
      const idle = this.#busyHead(period) === undefined;
      // Idle now: the blocks from here on go unread, so the nonces come with these reads.
      if (!reading.alone && (idle || now - reading.since >= BUSY_PATIENCE * period)) this.#sendAlone(reading, idle);
      this.#schedule(this.#o.settings.intervalMs);
      return;
    }
    if (now - this.#startedAt < period) {
      this.#schedule(this.#startedAt + period - now);
      return;
    }
    const head = this.#busyHead(period);
    // While trades are in flight, once per new block, riding; otherwise alone with the nonces.
    if (head !== undefined && this.#last?.block !== undefined && head <= this.#last.block) {
      this.#schedule(this.#o.settings.intervalMs);
      return;
    }
    // A block the watcher skipped (its receipts not all read) needs the nonce; the head's own may
    // still be on their way (the look that read the head reads them next): the block below it decides.
    const nonces = this.#outside.needsNonces(head === undefined ? undefined : head - 1);
    this.#begin(head === undefined || nonces, nonces);
    this.#schedule(this.#o.settings.intervalMs);
  }

  /**
   * The head the block watcher read, while it is at work: trades in flight, or a look within the
   * last period (between two trades of a run, nothing is expected for a moment). Undefined: idle.
   */
  #busyHead(period: number): number | undefined {
    const watcher = this.#o.watcher;
    const read = watcher.lastHead();
    if (read === undefined) return undefined;
    if (watcher.expected === 0 && Date.now() - read.at > period) return undefined;
    return Number(read.block.number);
  }

  #begin(alone: boolean, nonces: boolean): void {
    const since = Date.now();
    this.#startedAt = since;
    const state: ReadingUnderWay = { since, alone };
    this.#reading = state;
    const latest = this.#o.fees.latest();
    // The price of gas for tradesLeft, when no trade read it lately: with this reading's batch.
    if (alone && (latest === undefined || since / 1000 - latest.head.timestamp > 60))
      void this.#o.fees.read().catch(() => {});
    read(this.#plan, alone, nonces)
      .then(async (reading) => {
        // Nonces asked when the riders were sent alone (idle): read with them.
        const counts = state.nonces === undefined ? [] : await state.nonces;
        counts.forEach((nonce, i) => {
          reading.nonces.set(this.#plan.wallets[i]!, nonce);
        });
        await this.#took(reading);
      })
      .then(
        () => {
          if (this.#failing) this.#o.log.info({}, "wallet watch: reading again");
          this.#failing = false;
        },
        (error: unknown) => {
          if (!this.#failing) this.#o.log.warn({ err: error }, "wallet watch: a reading failed; trying again");
          this.#failing = true;
        },
      )
      .finally(() => {
        this.#reading = undefined;
      });
  }

  /** The reads waiting to ride go now, alone (with the nonces, when `nonces`). */
  #sendAlone(reading: ReadingUnderWay, nonces: boolean): void {
    reading.alone = true;
    if (nonces) reading.nonces = this.#readNonces();
    this.#o.calls.flushRiders();
  }

  #readNonces(): Promise<number[]> {
    return Promise.all(this.#plan.wallets.map((wallet) => this.#o.provider.getTransactionCount(wallet, "latest")));
  }

  async #took(reading: Reading): Promise<void> {
    const block = reading.block ?? this.#o.watcher.lastHead()?.block.number;
    const number = block === undefined ? undefined : Number(block);
    this.#last = { reading, block: number, at: Date.now() };
    if (reading.nonces.size > 0 && number !== undefined) this.#outside.onNonces(reading.nonces, number);
    await this.pauses.refresh();
    await this.#alarms.evaluate(this.#checks(reading));
  }

  #checks(reading: Reading): AlarmCheck[] {
    const checks: AlarmCheck[] = [];
    const { native, assets, reserves } = this.#thresholds;
    for (const [wallet, balances] of reading.wallets) {
      for (const asset of this.#plan.walletAssets) {
        const threshold = asset.symbol === "native" ? native : assets.get(asset.symbol);
        const units = balances.get(asset.symbol);
        if (threshold === undefined || units === undefined) continue;
        const name = `wallet:${wallet}:${asset.symbol}`;
        checks.push({
          name,
          kind: "wallet",
          subject: wallet,
          asset: asset.symbol,
          decimals: asset.decimals,
          units,
          threshold,
          state: this.#walletData(wallet),
        });
      }
    }
    for (const asset of this.#plan.reserveAssets) {
      const threshold = reserves.get(asset.symbol);
      const units = reading.reserves.get(asset.symbol);
      if (threshold === undefined || units === undefined) continue;
      const state: WatchData = { swap: this.#o.swap, block: this.#last?.block ?? null, reserves: this.#reservesData() };
      checks.push({
        name: `swap:${asset.symbol}`,
        kind: "swap",
        subject: `swap:${asset.symbol.toLowerCase()}`,
        asset: asset.symbol,
        decimals: asset.decimals,
        units,
        threshold,
        state,
      });
    }
    return checks;
  }

  /** How many trades of typical gas `wei` pays for at the fees a trade is signed with now (the cap before any is known). */
  #tradesLeft(wei: bigint): number {
    const latest = this.#o.fees.latest();
    const offered = latest === undefined ? this.#o.feeCap : 2n * latest.baseFee + latest.priorityFee;
    const price = offered < this.#o.feeCap ? offered : this.#o.feeCap;
    const perTrade = this.#o.typicalGas * (price > 0n ? price : 1n);
    return Number(wei / perTrade);
  }

  /** A wallet's state as its events show it. */
  #walletData(wallet: string): WatchData {
    const balances = this.#last?.reading.wallets.get(wallet.toLowerCase());
    const native = balances?.get("native");
    return {
      wallet: getAddress(wallet),
      block: this.#last?.block ?? null,
      paused: this.pauses.of(wallet) !== undefined,
      balances: Object.fromEntries(
        this.#plan.walletAssets.flatMap((asset) => {
          const units = balances?.get(asset.symbol);
          return units === undefined ? [] : [[asset.symbol, amountView(units, asset.decimals)]];
        }),
      ),
      tradesLeft: native === undefined ? null : this.#tradesLeft(native),
    };
  }

  #reservesData(): WatchData {
    const reserves = this.#last?.reading.reserves;
    return Object.fromEntries(
      this.#plan.reserveAssets.flatMap((asset) => {
        const units = reserves?.get(asset.symbol);
        return units === undefined ? [] : [[asset.symbol, amountView(units, asset.decimals)]];
      }),
    );
  }

  /** The last reading, for the gauges and /readyz. */
  state(): WatchState {
    const last = this.#last;
    const entry = (asset: WatchedAsset, units: bigint, threshold: Threshold | undefined, name: string) => ({
      asset: asset.symbol,
      units,
      decimals: asset.decimals,
      ...(threshold === undefined ? {} : { threshold }),
      low: this.#alarms.raised(name),
    });
    const { native, assets, reserves } = this.#thresholds;
    return {
      block: last?.block,
      at: last === undefined ? undefined : new Date(last.at),
      wallets: this.#o.wallets.map((wallet) => {
        const balances = last?.reading.wallets.get(wallet.toLowerCase());
        const nativeUnits = balances?.get("native");
        return {
          wallet,
          balances: this.#plan.walletAssets.flatMap((asset) => {
            const units = balances?.get(asset.symbol);
            const threshold = asset.symbol === "native" ? native : assets.get(asset.symbol);
            return units === undefined
              ? []
              : [entry(asset, units, threshold, `wallet:${wallet.toLowerCase()}:${asset.symbol}`)];
          }),
          tradesLeft: nativeUnits === undefined ? undefined : this.#tradesLeft(nativeUnits),
          pause: this.pauses.of(wallet),
        };
      }),
      reserves: this.#plan.reserveAssets.flatMap((asset) => {
        const units = last?.reading.reserves.get(asset.symbol);
        return units === undefined ? [] : [entry(asset, units, reserves.get(asset.symbol), `swap:${asset.symbol}`)];
      }),
    };
  }
}
