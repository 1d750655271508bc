import type { TradeJournal } from "../ports/journal.port.js";
import type { PricePort } from "../ports/price.port.js";
import type { TradePort } from "../ports/trade.port.js";
import { assertTradeConfig, type TradeConfig } from "../validation/trade-request.js";
import { priceUseCase, type PriceUseCase } from "./price.use-case.js";
import { TradeSettlement } from "./settlement.js";
import { tradeUseCase, type TradeUseCase } from "./trade.use-case.js";

/** Everything the transports can ask of the domain. */
export interface UseCases {
  sell: TradeUseCase;
  buy: TradeUseCase;
  remittance: TradeUseCase;
  price: PriceUseCase;
  /** Settles the trades a previous run left signed but unconfirmed (call once at start). */
  recover(): Promise<number>;
  /** Stops background settlement. */
  close(): Promise<void>;
}

export interface UseCaseDeps {
  trade: TradePort;
  price: PricePort;
  config: TradeConfig;
  /** The durable trade journal; without it trades are not recorded and Idempotency-Key is refused. */
  journal?: TradeJournal;
  /** How long a retry waits for the first request with its key (default 10 s). */
  inFlightWaitMs?: number;
  /** How often unsettled trades are looked up on the chain (default 1 s). */
  settlementPollMs?: number;
}

/**
 * Wires the ports into the use cases. Called once by the composition root.
 * @throws TypeError when `config` is unusable (see assertTradeConfig)
 */
export function createUseCases({ trade, price, config, journal, inFlightWaitMs = 10_000, settlementPollMs = 1000 }: UseCaseDeps): UseCases {
  assertTradeConfig(config);
  const settlement = journal ? new TradeSettlement(journal, trade, settlementPollMs) : undefined;
  const journalling = journal && settlement ? { journal, settlement, inFlightWaitMs } : undefined;
  return {
    sell: tradeUseCase("sell", trade, config, journalling),
    buy: tradeUseCase("buy", trade, config, journalling),
    remittance: tradeUseCase("remittance", trade, config, journalling),
    price: priceUseCase(price),
    recover: async () => (settlement ? settlement.recover() : 0),
    close: async () => settlement?.close(),
  };
}
