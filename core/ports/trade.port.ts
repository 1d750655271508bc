import type { TradeOrder, TransactionReceipt } from "../types.js";

/** A signed trade transaction, as the journal records it before broadcast. */
export interface SignedTrade {
  wallet: string;
  nonce: number;
  txHash: string;
  rawTx: string;
}

export interface TradeHooks {
  /**
   * Called with the signed transaction after signing and before broadcasting, under the
   * wallet's nonce lock. If it rejects, nothing is broadcast and the trade fails.
   */
  onSigned?(tx: SignedTrade): Promise<void>;
}

/** What the chain says about a transaction the journal recorded. */
export type TradeResolution =
  | { state: "mined"; receipt: TransactionReceipt }
  | { state: "pending" }
  /** Never to be mined: another mined transaction took its nonce, so nothing was paid. */
  | { state: "dropped" };

/**
 * Executes validated trades on a chain and resolves with the mined receipt.
 * Implementations refuse a trade that would fail (unknown wallet, missing funds,
 * a revert in a static call) with a DomainError and without sending anything, and
 * reject with TradePendingError when the receipt does not come in time.
 */
export interface TradePort {
  sell(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt>;
  buy(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt>;
  remittance(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt>;
  /** Looks a recorded transaction up on the chain, without resending it. */
  resolve(tx: SignedTrade): Promise<TradeResolution>;
}
