import { InvalidArgumentError } from "../errors.js";
import type { TradeJournal } from "../ports/journal.port.js";
import type { PricePort } from "../ports/price.port.js";
import type { TradePort } from "../ports/trade.port.js";
import { assertTradeConfig, type TradeConfig } from "../validation/trade-request.js";
import { priceUseCase, type PriceUseCase } from "./price.use-case.js";
import { tradeStatusUseCase, type TradeStatusUseCase } from "./trade-status.use-case.js";
import { tradeUseCase, type TradeUseCase } from "./trade.use-case.js";

/** Everything the transports can ask of the domain. */
export interface UseCases {
  sell: TradeUseCase;
  buy: TradeUseCase;
  remittance: TradeUseCase;
  price: PriceUseCase;
  /** A trade by any hash it broadcast, as the journal knows it. */
  trade: TradeStatusUseCase;
}

export interface UseCaseDeps {
  trade: TradePort;
  price: PricePort;
  config: TradeConfig;
  /** The durable trade journal; without it trades are not recorded and Idempotency-Key is refused. */
  journal?: TradeJournal;
  /** How long a retry waits for the first request with its key (default 10 s). */
  inFlightWaitMs?: number;
}

/**
 * Wires the ports into the use cases. Called once by the composition root.
 * @throws TypeError when `config` is unusable (see assertTradeConfig)
 */
export function createUseCases({ trade, price, config, journal, inFlightWaitMs = 10_000 }: UseCaseDeps): UseCases {
  assertTradeConfig(config);
  const journalling = journal ? { journal, inFlightWaitMs } : undefined;
  return {
    sell: tradeUseCase("sell", trade, config, journalling),
    buy: tradeUseCase("buy", trade, config, journalling),
    remittance: tradeUseCase("remittance", trade, config, journalling),
    price: priceUseCase(price),
    trade: journal
      ? tradeStatusUseCase(journal, trade)
      : async () => {
          throw new InvalidArgumentError(
            "transactionHash",
            "trades cannot be looked up: this service runs without a trade journal",
          );
        },
  };
}
