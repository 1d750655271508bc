import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";

import type { Caller, PriceRecord as PriceRecordView, UseCases } from "../../../core/index.js";
import type {
  CancelTradeRequest,
  DecideTradeRequest,
  GetPriceRequest,
  GetTradeRequest,
  GetTradeSummaryRequest,
  ListApprovalsRequest,
  ListTradesRequest,
  ListTradesResponse,
  TradeSummary,
  PriceRecord,
  QuoteRequest,
  QuoteResponse,
  SpeedUpTradeRequest,
  TokenService,
  Trade,
  TradeRequest,
  TransactionReceipt,
} from "../../../gen/tokentrade/v1/token_pb.js";
import { type AcceptedKey, callerOf, IDEMPOTENCY_KEY_HEADER, QUOTE_ID_HEADER } from "../request/index.js";
import { priceMessage, receiptMessage, tradeInputFromMessage, tradeMessage } from "./proto-mapping.js";
import { quoteInputFromMessage, quoteMessage } from "./quote-mapping.js";
import { acceptedKey } from "./request-values.js";
import {
  listTradesMessage,
  listTradesQueryFromMessage,
  summaryQueryFromMessage,
  tradeSummaryMessage,
} from "./trade-history-mapping.js";

/**
 * Who calls (the scope of its api key), the call's idempotency key (metadata `idempotency-key`),
 * and the quote a trade names (metadata `quote-id`).
 */
export interface CallContext {
  scope?: string;
  /** The caller with its access-file entry (ACCESS_FILE), for the authorize step and what reads see. */
  caller?: Caller;
  idempotencyKey?: string | undefined;
  quoteId?: string | undefined;
}

/** TokenService's methods by their local names, as plain functions of a message and a call context. */
export type TokenCalls = {
  sell(request: TradeRequest, context: CallContext): Promise<TransactionReceipt>;
  buy(request: TradeRequest, context: CallContext): Promise<TransactionReceipt>;
  remittance(request: TradeRequest, context: CallContext): Promise<TransactionReceipt>;
  getPrice(request: GetPriceRequest, context: CallContext): Promise<PriceRecord>;
  getTrade(request: GetTradeRequest, context: CallContext): Promise<Trade>;
  listTrades(request: ListTradesRequest, context: CallContext): Promise<ListTradesResponse>;
  getTradeSummary(request: GetTradeSummaryRequest, context: CallContext): Promise<TradeSummary>;
  quote(request: QuoteRequest, context: CallContext): Promise<QuoteResponse>;
  listApprovals(request: ListApprovalsRequest, context: CallContext): Promise<ListTradesResponse>;
  approveTrade(request: DecideTradeRequest, context: CallContext): Promise<Trade>;
  rejectTrade(request: DecideTradeRequest, context: CallContext): Promise<Trade>;
  cancelTrade(request: CancelTradeRequest, context: CallContext): Promise<Trade>;
  speedUpTrade(request: SpeedUpTradeRequest, context: CallContext): Promise<Trade>;
};

/**
 * TokenService over the use cases. It only translates: messages in, use case, messages out.
 * Errors propagate to the caller (the error interceptor for Connect, grpc-unary.ts for the
 * lean gRPC path), which map them with the one table in error-map.ts.
 */
export function tokenCalls(useCases: UseCases): TokenCalls {
  // The price port hands out one record for as long as it caches it: its message is made once.
  let lastPrice: { record: PriceRecordView; message: PriceRecord } | undefined;
  return {
    sell: async (request, context) => receiptMessage(await useCases.sell(tradeInputFromMessage(request), context)),
    buy: async (request, context) => receiptMessage(await useCases.buy(tradeInputFromMessage(request), context)),
    remittance: async (request, context) =>
      receiptMessage(await useCases.remittance(tradeInputFromMessage(request), context)),
    getPrice: async () => {
      const record = await useCases.price();
      if (lastPrice?.record !== record) lastPrice = { record, message: priceMessage(record) };
      return lastPrice.message;
    },
    // By its id, or by a transaction hash (one of the two: the id when both are given).
    getTrade: async (request, context) =>
      tradeMessage(
        await (request.id === ""
          ? useCases.trade(request.transactionHash, context, "transactionHash")
          : useCases.trade(request.id, context, "id")),
      ),
    listTrades: async (request, context) =>
      listTradesMessage(await useCases.trades(listTradesQueryFromMessage(request), context)),
    getTradeSummary: async (request, context) =>
      tradeSummaryMessage(await useCases.tradeSummary(summaryQueryFromMessage(request), context)),
    quote: async (request, context) => quoteMessage(await useCases.quote(quoteInputFromMessage(request), context)),
    listApprovals: async (request, context) =>
      listTradesMessage({
        ...(await useCases.approvals(
          {
            status: request.status === "" ? undefined : request.status,
            limit: request.limit === 0 ? undefined : request.limit,
            cursor: request.cursor === "" ? undefined : request.cursor,
          },
          context,
        )),
        figures: [],
      }),
    approveTrade: async (request, context) =>
      tradeMessage(await useCases.approveTrade(request.id, decisionBody(request), context)),
    rejectTrade: async (request, context) =>
      tradeMessage(await useCases.rejectTrade(request.id, decisionBody(request), context)),
    cancelTrade: async (request, context) => tradeMessage(await useCases.cancelTrade(request.id, undefined, context)),
    speedUpTrade: async (request, context) =>
      tradeMessage(
        await useCases.speedUpTrade(
          request.id,
          request.maxFeePerGasGwei === undefined ? undefined : { maxFeePerGasGwei: request.maxFeePerGasGwei },
          context,
        ),
      ),
  };
}

