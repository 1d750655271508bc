/**
 * The chain adapter's composition: reads the deployment once (stable-coin decimals,
 * token symbol, chain id), then builds the TradePort and PricePort on one provider.
 */
import { Contract, formatUnits, type JsonRpcApiProvider } from "ethers";

import {
  ChainUnavailableError,
  type NonceLedger,
  type NonceStore,
  type PricePort,
  type QuotePort,
  type StableCoin,
  type TradeJournal,
  type TradePort,
} from "../../core/index.js";
import { ERC20_ABI, SWAP_ABI } from "./abi.js";
import { CachedPricePort } from "./cached-price.js";
import { isChainUnreachable } from "./chain-errors.js";
import type { LifecycleLog } from "./lifecycle/monitor.js";
import { DEFAULT_FEED_POLICY, FeedGuard, SEQUENCER_SETTINGS, type FeedPolicy } from "./feed-policy.js";
import { ChainPriceAdapter } from "./price.adapter.js";
import { ChainQuoteAdapter } from "./quote.adapter.js";
import { RpcProvider, type RpcProviderOptions } from "./rpc-provider.js";
import { rawKeySigner, type TransactionSigner } from "./signer.js";
import { ChainTradeAdapter, DEFAULT_TRADE_SETTINGS, type TradeSettings } from "./trade.adapter.js";

/** Where the suite lives (written by scripts/deploy.ts, read from a deployment file in production). */
export interface DeploymentAddresses {
  token: string;
  swap: string;
  stableCoins: { DAI: string; USDT: string; USDC: string };
  /**
   * `nativeUsd`: the chain's native coin in USD (e.g. Chainlink's ETH / USD), for the gas in USD
   * of quotes and of the trade history; optional (older deployments have none: those stay null).
   */
  feeds: { tokenUsd: string; eurUsd: string; chfUsd: string; nativeUsd?: string };
}

/** Where the operator names the native coin's USD feed: errors name both. */
export const NATIVE_USD_FEED_SETTING = "NATIVE_USD_FEED (or the deployment file's feeds.nativeUsd)";

/** What the metrics' wallet gauges read at each scrape. */
export interface WalletSource {
  /** Each wallet's unconfirmed nonces: how many, and since when the oldest waits. */
  unconfirmed(): Promise<Array<{ wallet: string; count: number; oldestSince?: Date }>>;
  /** Each wallet's balances, in whole units, by asset symbol. */
  balances(): Promise<Array<{ wallet: string; asset: string; amount: number }>>;
  /** The latest block's timestamp, in unix seconds. */
  headTimestamp(): Promise<number>;
}

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
  /** The journal: trades, the wallets' nonce assignment and their nonce ledger, in one storage. */
  journal: TradeJournal & NonceStore & NonceLedger;
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
}

/** Default of `stuckAfterMs`: ten minutes, twice the default trade lifetime. */
export const DEFAULT_STUCK_AFTER_MS = 600_000;

/** Default of `priceCacheMs`: a quote lags the chain by at most a second. */
export const DEFAULT_PRICE_CACHE_MS = 1000;

