/**
 * What the trade adapter (trade.adapter.ts) is handed: the settings of each trade (what its
 * calldata promises, its fee cap and confirmations) and the parts it works with,
 * built once by the chain adapter's assembly (../assembly.ts) and shared with the lifecycle
 * monitors and the price side.
 */
import type { JsonRpcApiProvider } from "ethers";

import type { NonceLedger, NonceStore, TradeJournal, TradeKind } from "../../../core/index.js";
import type { BlockTimes, BlockWatcher, FeeOracle, Receipts } from "../blocks/index.js";
import type { FeedGuard } from "../price/index.js";
import type { CallBatcher } from "../rpc/index.js";
import type { SendQueue } from "../send/index.js";
import type { TransactionSigner } from "../tx/index.js";
import type { Allowances } from "./allowances.js";
import type { Approvals } from "./approvals.js";
import type { Preflight } from "./preflight.js";

/** What a trade's calldata promises, the cap on its fees, and when it counts as confirmed. */
export interface TradeCallSettings {
  /** Seconds from signing to the deadline in the calldata, after which the trade cannot execute. */
  lifetimeS: number;
  /** How far below the preflight's output the trade may pay out, in basis points (minOut). */
  slippageBps: number;
  /** The highest maxFeePerGas of a trade, in wei: none is sent while the base fee is above it. */
  feeCap: bigint;
  /** Confirmations a trade needs to count as confirmed (1 = on inclusion, as web3.js `send()` answers). */
  confirmations: number;
}

/** An exchange wallet, as trades use it: its signer, and its send queue (nonces, signing, broadcasts). */
export interface TradingWallet {
  signer: TransactionSigner;
  queue: SendQueue;
}

/** The trade adapter's parts: each built once, by the assembly (../assembly.ts). */
export interface TradeAdapterParts {
  provider: JsonRpcApiProvider;
  swap: string;
  token: { address: string; symbol: string };
  /** The journal: trades, nonce assignment and the nonce ledger, in one storage. */
  journal: TradeJournal & NonceStore & NonceLedger;
  settings: TradeCallSettings;
  /** The exchange wallets, by lower-case address. */
  wallets: ReadonlyMap<string, TradingWallet>;
  fees: FeeOracle;
  receipts: Receipts;
  watcher: BlockWatcher;
  times: BlockTimes;
  /** Every read and proof a tick asks of the latest block, in one eth_call (call-batcher.ts). */
  calls: CallBatcher;
  preflight: Preflight;
  allowances: Allowances;
  approvals: Approvals;
  feeds: FeedGuard;
  /**
   * The gas limit each kind of trade is first proven with (gas-limits.ts: the gas snapshot plus
   * its margin); null: estimate the first trade of each kind and coin instead.
   */
  gasLimits: Record<TradeKind, bigint> | null;
  /** Why a wallet may not trade now (its pause, the wallet watch's), or undefined: refused before anything is read. */
  paused?: ((wallet: string) => Error | undefined) | undefined;
}
