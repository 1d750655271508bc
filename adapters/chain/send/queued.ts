/**
 * What the send queue (send-queue.ts) carries: a transaction to send (Outgoing) and what its
 * sender gets back (Sent), and, within a round, each one queued, signed, and how its send came out.
 */
import type { SignedTradeTx } from "../../../core/index.js";
import type { Fees, RpcReceipt } from "../blocks/index.js";

export interface Outgoing {
  to: string;
  data: string;
  gasLimit: bigint;
  /** The EIP-1559 fees it is signed with: those its sender checked against the cap (fees.ts). */
  fees: Fees;
  /** Unix seconds after which the call reverts (the calldata's deadline), recorded with it; null: none. */
  deadline: number | null;
  /**
   * Records the signed transaction before it is broadcast (a trade's journal record and slot, or
   * an approval's slot in the ledger); if it throws, nothing is sent and the nonce goes to the next.
   */
  onSigned: (tx: SignedTradeTx) => Promise<void>;
  /**
   * Checked before it is signed again at another nonce, past someone else's transaction mined at
   * its first one (which may have changed what it finds: a balance, an allowance, the time left,
   * the fees): if it throws, it is not signed again and its sender gets the error, nothing sent;
   * the fees it answers, checked against the cap again, are what it is signed with.
   */
  recheck?: () => Promise<Fees>;
}

/** A transaction the node accepted. */
export interface Sent {
  hash: string;
  nonce: number;
  /**
   * Its receipt, when the node had mined it by the end of the send's batch (automine, or a
   * block that closed meanwhile); null otherwise: then it is waited for (receipts.ts).
   */
  receipt: RpcReceipt | null;
  /** False when no node was seen to take it (its send failed ambiguously and no endpoint knows it yet). */
  known: boolean;
}

/** A transaction waiting in the queue, and its sender's promise. */
export interface Queued {
  tx: Outgoing;
  resolve: (sent: Sent) => void;
  reject: (error: unknown) => void;
  /** Signed again already after its nonce was found taken: a second time, the monitor decides. */
  retried: boolean;
  /** Its hashes the watcher was told to expect, while nobody else is to release them. */
  expected: string[];
}

/** A queued transaction signed at its nonce, within a round. */
export interface Signed {
  item: Queued;
  nonce: number;
  rawTx: string;
  txHash: string;
}

/**
 * An outcome of one send in a round. An error is `definite` when the node answered the call
 * itself (it refused this transaction); a failed request may have reached the node, or not.
 * `unsent`: not tried, because one before it failed.
 */
export type Outcome =
  | { accepted: true; receipt: RpcReceipt | null }
  | { error: Error; definite: boolean }
  | { unsent: true };
