/**
 * The chain adapter's composition: reads the deployment once (stable-coin decimals,
 * token symbol, chain id), then builds the TradePort and PricePort on one provider.
 */
import { Contract, type JsonRpcApiProvider } from "ethers";

import type {
  NonceLedger,
  NonceStore,
  PricePort,
  QuotePort,
  StableCoin,
  TradeJournal,
  WatchJournal,
} from "../../core/index.js";
import { guardFeeds, readDeployment, type DeploymentAddresses } from "./deployment.js";
import type { LifecycleLog } from "./lifecycle/index.js";
import {
  CachedPricePort,
  ChainPriceAdapter,
  ChainQuoteAdapter,
  DEFAULT_FEED_POLICY,
  type FeedPolicy,
} from "./price/index.js";
import { readiness, walletSource, type WalletSource } from "./readiness.js";
import { type EndpointStatus, RpcProvider, type RpcProviderOptions } from "./rpc/index.js";
import { assembleTrades, type Lifecycle } from "./assembly.js";
import { DEFAULT_TRADE_SETTINGS, type TradeSettings } from "./settings.js";
import type { ChainTradeAdapter } from "./trade/index.js";
import { rawKeySigner, SWAP_ABI, type TransactionSigner } from "./tx/index.js";
import {
  resolveThresholds,
  type WatchLog,
  type WatchObserver,
  type WatchSettings,
  WatchSettingsError,
  type WatchState,
} from "./watch/index.js";

export interface ChainAdapterOptions {
  /**
   * The chain. It must not cache requests (ethers' default `cacheTimeout` of 250 ms would
   * serve a stale nonce or a stale preflight); `createRpcProvider` makes one that does not.
   */
  provider: JsonRpcApiProvider;
  /** The exchange wallets' signers (signer.ts: a raw key, a decrypted keystore, or your own). */
  signers?: readonly TransactionSigner[];
  /** Private keys of the exchange wallets, when no `signers` are given. Never logged. */
  privateKeys?: readonly string[];
  addresses: DeploymentAddresses;
  /** Cash discount in basis points for `rateWithDiscountForCashCurrency` (0 = none). */
  cashDiscountBps?: number;
  /** How long a trade waits for its receipt, in ms. */
  receiptTimeoutMs?: number;
  /** The journal: trades, the wallets' nonce assignment and their nonce ledger, and the watch's records, in one storage. */
  journal: TradeJournal & NonceStore & NonceLedger & WatchJournal;
  /**
   * The wallet watch (adapters/chain/watch/): balances and reserves against thresholds, outside
   * transactions, the wallets' pauses. Absent: nothing is watched, and no wallet is ever paused.
   */
  watch?: { settings: WatchSettings; log: WatchLog; observer?: WatchObserver | undefined };
  /** Deadline, slippage, fee cap, confirmations and the lifecycle monitor's timing (defaults: DEFAULT_TRADE_SETTINGS). */
  trade?: Partial<TradeSettings>;
  /** A wallet whose oldest unmined nonce is older than this makes the service not ready, in ms. Default 600000. */
  stuckAfterMs?: number;
  /** Where the lifecycle monitor writes what it does (one warning per re-send, replacement, expiry, reorg). */
  log?: LifecycleLog;
  /** This instance's name in the monitors' leases (several instances share a PostgreSQL journal). */
  instanceId?: string;
  /**
   * How long a good price record is served from memory, in ms (default 1000; 0 = every
   * quote reads the chain). Concurrent quotes share one chain read; errors are not cached.
   */
  priceCacheMs?: number;
  /** The price feeds' maximum ages, bounds and the L2 sequencer (feed-policy.ts; default DEFAULT_FEED_POLICY). */
  feedPolicy?: FeedPolicy;
  /** The chain's block time in ms when it is known (the embedded chain's; 0 under automine); unset: measured. */
  blockTimeMs?: number;
}

/** Default of `stuckAfterMs`: ten minutes, twice the default trade lifetime. */
export const DEFAULT_STUCK_AFTER_MS = 600_000;

/** Default of `priceCacheMs`: a quote lags the chain by at most a second. */
export const DEFAULT_PRICE_CACHE_MS = 1000;

export interface ChainAdapter {
  /** The trade adapter: the TradePort's steps (and a whole trade without a journal, for tools). */
  trade: ChainTradeAdapter;
  /** Starts the wallets' lifecycle monitors (call once the service is up). */
  start(): void;
  /** The wallets' lifecycle monitors (assembly.ts). */
  lifecycle: Lifecycle;
  price: PricePort;
  /** Quotes for trades: what one would pay out now, its gas, and what stands in its way. */
  quote: QuotePort;
  stableCoins: StableCoin[];
  /** Checksummed addresses of the exchange wallets. */
  wallets: string[];
  chainId: bigint;
  /** Ready when the node answers, every exchange wallet holds gas money, and no wallet has a nonce stuck unmined. */
  readiness(): Promise<{ ready: boolean; detail: string }>;
  /** What the metrics read at each scrape: unconfirmed nonces, balances, the head (adapters/observability/metrics.ts). */
  walletSource(): WalletSource;
  /** The wallet watch's last reading, its alarms and pauses; undefined without a watch. */
  watchState(): WatchState | undefined;
  /** Each JSON-RPC endpoint as the provider's failover sees it (none for another provider). */
  endpoints(): EndpointStatus[];
  /** Reads the journal's pauses again (after an admin resumed a wallet); nothing without a watch. */
  refreshPauses(): Promise<void>;
  close(): Promise<void>;
}

