import type { TradeOrder, TransactionReceipt } from "../types.js";
import type { SignedTradeTx } from "./journal.port.js";
import type { Broadcast } from "./nonce.port.js";

export interface TradeHooks {
  /**
   * Called with the signed transaction after signing and before broadcasting, under the
   * wallet's nonce lock. If it rejects, nothing is broadcast and the trade fails.
   */
  onSigned?(tx: SignedTradeTx): Promise<void>;
  /** Called once a node accepted the transaction when it was not mined at once. Not awaited. */
  onSubmitted?(): void;
}

/** A journalled trade's transactions, as `resolve` looks them up. */
export interface TradeOnChain {
  wallet: string;
  nonce: number;
  broadcasts: ReadonlyArray<Pick<Broadcast, "hash" | "noop">>;
}

/** What the chain says about a journalled trade now. */
export type TradeResolution =
  /**
   * One of its transactions is mined in the canonical chain (`receipt`, fetched now), with
   * `confirmations` (1 in the head block); `confirmed` once that is as many as the service requires.
   */
  | { state: "mined"; receipt: TransactionReceipt; confirmations: number; confirmed: boolean }
  /** Nothing of it is mined (yet). */
  | { state: "pending" }
  /** Its no-op took the nonce after its deadline: nothing was paid. */
  | { state: "expired" }
  /** A transaction the service did not sign for it took the nonce: nothing was paid. */
  | { state: "dropped" };

/**
 * Executes validated trades on a chain and resolves with the mined receipt.
 * Implementations refuse a trade that would fail (unknown wallet, missing funds,
 * a revert in a static call) with a DomainError and without sending anything, and
 * reject with TradePendingError when the receipt does not come in time (the trade's
 * lifecycle goes on in the background), or TradeExpiredError when its deadline passed.
 */
export interface TradePort {
  sell(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt>;
  buy(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt>;
  remittance(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt>;
  /** Looks a journalled trade's transactions up on the chain, without sending anything. */
  resolve(trade: TradeOnChain): Promise<TradeResolution>;
  /**
   * The chain's block time as measured lately, in ms (undefined while unknown): a trade under a
   * quote needs two of them left before the quote's expiry (minTimeLeftMs).
   */
  blockTimeMs(): number | undefined;
}
