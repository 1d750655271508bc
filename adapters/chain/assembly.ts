/**
 * The chain adapter's parts, each built once and handed to what uses it: the chain's block time,
 * the block watcher, the fees and the receipts on it, the call batcher and the proof, the feeds'
 * guard, the allowances and their top-ups, and per exchange wallet its send queue and its
 * lifecycle monitor. The trade adapter gets the parts it works with (trade/options.ts); the
 * monitors are the lifecycle's, started and stopped by the service's startup steps, never by a
 * trade.
 */
import type { JsonRpcApiProvider, Wallet } from "ethers";

import type {
  NonceLedger,
  NonceStore,
  StableCoin,
  TradeJournal,
  TradeKind,
  TradeReplacer,
  WatchJournal,
} from "../../core/index.js";
import { BlockTimes, BlockWatcher, FeeOracle, Receipts, headsOf, measureBlockTime, tradeFees } from "./blocks/index.js";
import { WalletMonitor, type LifecycleLog } from "./lifecycle/index.js";
import { DEFAULT_FEED_POLICY, FeedGuard } from "./price/index.js";
import { CallBatcher } from "./rpc/index.js";
import { SendQueue } from "./send/index.js";
import { DEFAULT_TRADE_SETTINGS, type TradeSettings } from "./settings.js";
import {
  Allowances,
  Approvals,
  ChainTradeAdapter,
  Preflight,
  SNAPSHOT_GAS_USED,
  nonceLookup,
  recordSlotOf,
  tradeGasLimit,
  type TradingWallet,
} from "./trade/index.js";
import { toSigner, type TransactionSigner } from "./tx/index.js";
import {
  WalletWatch,
  type WatchLog,
  type WatchObserver,
  type WatchSettings,
  type WatchThresholds,
} from "./watch/index.js";

/**
 * Default of `sendBatchMax`. Rounds smaller than the load keep the chain busy: one round is
 * mined while the next is signed, rather than every trade in flight moving in one wave that
 * leaves the chain idle while it collects its receipts.
 */
export const DEFAULT_SEND_BATCH_MAX = 16;

export interface AssemblyOptions {
  /** A JSON-RPC provider: reads, estimates and receipts are raw calls (createRpcProvider's in the service). */
  provider: JsonRpcApiProvider;
  chainId: bigint;
  /** The exchange wallets' signers (an ethers Wallet is taken by its key). */
  wallets: ReadonlyArray<TransactionSigner | Wallet>;
  swap: string;
  token: { address: string; symbol: string };
  /** The journal: trades, nonce assignment and the nonce ledger, in one storage. */
  journal: TradeJournal & NonceStore & NonceLedger;
  settings?: Partial<TradeSettings>;
  /** How long a trade waits for its receipt before answering "pending", in ms. */
  receiptTimeoutMs?: number;
  /** Headroom added to estimateGas, in percent, when a trade's proof needs an estimate. */
  gasHeadroomPercent?: bigint;
  /**
   * The gas limit each kind of trade is first proven with (default: gas-limits.ts, the gas
   * snapshot plus its margin); null: estimate the first trade of each kind and coin instead.
   */
  gasLimits?: Record<TradeKind, bigint> | null;
  /** Most transactions signed and broadcast in one round (see send-queue.ts); 1 = one request each. */
  sendBatchMax?: number;
  log?: LifecycleLog;
  /** This instance's name in the monitors' leases. */
  instanceId?: string;
  /** The feed policy's guard, shared with the price (default: DEFAULT_FEED_POLICY on the swap's token feed). */
  feeds?: FeedGuard;
  /**
   * The chain's block time in ms, when it is known rather than measured: the embedded chain's
   * (0 under automine, where a block comes with each transaction). Unset: measured (block-times.ts).
   */
  blockTimeMs?: number;
  /** The wallet watch (watch/): balances, reserves, outside transactions; absent: not watched. */
  watch?: WatchParts;
}

/** What the wallet watch needs beside the assembly's own parts. */
export interface WatchParts {
  journal: WatchJournal & Pick<NonceLedger, "slot">;
  settings: WatchSettings;
  /** Its thresholds, exact (watch/options.ts resolveThresholds). */
  thresholds: WatchThresholds;
  stableCoins: readonly StableCoin[];
  log: WatchLog;
  observer?: WatchObserver | undefined;
}