/** The decision's body as the JSON route takes it: the reason, when given. */
function decisionBody(request: DecideTradeRequest): { reason?: string } {
  return request.reason === undefined ? {} : { reason: request.reason };
}

/** The call context of a Connect handler: the caller's scope (from the key the pipeline accepted), and the metadata. */
function callContext(context: HandlerContext | undefined): CallContext {
  if (!context) return {};
  return {
    ...callerFields(acceptedKey(context.values)),
    idempotencyKey: context.requestHeader.get(IDEMPOTENCY_KEY_HEADER) ?? undefined,
    quoteId: context.requestHeader.get(QUOTE_ID_HEADER) ?? undefined,
  };
}

/**
 * TokenService for Connect (gRPC, Connect, gRPC-Web): tokenCalls with the context Connect
 * hands each handler.
 */
export class TokenServiceImpl implements ServiceImpl<typeof TokenService> {
  readonly #calls: TokenCalls;

  /** @param calls - the calls to serve; by default made over `useCases` */
  constructor(useCases: UseCases, calls: TokenCalls = tokenCalls(useCases)) {
    this.#calls = calls;
  }

  sell(request: TradeRequest, context?: HandlerContext): Promise<TransactionReceipt> {
    return this.#calls.sell(request, callContext(context));
  }

  buy(request: TradeRequest, context?: HandlerContext): Promise<TransactionReceipt> {
    return this.#calls.buy(request, callContext(context));
  }

  remittance(request: TradeRequest, context?: HandlerContext): Promise<TransactionReceipt> {
    return this.#calls.remittance(request, callContext(context));
  }

  getPrice(request: GetPriceRequest, context?: HandlerContext): Promise<PriceRecord> {
    return this.#calls.getPrice(request, callContext(context));
  }

  getTrade(request: GetTradeRequest, context?: HandlerContext): Promise<Trade> {
    return this.#calls.getTrade(request, callContext(context));
  }

  listTrades(request: ListTradesRequest, context?: HandlerContext): Promise<ListTradesResponse> {
    return this.#calls.listTrades(request, callContext(context));
  }

  getTradeSummary(request: GetTradeSummaryRequest, context?: HandlerContext): Promise<TradeSummary> {
    return this.#calls.getTradeSummary(request, callContext(context));
  }

  quote(request: QuoteRequest, context?: HandlerContext): Promise<QuoteResponse> {
    return this.#calls.quote(request, callContext(context));
  }

  listApprovals(request: ListApprovalsRequest, context?: HandlerContext): Promise<ListTradesResponse> {
    return this.#calls.listApprovals(request, callContext(context));
  }

  approveTrade(request: DecideTradeRequest, context?: HandlerContext): Promise<Trade> {
    return this.#calls.approveTrade(request, callContext(context));
  }

  rejectTrade(request: DecideTradeRequest, context?: HandlerContext): Promise<Trade> {
    return this.#calls.rejectTrade(request, callContext(context));
  }

  cancelTrade(request: CancelTradeRequest, context?: HandlerContext): Promise<Trade> {
    return this.#calls.cancelTrade(request, callContext(context));
  }

  speedUpTrade(request: SpeedUpTradeRequest, context?: HandlerContext): Promise<Trade> {
    return this.#calls.speedUpTrade(request, callContext(context));
  }
}

/** The scope and caller of the key the pipeline accepted; a scope of "" without one. */
function callerFields(key: AcceptedKey | undefined): { scope: string; caller?: Caller } {
  return key === undefined ? { scope: "" } : callerOf(key);
}
