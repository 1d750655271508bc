/**
 * What the service watches besides its trades: every transaction mined from an exchange wallet
 * (one it never signed is a security event, and may pause the wallet), and the wallets'
 * balances and the swap's reserves against their thresholds (an alarm raised below one, cleared
 * at 120 % of it). The journal keeps what must hold across instances and restarts: each outside
 * transaction once, the wallets paused, the alarms raised; and writes each event about them to
 * the webhook outbox in the same transaction, for the keys that watch everything.
 *
 * Who receives such an event is decided where it is written, from what the journal holds: every
 * scope a live webhook registration marks a watcher (WebhookOutbox.registerWebhookScopes'
 * `watchers`: the keys with an endpoint whose `sees` holds "*", and the admins). Its delivery has
 * no trade (`tradeId` null) and carries `data`, the wallet's or the swap's state.
 */
import type { AuditEntry, AuditValue } from "./audit.port.js";

/** The events about a wallet or the swap, in the Standard Webhooks `type` field (docs/SPEC.md §10.3). */
export const WATCH_EVENT_TYPES = [
  "wallet.outside_transaction",
  "wallet.balance_low",
  "wallet.balance_ok",
  "swap.reserves_low",
  "swap.reserves_ok",
] as const;

export type WatchEventType = (typeof WATCH_EVENT_TYPES)[number];

/** A JSON value an event's data holds: amounts as decimal strings, so every storage keeps them exactly. */
export type WatchData = { readonly [key: string]: AuditValue };

/** An event about a wallet or the swap, as it is written to the outbox. */
export interface WatchEvent {
  type: WatchEventType;
  /**
   * What it is about, lower case: the wallet's address, or `swap:<symbol>` for the swap's
   * reserves of one coin. One subject's events reach each receiver in the order written.
   */
  subject: string;
  /** The state it reports: the webhook body's `data`. */
  data: WatchData;
  at: Date;
}

/** A transaction mined from an exchange wallet that none of the journal's nonce slots holds. */
export interface OutsideTransaction {
  /** Lower case. */
  wallet: string;
  nonce: number;
  /** Lower case; null when it could not be found in the blocks read (only its nonce was seen used). */
  hash: string | null;
  /** Lower case; null for a contract creation, or when the transaction was not found. */
  to: string | null;
  /** Wei; null when the transaction was not found. */
  value: bigint | null;
  /** The block it was mined in, or the first block its nonce was seen used at. */
  blockNumber: number;
}

/** A wallet no trade is signed from until an admin resumes it (OUTSIDE_TX_POLICY=pause). */
export interface WalletPause {
  /** Lower case. */
  wallet: string;
  since: Date;
  /** The outside transaction that paused it: its nonce, and its hash when known. */
  nonce: number;
  hash: string | null;
}

/**
 * Where the watch left a wallet on one chain: its next nonce, every nonce below it explained (a
 * slot of the journal's mined as it holds it, or an outside transaction recorded), as of a block.
 * Kept across restarts, so that what the wallet did while no instance ran is looked at when one
 * starts again.
 */
export interface WatchedNonce {
  chainId: number;
  nonce: number;
  block: number;
}

/** The watch's part of the journal (memory, SQLite, PostgreSQL). */
export interface WatchJournal {
  /**
   * Records `tx` once, by its wallet and nonce: in one transaction, `event` written for every
   * watcher scope, `audit` appended, and the wallet paused when `pause` (unless it already is).
   * Resolves false, writing nothing, when it was recorded before (by this instance or another).
   */
  recordOutsideTransaction(
    tx: OutsideTransaction,
    event: WatchEvent,
    audit: AuditEntry,
    pause: boolean,
  ): Promise<boolean>;
  /**
   * Raises (`raised`) or clears the alarm `name`, writing `event` for every watcher scope in the
   * same transaction, only when that changes its state. Resolves whether it did.
   */
  setWatchAlarm(name: string, raised: boolean, event: WatchEvent): Promise<boolean>;
  /** The names of the alarms raised now. */
  watchAlarms(): Promise<string[]>;
  /** The hashes among `hashes` (lower case) that no slot of `wallet` holds a broadcast of. */
  unknownTransactions(wallet: string, hashes: readonly string[]): Promise<string[]>;
  /** The wallets paused now. */
  walletPauses(): Promise<WalletPause[]>;
  /**
   * Ends `wallet`'s pause, appending `audit` in the same write. Resolves the pause it ended, or
   * undefined (nothing written) when the wallet was not paused.
   */
  resumeWallet(wallet: string, audit: AuditEntry): Promise<WalletPause | undefined>;
  /** Where the watch left `wallet` (lower case) on chain `chainId`, or undefined when it never read it there. */
  watchedNonce(wallet: string, chainId: number): Promise<WatchedNonce | undefined>;
  /**
   * Keeps where the watch left `wallet` on `at.chainId`: only forward (an instance whose reading is
   * behind another's never takes it back), unless `back` (the chain's nonce is below what was
   * kept: a chain started again under the same id).
   */
  saveWatchedNonce(wallet: string, at: WatchedNonce, back?: boolean): Promise<void>;
}
