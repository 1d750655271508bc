import type { TradeKind, TradeRequest, TransactionReceipt } from "../types.js";

/**
 * Lifecycle of a journalled trade:
 * - `accepted`: validated and recorded, nothing signed yet;
 * - `signed`: its transaction is signed and recorded (wallet, nonce, hash) and is about to be,
 *   or has been, broadcast; only the chain can tell which;
 * - `confirmed`: mined, with its receipt;
 * - `failed`: refused or reverted, with the error.
 */
export type TradeStatus = "accepted" | "signed" | "confirmed" | "failed";

export interface TradeRecord {
  id: string;
  /** Who sent it: a hash of the api key, never the key. Idempotency keys are scoped by it. */
  scope: string;
  idempotencyKey: string | null;
  /** Hash of the kind and the request body, to tell a retry from a different request under the same key. */
  requestHash: string;
  kind: TradeKind;
  request: TradeRequest;
  status: TradeStatus;
  wallet: string | null;
  nonce: number | null;
  txHash: string | null;
  /** The signed transaction, hex. */
  rawTx: string | null;
  receipt: TransactionReceipt | null;
  error: { code: string; message: string } | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewTrade {
  scope: string;
  idempotencyKey: string | null;
  requestHash: string;
  kind: TradeKind;
  request: TradeRequest;
}

/**
 * The durable trade journal. Every accepted trade is recorded before its transaction
 * is broadcast, so a crash never loses track of money that left the wallet.
 * Implementations: SQLite (one process) and PostgreSQL (several instances sharing one
 * journal and one nonce sequence per wallet).
 */
/** How many nonces a `withNonce` send used (from its nonce on), or null to resync from the chain. */
export type NoncesConsumed<T> = (result: T) => number | null;

export interface TradeJournal {
  /**
   * Records a new trade, or, when (scope, idempotencyKey) already exists, returns that record
   * instead. Atomic across instances: of two concurrent opens with one key, exactly one creates.
   * A null idempotencyKey always creates.
   */
  open(trade: NewTrade): Promise<{ created: boolean; record: TradeRecord }>;
  /** `accepted` → `signed`. Written (and durable) before the transaction is broadcast. */
  markSigned(id: string, tx: { wallet: string; nonce: number; txHash: string; rawTx: string }): Promise<void>;
  /** → `confirmed` with its receipt. */
  markConfirmed(id: string, receipt: TransactionReceipt): Promise<void>;
  /** → `failed` with the error. */
  markFailed(id: string, error: { code: string; message: string }): Promise<void>;
  /** Deletes a trade refused before anything was signed, so a retry with its key runs afresh. */
  discard(id: string): Promise<void>;
  get(id: string): Promise<TradeRecord | undefined>;
  /** Trades signed but neither confirmed nor failed: resolved from the chain at start-up. */
  unresolved(): Promise<TradeRecord[]>;
  /**
   * Runs `send(nonce)` holding the wallet's nonce lock (across every instance sharing the
   * journal). The nonce is the stored next nonce, or `chainNonce()` when none is stored.
   * When `send` resolves, the stored next nonce becomes nonce + 1; when it throws, the stored
   * nonce is cleared, so the next call resyncs from the chain. Nothing is ever skipped.
   *
   * A `send` that broadcasts several transactions (nonce, nonce + 1, …) says how many it
   * used through `consumed(result)`: the stored next nonce becomes nonce + that count, or is
   * cleared when it answers null (some went out and some did not: only the chain knows).
   */
  withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>, consumed?: NoncesConsumed<T>): Promise<T>;
  close(): Promise<void>;
}
