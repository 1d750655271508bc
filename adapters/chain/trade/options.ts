/**
 * What the trade adapter (trade.adapter.ts) is given: the chain, the wallets, the swap and its
 * token, the journal, and the settings of each trade (TradeSettings: what its calldata promises,
 * and the lifecycle of its transaction).
 */
import type { JsonRpcApiProvider, Wallet } from "ethers";

import type { NonceLedger, NonceStore, TradeJournal, TradeKind } from "../../../core/index.js";
import type { LifecycleLog, LifecycleSettings } from "../lifecycle/index.js";
import type { FeedGuard } from "../price/index.js";
import type { TransactionSigner } from "../tx/index.js";

/** What a trade's calldata promises, and the lifecycle of its transaction. */
export interface TradeSettings extends LifecycleSettings {
  /** Seconds from signing to the deadline in the calldata, after which the trade cannot execute. */
  lifetimeS: number;
  /** How far below the preflight's output the trade may pay out, in basis points (minOut). */
  slippageBps: number;
}

/** Defaults of TradeSettings (docs/operations.md, "On a real chain", explains each). */
export const DEFAULT_TRADE_SETTINGS: TradeSettings = {
  lifetimeS: 300,
  slippageBps: 100,
  confirmations: 1,
  reorgDepth: 64,
  resubmitAfterMs: 30_000,
  intervalMs: 1_000,
  leaseMs: 15_000,
  feeCap: 100n * 10n ** 9n,
  minAgeMs: 3_000,
};

export interface TradeAdapterOptions {
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
}