/** The wallets' lifecycle monitors: started and stopped by the service, read by readiness and the metrics. */
export interface Lifecycle {
  /** Starts every monitor (and measures the chain's block time once, so the first quote redeemed knows it). */
  start(): void;
  /** Stops the monitors (giving their leases up) and the block watcher. */
  stop(): Promise<void>;
  /** Each wallet's oldest nonce nothing is mined at yet, as its monitor last saw it. */
  oldestPending(): Array<{ wallet: string; nonce: number; since: Date }>;
  /** The monitors, for tests that drive them a look at a time. */
  monitors(): WalletMonitor[];
  /**
   * The wallet watch, when there is one: started by the service before it takes trades (it reads
   * the journal's pauses and alarms first), stopped with the monitors.
   */
  watch: WalletWatch | undefined;
  /** A cancel's or a speed-up's replacement at a trade's nonce, by its wallet's monitor (lifecycle/replace-now.ts). */
  replacer: TradeReplacer;
}

const SILENT: LifecycleLog = { warn() {}, info() {} };

/** The trade adapter on its parts, and the lifecycle of its wallets' transactions. */
export function assembleTrades(options: AssemblyOptions): { trade: ChainTradeAdapter; lifecycle: Lifecycle } {
  const settings = { ...DEFAULT_TRADE_SETTINGS, ...options.settings };
  const { provider, journal } = options;
  const receiptTimeoutMs = options.receiptTimeoutMs ?? 120_000;
  // The chain's block time, from the heads the watcher and the fees read (block-times.ts).
  const times = new BlockTimes(options.blockTimeMs);
  // Heads pushed over a WebSocket endpoint when there is one (eth_subscribe newHeads), else polled.
  // Each block it reads all the receipts of goes to the wallet watch (made below) as well.
  let watch: WalletWatch | undefined;
  const watcher = new BlockWatcher({
    provider,
    intervalMs: settings.intervalMs,
    heads: headsOf(provider),
    times,
    onBlock: (block, receipts) => watch?.onBlock(block, receipts),
  });
  // Fees from the head the watcher reads anyway, while it is young (fees.ts).
  const fees = new FeeOracle(provider, { heads: watcher, times });
  const receipts = new Receipts({
    watcher,
    provider,
    confirmations: settings.confirmations,
    timeoutMs: receiptTimeoutMs,
    journalAfterMs: settings.minAgeMs,
  });
  const calls = new CallBatcher({ provider });
  watch = watchOf(options, { calls, watcher, times, fees, feeCap: settings.feeCap });
  const paused = (wallet: string) => watch?.pauses.refusal(wallet);
  const wallets = walletsOf(options, { watcher, fees, receipts, settings, receiptTimeoutMs, paused, times });
  const approvals = new Approvals({
    provider,
    swap: options.swap,
    queueOf: (owner) => wallets.get(owner.toLowerCase())!.queue,
    record: (tx) => recordSlotOf(journal, tx, "approval"),
    mined: (owner, sent) => receipts.wait(sent.hash, sent.receipt, nonceLookup(journal, owner, sent.nonce, sent.hash)),
    fees: async () => tradeFees(await fees.read(), settings.feeCap),
  });
  const trade = new ChainTradeAdapter({
    provider,
    swap: options.swap,
    token: options.token,
    journal,
    settings,
    wallets,
    fees,
    receipts,
    watcher,
    times,
    calls,
    preflight: new Preflight({ provider, gasHeadroomPercent: options.gasHeadroomPercent ?? 20n, calls }),
    allowances: new Allowances({
      provider,
      swap: options.swap,
      reservations: (minedAfter) => journal.reservations(minedAfter),
      calls,
    }),
    approvals,
    feeds: options.feeds ?? new FeedGuard({ provider, swap: options.swap, policy: DEFAULT_FEED_POLICY }),
    gasLimits:
      options.gasLimits === undefined
        ? { sell: tradeGasLimit("sell"), buy: tradeGasLimit("buy"), remittance: tradeGasLimit("remittance") }
        : options.gasLimits,
    paused,
  });
  const lifecycle = lifecycleOf(
    [...wallets.values()].map(({ monitor }) => monitor),
    () => measureBlockTime(provider, times),
    watcher,
    watch,
  );
  return { trade, lifecycle };
}

