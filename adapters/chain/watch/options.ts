/**
 * What the wallet watch (wallet-watch.ts) is given: its settings as the configuration gives them
 * (thresholds in whole units, as decimal text), made exact once the assets' decimals are known
 * (`resolveThresholds`), where it logs, and what it works with.
 */
import type { JsonRpcApiProvider } from "ethers";

import { decimalToBaseUnits, type NonceLedger, type StableCoin, type WatchJournal } from "../../../core/index.js";
import type { BlockTimes, BlockWatcher, ChainState } from "../blocks/index.js";
import type { CallBatcher } from "../rpc/index.js";

/** What the watch does when a transaction the service never signed is mined from an exchange wallet. */
export type OutsideTxPolicy = "alert" | "pause";

/** The thresholds as configured: whole units, decimal text (WATCH_NATIVE_MIN, WATCH_<SYMBOL>_MIN, WATCH_RESERVES_<SYMBOL>_MIN). */
export interface WatchThresholdSettings {
  /** The native coin (gas money), in ether. */
  native?: string;
  /** By the symbol of the token or a stable coin: each exchange wallet's balance of it. */
  assets: ReadonlyMap<string, string>;
  /** By a stable coin's symbol: the swap's reserves of it (what sells pay out of). */
  reserves: ReadonlyMap<string, string>;
}

export interface WatchSettings {
  policy: OutsideTxPolicy;
  /** The least time between two readings of the watch's own, in ms (WATCH_INTERVAL_MS); it also reads at most once a block. */
  intervalMs: number;
  thresholds: WatchThresholdSettings;
}

export const DEFAULT_WATCH_SETTINGS: WatchSettings = {
  policy: "alert",
  intervalMs: 1_000,
  thresholds: { assets: new Map(), reserves: new Map() },
};

/** An asset the watch reads: the native coin, the token, or a stable coin. */
export interface WatchedAsset {
  /** "native", or the token's or the coin's symbol. */
  symbol: string;
  /** The ERC-20's address; undefined for the native coin. */
  address: string | undefined;
  decimals: number;
}

/** One threshold, exact: an alarm is raised below `min` and cleared at `min` × 120 %. */
export interface Threshold {
  /** The setting it comes from, for messages. */
  setting: string;
  min: bigint;
}

/** The thresholds in base units: the native coin's, each wallet asset's and each coin's reserves', by symbol. */
export interface WatchThresholds {
  native: Threshold | undefined;
  assets: ReadonlyMap<string, Threshold>;
  reserves: ReadonlyMap<string, Threshold>;
}

/** Where the watch writes: an error line for an outside transaction, a warning per alarm raised, a line per alarm cleared. */
export interface WatchLog {
  error(details: object, message: string): void;
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

/** What the watch tells the metrics as it happens (the gauges read its state at each scrape). */
export interface WatchObserver {
  outsideTransaction(wallet: string): void;
}

export interface WalletWatchOptions {
  provider: JsonRpcApiProvider;
  calls: CallBatcher;
  watcher: BlockWatcher;
  times: BlockTimes;
  /** The fees as last read (FeeOracle.latest; read when none is recent): the price of a trade's gas, for how many trades the gas money pays. */
  fees: { latest(): ChainState | undefined; read(): Promise<ChainState> };
  feeCap: bigint;
  /** A trade's typical gas (a sell's in the gas snapshot): what tradesLeft counts in. */
  typicalGas: bigint;
  journal: WatchJournal & Pick<NonceLedger, "slot">;
  /** The chain's id (where the watch left each wallet is kept per chain). */
  chainId: number;
  /** The exchange wallets' addresses. */
  wallets: readonly string[];
  swap: string;
  token: { address: string; symbol: string };
  stableCoins: readonly StableCoin[];
  settings: WatchSettings;
  log: WatchLog;
  observer?: WatchObserver | undefined;
}

/** The watch's thresholds do not fit the deployment: each problem names its setting. */
export class WatchSettingsError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(problems.join("; "));
    this.name = "WatchSettingsError";
  }
}

/** The token's decimals: every TradedToken has 18. */
const TOKEN_DECIMALS = 18;

/**
 * The thresholds in base units, each checked against its asset: a symbol that names no asset, or
 * a value with more decimals than its asset has, is a problem (named with its setting).
 */
export function resolveThresholds(
  settings: WatchThresholdSettings,
  token: { symbol: string },
  stableCoins: readonly StableCoin[],
  problems: string[],
): WatchThresholds {
  const decimals = new Map<string, number>([
    [token.symbol.toUpperCase(), TOKEN_DECIMALS],
    ...stableCoins.map((coin): [string, number] => [coin.symbol, coin.decimals]),
  ]);
  const exact = (setting: string, text: string, places: number): Threshold | undefined => {
    const min = decimalToBaseUnits(text, places);
    if (min !== undefined && min > 0n) return { setting, min };
    problems.push(`${setting}: "${text}" must be a positive amount with at most ${places} decimals`);
    return undefined;
  };
  const assets = new Map<string, Threshold>();
  for (const [symbol, text] of settings.assets) {
    const places = decimals.get(symbol.toUpperCase());
    const setting = `WATCH_${symbol.toUpperCase()}_MIN`;
    if (places === undefined)
      problems.push(
        `${setting}: ${symbol} is neither the token nor a stable coin of the swap (${[...decimals.keys()].join(", ")})`,
      );
    else {
      const threshold = exact(setting, text, places);
      if (threshold) assets.set(symbolOf(symbol, token, stableCoins), threshold);
    }
  }
  const reserves = new Map<string, Threshold>();
  for (const [symbol, text] of settings.reserves) {
    const coin = stableCoins.find((c) => c.symbol === symbol.toUpperCase());
    const setting = `WATCH_RESERVES_${symbol.toUpperCase()}_MIN`;
    if (coin === undefined)
      problems.push(
        `${setting}: the swap keeps reserves of its stable coins only (${stableCoins.map((c) => c.symbol).join(", ")})`,
      );
    else {
      const threshold = exact(setting, text, coin.decimals);
      if (threshold) reserves.set(coin.symbol, threshold);
    }
  }
  const native = settings.native === undefined ? undefined : exact("WATCH_NATIVE_MIN", settings.native, 18);
  return { native, assets, reserves };
}

/** The asset's own symbol, as its gauges and events name it (the token's as the contract spells it). */
function symbolOf(symbol: string, token: { symbol: string }, stableCoins: readonly StableCoin[]): string {
  if (symbol.toUpperCase() === token.symbol.toUpperCase()) return token.symbol;
  return stableCoins.find((c) => c.symbol === symbol.toUpperCase())?.symbol ?? symbol;
}
