import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";

import type { UseCases } from "../../core/index.js";
import type {
  GetPriceRequest,
  GetTradeRequest,
  PriceRecord,
  TokenService,
  Trade,
  TradeRequest,
  TransactionReceipt,
} from "../../gen/tokentrade/v1/token_pb.js";
import { kCallerScope } from "./api-key.interceptor.js";
import { IDEMPOTENCY_KEY_HEADER } from "./json-routes.js";
import { priceMessage, receiptMessage, tradeInputFromMessage, tradeMessage } from "./proto-mapping.js";

/** Who calls, and the idempotency key of the call (gRPC metadata `idempotency-key`). */
function tradeContext(context: HandlerContext | undefined) {
  if (!context) return {};
  return { scope: context.values.get(kCallerScope), idempotencyKey: context.requestHeader.get(IDEMPOTENCY_KEY_HEADER) ?? undefined };
}

/**
 * TokenService (gRPC, Connect, gRPC-Web) over the use cases. It only translates:
 * messages in, use case, messages out. Errors propagate to the error interceptor,
 * which maps them with the one table in error-map.ts.
 */
export class TokenServiceImpl implements ServiceImpl<typeof TokenService> {
  constructor(private readonly useCases: UseCases) {}

  async sell(request: TradeRequest, context?: HandlerContext): Promise<TransactionReceipt> {
    return receiptMessage(await this.useCases.sell(tradeInputFromMessage(request), tradeContext(context)));
  }

  async buy(request: TradeRequest, context?: HandlerContext): Promise<TransactionReceipt> {
    return receiptMessage(await this.useCases.buy(tradeInputFromMessage(request), tradeContext(context)));
  }

  async remittance(request: TradeRequest, context?: HandlerContext): Promise<TransactionReceipt> {
    return receiptMessage(await this.useCases.remittance(tradeInputFromMessage(request), tradeContext(context)));
  }

  async getPrice(_request: GetPriceRequest): Promise<PriceRecord> {
    return priceMessage(await this.useCases.price());
  }

  async getTrade(request: GetTradeRequest, context?: HandlerContext): Promise<Trade> {
    return tradeMessage(await this.useCases.trade(request.transactionHash, tradeContext(context)));
  }
}
