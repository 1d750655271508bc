import type { PricePort } from "../ports/price.port.js";
import type { TradePort } from "../ports/trade.port.js";
import { assertTradeConfig, type TradeConfig } from "../validation/trade-request.js";
import { priceUseCase, type PriceUseCase } from "./price.use-case.js";
import { tradeUseCase, type TradeUseCase } from "./trade.use-case.js";

/** Everything the transports can ask of the domain. */
export interface UseCases {
  sell: TradeUseCase;
  buy: TradeUseCase;
  remittance: TradeUseCase;
  price: PriceUseCase;
}

export interface UseCaseDeps {
  trade: TradePort;
  price: PricePort;
  config: TradeConfig;
}

/**
 * Wires the ports into the four use cases. Called once by the composition root.
 * @throws TypeError when `config` is unusable (see assertTradeConfig)
 */
export function createUseCases({ trade, price, config }: UseCaseDeps): UseCases {
  assertTradeConfig(config);
  return {
    sell: tradeUseCase("sell", trade, config),
    buy: tradeUseCase("buy", trade, config),
    remittance: tradeUseCase("remittance", trade, config),
    price: priceUseCase(price),
  };
}
