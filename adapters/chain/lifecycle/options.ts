/**
 * What the lifecycle monitor (monitor.ts) is given: its settings, where it logs, and the wallet,
 * chain, journal, fees and receipts it works with; and what its steps (replace.ts, settle.ts)
 * are given of it.
 */
import type { JsonRpcApiProvider } from "ethers";

import type { NonceLedger, TradeJournal } from "../../../core/index.js";
import type { FeeOracle, Receipts } from "../blocks/index.js";
import type { TransactionSigner } from "../tx/index.js";

/** What the monitor tells the operator: one line per action (pino's Logger fits). */
export interface LifecycleLog {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

export interface LifecycleSettings {
  /** Confirmations a trade needs to count as confirmed (1 = on inclusion, as web3.js `send()` answers). */
  confirmations: number;
  /** How deep (in blocks) a mined transaction is watched for reorgs before it counts as final. */
  reorgDepth: number;
  /** How long a transaction may stay unmined before it is replaced; doubles with each broadcast at its nonce. */
  resubmitAfterMs: number;
  /** How often the monitor looks, in ms. */
  intervalMs: number;
  /** How long a monitor's lease lasts unrenewed; another instance takes the wallet over after it. */
  leaseMs: number;
  /** The highest maxFeePerGas of a trade or a replacement, in wei. */
  feeCap: bigint;
  /** A broadcast younger than this is left alone: it may still be on its way to the node. */
  minAgeMs: number;
}

export interface WalletMonitorOptions {
  signer: TransactionSigner;
  chainId: bigint;
  provider: JsonRpcApiProvider;
  journal: TradeJournal & NonceLedger;
  fees: FeeOracle;
  receipts: Receipts;
  settings: LifecycleSettings;
  log: LifecycleLog;
  /** This instance's name in leases. */
  holder: string;
  /**
   * The wallet's send queue in this process: when each of its sends was answered (null while
   * on its way). A broadcast's age counts from there, not from when it was journalled.
   */
  sends?: { sentAt(nonce: number): number | null | undefined };
  /**
   * How long a nonce that every answering endpoint says was taken waits for the endpoints that
   * do not answer before it counts as lost without them, in ms. Default 600,000 (ten minutes).
   */
  silentEndpointGraceMs?: number;
  /**
   * The chain's block time as measured (block-times.ts), in ms, or undefined before it is known: a
   * speed-up needs two blocks before the trade's deadline (minTimeLeftMs), as a new trade does.
   */
  blockTimeMs?: () => number | undefined;
}

/** What the monitor's steps need of it: its options and its wallet's address. */
export interface MonitorContext {
  readonly opts: WalletMonitorOptions;
  readonly wallet: string;
}
