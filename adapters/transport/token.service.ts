import type { ServiceImpl } from "@connectrpc/connect";

import type { UseCases } from "../../core/index.js";
import type {
  GetPriceRequest,
  PriceRecord,
  TokenService,
  TradeRequest,
  TransactionReceipt,
} from "../../gen/token/v1/token_pb.js";
import { priceMessage, receiptMessage, tradeInputFromMessage } from "./proto-mapping.js";

/**
 * TokenService (gRPC, Connect, gRPC-Web) over the use cases. It only translates:
 * messages in, use case, messages out. Errors propagate to the error interceptor,
 * which maps them with the one table in error-map.ts.
 */
export class TokenServiceImpl implements ServiceImpl<typeof TokenService> {
  constructor(private readonly useCases: UseCases) {}

  async sell(request: TradeRequest): Promise<TransactionReceipt> {
    return receiptMessage(await this.useCases.sell(tradeInputFromMessage(request)));
  }

  async buy(request: TradeRequest): Promise<TransactionReceipt> {
    return receiptMessage(await this.useCases.buy(tradeInputFromMessage(request)));
  }

  async remittance(request: TradeRequest): Promise<TransactionReceipt> {
    return receiptMessage(await this.useCases.remittance(tradeInputFromMessage(request)));
  }

  async getPrice(_request: GetPriceRequest): Promise<PriceRecord> {
    return priceMessage(await this.useCases.price());
  }
}