export interface ChainAdapter {
  trade: TradePort;
  /** Starts the wallets' lifecycle monitors (call once the service is up). */
  start(): void;
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

export async function createChainAdapter(options: ChainAdapterOptions): Promise<ChainAdapter> {
  const { provider, addresses } = options;
  const wallets = options.signers ?? (options.privateKeys ?? []).map(rawKeySigner);
  if (wallets.length === 0) throw new TypeError("signers: at least one exchange wallet is required");

  let chainId: bigint;
  let tokenSymbol: string;
  let stableCoins: StableCoin[];
  try {
    chainId = (await provider.getNetwork()).chainId;
    const token = new Contract(addresses.token, ERC20_ABI, provider);
    tokenSymbol = (await token.getFunction("symbol")()) as string;
    stableCoins = await Promise.all(
      (["DAI", "USDT", "USDC"] as const).map(async (symbol) => {
        const coin = new Contract(addresses.stableCoins[symbol], ERC20_ABI, provider);
        const decimals = Number(await coin.getFunction("decimals")());
        return { symbol, address: addresses.stableCoins[symbol] as `0x${string}`, decimals };
      }),
    );
  } catch (error) {
    if (isChainUnreachable(error)) throw new ChainUnavailableError("the JSON-RPC node did not answer at start-up");
    throw new Error(`the deployment at ${addresses.swap} could not be read: ${(error as Error).message}`);
  }

  const feeds = new FeedGuard({
    provider,
    swap: addresses.swap,
    policy: options.feedPolicy ?? DEFAULT_FEED_POLICY,
    ...(addresses.feeds.nativeUsd === undefined ? {} : { nativeUsd: addresses.feeds.nativeUsd }),
  });
  if (addresses.feeds.nativeUsd !== undefined) {
    // A wrong address would leave every USD figure of gas null, silently: refuse it at start.
    try {
      await feeds.readNativeUsd();
    } catch (error) {
      if (isChainUnreachable(error)) throw new ChainUnavailableError("the JSON-RPC node did not answer at start-up");
      throw new Error(
        `${NATIVE_USD_FEED_SETTING}: ${addresses.feeds.nativeUsd} is not a readable price feed (${(error as { shortMessage?: string }).shortMessage ?? (error as Error).message})`,
      );
    }
  }
  if (feeds.policy.sequencer !== undefined) {
    // A wrong address would make every price and trade unavailable: refuse it at start instead.
    try {
      await feeds.readSequencer();
    } catch (error) {
      if (isChainUnreachable(error)) throw new ChainUnavailableError("the JSON-RPC node did not answer at start-up");
      throw new Error(
        `${SEQUENCER_SETTINGS.feed}: ${feeds.policy.sequencer.address} is not a readable uptime feed (${(error as { shortMessage?: string }).shortMessage ?? (error as Error).message})`,
      );
    }
  }

  const trade = new ChainTradeAdapter({
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
  // With several JSON-RPC endpoints, readiness says which are up ("; endpoints: 1/2 up, https://b… down (ECONNREFUSED)").
  const endpoints = () => {
    if (!(provider instanceof RpcProvider)) return "";
    const all = provider.endpoints();
    if (all.length < 2) return "";
    const down = all.filter((e) => !e.up).map((e) => `${e.url} down (${e.reason ?? "failing"})`);
    return `; endpoints: ${all.length - down.length}/${all.length} up${down.length > 0 ? `, ${down.join(", ")}` : ""}`;
  };

  return {
    trade,
    price,
    quote,
    stableCoins,
    wallets: wallets.map((w) => w.address),
    chainId,
    start: () => trade.start(),
    async readiness() {
      const stuck = trade.oldestPending().filter(({ since }) => Date.now() - since.getTime() > stuckAfterMs);
      if (stuck.length > 0) {
        const detail = stuck.map(
          ({ wallet, nonce, since }) =>
            `${wallet} has nonce ${nonce} unmined for ${Math.round((Date.now() - since.getTime()) / 1000)} s`,
        );
        return { ready: false, detail: `stuck: ${detail.join("; ")}` };
      }
      try {
        const [paused, ...balances] = await Promise.all([
          swap.getFunction("paused")() as Promise<boolean>,
          ...wallets.map((w) => provider.getBalance(w.address)),
        ]);
        const empty = wallets.filter((_, i) => balances[i] === 0n).map((w) => w.address);
        if (empty.length > 0) return { ready: false, detail: `no gas money in ${empty.join(", ")}` };
        if (paused) return { ready: false, detail: `the swap is paused${endpoints()}` };
        return { ready: true, detail: `chain reachable, wallets funded${endpoints()}` };
      } catch (error) {
        return {
          ready: false,
          detail: `${isChainUnreachable(error) ? "chain unreachable" : "deployment unreadable"}${endpoints()}`,
        };
      }
    },
    walletSource(): WalletSource {
      const journal = options.journal;
      const assets = [
        { symbol: tokenSymbol, address: addresses.token, decimals: 18 },
        ...stableCoins.map((coin) => ({
          symbol: coin.symbol,
          address: coin.address as string,
          decimals: coin.decimals,
        })),
      ].map((asset) => ({
        ...asset,
        balanceOf: new Contract(asset.address, ERC20_ABI, provider).getFunction("balanceOf"),
      }));
      return {
        async unconfirmed() {
          const oldest = new Map(trade.oldestPending().map((p) => [p.wallet.toLowerCase(), p.since]));
          return Promise.all(
            wallets.map(async (w) => {
              const since = oldest.get(w.address.toLowerCase());
              return {
                wallet: w.address,
                count: (await journal.openSlots(w.address)).length,
                ...(since === undefined ? {} : { oldestSince: since }),
              };
            }),
          );
        },
        async balances() {
          const rows = await Promise.all(
            wallets.flatMap((w) => [
              provider
                .getBalance(w.address)
                .then((wei) => ({ wallet: w.address, asset: "ETH", amount: Number(formatUnits(wei, 18)) })),
              ...assets.map(async (asset) => {
                const units = (await asset.balanceOf(w.address)) as bigint;
                return { wallet: w.address, asset: asset.symbol, amount: Number(formatUnits(units, asset.decimals)) };
              }),
            ]),
          );
          return rows;
        },
        async headTimestamp() {
          return (await provider.getBlock("latest"))?.timestamp ?? 0;
        },
      };
    },
    async close() {
      await trade.stop();
      provider.destroy();
    },
  };
}
