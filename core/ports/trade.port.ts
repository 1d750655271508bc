import type { TradeOrder, TransactionReceipt } from "../types.js";

/**
 * Executes validated trades on a chain and resolves with the mined receipt.
 * Implementations refuse a trade that would fail (unknown wallet, missing funds,
 * a revert in a static call) with a DomainError and without sending anything.
 */
export interface TradePort {
  sell(order: TradeOrder): Promise<TransactionReceipt>;
  buy(order: TradeOrder): Promise<TransactionReceipt>;
  remittance(order: TradeOrder): Promise<TransactionReceipt>;
}
