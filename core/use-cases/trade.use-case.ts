import type { TradePort } from "../ports/trade.port.js";
import type { TradeKind, TransactionReceipt } from "../types.js";
import { parseTradeRequest, type TradeConfig } from "../validation/trade-request.js";

/** A trade operation as the transports call it: raw body in, receipt out. */
export type TradeUseCase = (input: unknown) => Promise<TransactionReceipt>;

/**
 * Builds the use case for one trade operation (sell, buy or remittance): validate the
 * request, then hand the order to the port. Invalid input rejects with
 * InvalidArgumentError and the port is not called; the port's errors propagate unchanged.
 */
export function tradeUseCase(kind: TradeKind, trade: TradePort, config: TradeConfig): TradeUseCase {
  return async (input) => {
    const order = parseTradeRequest(kind, input, config);
    return trade[kind](order);
  };
}