/** The service's JSON-RPC provider (see rpc-provider.ts): fails fast, fails over, never caches, batches. */
export function createRpcProvider(
  urls: string | readonly string[],
  chainId?: bigint,
  timeoutMs = 10_000,
  options: RpcProviderOptions = {},
): RpcProvider {
  return new RpcProvider(urls, { ...options, ...(chainId === undefined ? {} : { chainId }), timeoutMs });
}

/** The watch's thresholds, exact for the deployment's assets; @throws WatchSettingsError naming each setting that does not fit. */
function watchThresholds(settings: WatchSettings, tokenSymbol: string, stableCoins: readonly StableCoin[]) {
  const problems: string[] = [];
  const thresholds = resolveThresholds(settings.thresholds, { symbol: tokenSymbol }, stableCoins, problems);
  if (problems.length > 0) throw new WatchSettingsError(problems);
  return thresholds;
}

export async function createChainAdapter(options: ChainAdapterOptions): Promise<ChainAdapter> {
  const { provider, addresses } = options;
  const wallets = options.signers ?? (options.privateKeys ?? []).map(rawKeySigner);
  if (wallets.length === 0) throw new TypeError("signers: at least one exchange wallet is required");

  const { chainId, tokenSymbol, stableCoins } = await readDeployment(provider, addresses);
  const feeds = await guardFeeds(provider, addresses, options.feedPolicy ?? DEFAULT_FEED_POLICY);

  const watch = options.watch && {
    ...options.watch,
    journal: options.journal,
    stableCoins,
    thresholds: watchThresholds(options.watch.settings, tokenSymbol, stableCoins),
  };
  const { trade, lifecycle } = assembleTrades({
    ...(watch === undefined ? {} : { watch }),
    feeds,
    provider,
    chainId,
    wallets,
    swap: addresses.swap,
    token: { address: addresses.token, symbol: tokenSymbol },
    journal: options.journal,
    ...(options.trade === undefined ? {} : { settings: options.trade }),
    ...(options.receiptTimeoutMs === undefined ? {} : { receiptTimeoutMs: options.receiptTimeoutMs }),
    ...(options.log === undefined ? {} : { log: options.log }),
    ...(options.instanceId === undefined ? {} : { instanceId: options.instanceId }),
    ...(options.blockTimeMs === undefined ? {} : { blockTimeMs: options.blockTimeMs }),
  });
  const stuckAfterMs = options.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS;
  const chainPrice = new ChainPriceAdapter({
    provider,
    swap: addresses.swap,
    feeds: addresses.feeds,
    tokenSymbol,
    cashDiscountBps: options.cashDiscountBps ?? 0,
    guard: feeds,
  });
  const price = new CachedPricePort(chainPrice, { ttlMs: options.priceCacheMs ?? DEFAULT_PRICE_CACHE_MS });
  const settings = { ...DEFAULT_TRADE_SETTINGS, ...options.trade };
  const quote = new ChainQuoteAdapter({
    provider,
    swap: addresses.swap,
    token: { address: addresses.token, symbol: tokenSymbol },
    wallets: wallets.map((w) => w.address),
    feeds,
    lifetimeS: settings.lifetimeS,
    feeCap: settings.feeCap,
  });
  const swap = new Contract(addresses.swap, SWAP_ABI, provider);

  return {
    trade,
    price,
    quote,
    stableCoins,
    wallets: wallets.map((w) => w.address),
    chainId,
    start: () => lifecycle.start(),
    lifecycle,
    readiness: () =>
      readiness({ lifecycle, stuckAfterMs, swap, wallets, provider, watch: () => lifecycle.watch?.state() }),
    watchState: () => lifecycle.watch?.state(),
    refreshPauses: async () => lifecycle.watch?.pauses.refresh(),
    endpoints: () => (provider instanceof RpcProvider ? provider.endpoints() : []),
    walletSource: () =>
      walletSource({
        lifecycle,
        wallets,
        provider,
        journal: options.journal,
        token: addresses.token,
        tokenSymbol,
        stableCoins,
        watch: () => lifecycle.watch?.state(),
      }),
    async close() {
      await lifecycle.stop();
      provider.destroy();
    },
  };
}