/** Each exchange wallet's send queue and lifecycle monitor, by lower-case address. */
function walletsOf(
  options: AssemblyOptions,
  parts: {
    watcher: BlockWatcher;
    fees: FeeOracle;
    receipts: Receipts;
    settings: TradeSettings;
    receiptTimeoutMs: number;
    paused: (wallet: string) => Error | undefined;
    times: BlockTimes;
  },
): Map<string, TradingWallet & { monitor: WalletMonitor }> {
  const { watcher, fees, receipts, settings, receiptTimeoutMs, paused, times } = parts;
  const wallets = new Map<string, TradingWallet & { monitor: WalletMonitor }>();
  for (const signer of options.wallets.map(toSigner)) {
    const queue = new SendQueue({
      signer,
      chainId: options.chainId,
      provider: options.provider,
      nonces: options.journal,
      ledger: options.journal,
      maxBatch: options.sendBatchMax ?? DEFAULT_SEND_BATCH_MAX,
      watcher,
      heldWaitMs: receiptTimeoutMs,
      paused: () => paused(signer.address),
    });
    const monitor = new WalletMonitor({
      signer,
      chainId: options.chainId,
      provider: options.provider,
      journal: options.journal,
      fees,
      receipts,
      settings,
      log: options.log ?? SILENT,
      holder: options.instanceId ?? "this-instance",
      sends: queue,
      blockTimeMs: () => times.blockTimeMs(),
    });
    wallets.set(signer.address.toLowerCase(), { signer, queue, monitor });
  }
  return wallets;
}

/** How long, at most, a stop waits for the wallet watch to write where it left each wallet. */
const WATCH_STOP_MS = 5_000;

/** The wallet watch on the assembly's parts, when the options ask for one. */
function watchOf(
  options: AssemblyOptions,
  parts: { calls: CallBatcher; watcher: BlockWatcher; times: BlockTimes; fees: FeeOracle; feeCap: bigint },
): WalletWatch | undefined {
  if (options.watch === undefined) return undefined;
  const { thresholds, ...watched } = options.watch;
  return new WalletWatch(
    {
      ...watched,
      ...parts,
      provider: options.provider,
      chainId: Number(options.chainId),
      typicalGas: SNAPSHOT_GAS_USED.sell,
      wallets: options.wallets.map((wallet) => toSigner(wallet).address),
      swap: options.swap,
      token: options.token,
    },
    thresholds,
  );
}

/** The lifecycle of the wallets' transactions: their monitors, the block watcher they share, the block time measured once. */
function lifecycleOf(
  monitors: WalletMonitor[],
  measure: () => Promise<void>,
  watcher: BlockWatcher,
  watch: WalletWatch | undefined,
): Lifecycle {
  return {
    start() {
      for (const monitor of monitors) monitor.start();
      void measure().catch(() => {}); // else from the heads read later
    },
    async stop() {
      // Where the watch left each wallet is written first, waiting at most WATCH_STOP_MS for the
      // checks under way (behind is safe: the next start explains those nonces again).
      await Promise.race([watch?.stop(), new Promise((resolve) => setTimeout(resolve, WATCH_STOP_MS).unref())]);
      await Promise.all(monitors.map((monitor) => monitor.stop()));
      watcher.stop();
    },
    oldestPending: () =>
      monitors.flatMap((monitor) => {
        const oldest = monitor.oldestPending();
        return oldest ? [{ wallet: monitor.wallet, ...oldest }] : [];
      }),
    monitors: () => monitors,
    watch,
    replacer: {
      // A wallet this instance does not sign for (removed from its configuration): the cancel is
      // recorded already, and the instance that signs for it sends its no-op at its next look.
      cancel: async (target) =>
        monitorOf(monitors, target.wallet)?.cancel(target) ?? { state: "deferred", reason: notHere(target.wallet) },
      speedUp: async (target, maxFeePerGas, audit) =>
        monitorOf(monitors, target.wallet)?.speedUp(target, maxFeePerGas, audit) ?? {
          state: "unchanged",
          reason: notHere(target.wallet),
        },
    },
  };
}

/** The monitor of `wallet`, which replaces its trades' transactions (a cancel, a speed-up). */
function monitorOf(monitors: WalletMonitor[], wallet: string): WalletMonitor | undefined {
  return monitors.find((candidate) => candidate.wallet.toLowerCase() === wallet.toLowerCase());
}

const notHere = (wallet: string) =>
  `this instance does not sign for wallet ${wallet}: only an instance that does replaces its transactions`;
