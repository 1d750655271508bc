/**
 * The OpenAPI document's paths for trading and reading trades: the three trades, the quote, the
 * price, the trade history and its summary, and a trade by its transaction hash.
 */
import { HASH, TRADE_ERRORS, errorResponse, ref, trade } from "./openapi-shared.js";

export const TRADE_PATHS = {
  "/api/v1/token/sell": {
    post: trade(
      "sell",
      "Sell tokens for a stable coin",
      "The exchange wallet (userAddress) sends `amount` tokens (18 decimals) to the swap; destinatary receives the stable coin at usdAddress. The receipt has five logs.",
    ),
  },
  "/api/v1/token/buy": {
    post: trade(
      "buy",
      "Buy tokens with a USD amount",
      "The exchange wallet pays `amount` USD of the stable coin at usdAddress; destinatary receives the tokens. Three logs.",
    ),
  },
  "/api/v1/remmitance": {
    post: trade(
      "remittance",
      "Remit a USD amount as tokens",
      "As buy, for a remittance (the SPEC's spelling; /api/v1/remittance is an alias). Three logs.",
    ),
  },
  "/api/v1/token/quote": {
    post: {
      operationId: "quote",
      summary: "What a trade would pay out now, and what stands in its way",
      description:
        "Reads the chain, sends nothing. `expectedOut` is what the trade pays at the feed round named in `price`, to the base unit, as the swap computes it; `minOut` is that less `slippageBps` (default 50, at most 1000), rounded down. A trade that names `quoteId` in its Quote-Id header before `expiresAt` (QUOTE_TTL_MS, 30 s by default) executes with `minOut` as its minimum and a deadline no later than `expiresAt`, once. `issues` lists why a trade would be refused now, with the numbers; a quote with issues is still 200. `networkFee.usd` is the fee at the native coin's USD feed, rounded up to a millionth of a dollar; null without that feed, or when its answer is stale.",
      tags: ["Trades"],
      requestBody: { required: true, content: { "application/json": { schema: ref("QuoteRequest") } } },
      responses: {
        "200": { description: "The quote.", content: { "application/json": { schema: ref("Quote") } } },
        "400": errorResponse("invalid_argument: a field, named in the message (as a trade's), or kind or slippageBps."),
        "401": TRADE_ERRORS["401"],
        "403": TRADE_ERRORS["403"],
        "413": TRADE_ERRORS["413"],
        "415": TRADE_ERRORS["415"],
        "429": TRADE_ERRORS["429"],
        "500": TRADE_ERRORS["500"],
        "503": errorResponse("unavailable: the chain is unreachable."),
      },
    },
  },
  "/api/v1/token/price": {
    get: {
      operationId: "price",
      summary: "The token's rate in CHF, EUR and USD",
      tags: ["Price"],
      responses: {
        "200": { description: "The rates.", content: { "application/json": { schema: ref("PriceRecord") } } },
        "401": TRADE_ERRORS["401"],
        "429": TRADE_ERRORS["429"],
        "503": errorResponse("unavailable: a feed is stale, out of its bounds, or the chain is unreachable."),
      },
    },
  },
  "/api/v1/trades": {
    get: {
      operationId: "listTrades",
      summary: "The caller's trades, newest first, a page at a time",
      description:
        "Only the trades sent with the caller's api_key, each as GET /api/v1/trades/{transactionHash} shows it, read from the journal (confirmations null). Pass nextCursor as `cursor` for the next page: pages stay exact while new trades arrive. With `Accept: text/csv` the same page comes as CSV (RFC 4180, a header line, one trade a line, amounts as decimal strings), the next page's URL in a `Link: <...>; rel=\"next\"` header.",
      tags: ["Trades"],
      parameters: [
        {
          name: "status",
          in: "query",
          schema: { enum: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "expired"] },
        },
        { name: "kind", in: "query", schema: { enum: ["sell", "buy", "remittance"] } },
        {
          name: "since",
          in: "query",
          description: "createdAt at or after this: ISO 8601 date, or date-time with a time zone.",
          schema: { type: "string" },
        },
        {
          name: "until",
          in: "query",
          description: "createdAt before this (same format).",
          schema: { type: "string" },
        },
        { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 500, default: 50 } },
        {
          name: "cursor",
          in: "query",
          description: "A previous page's nextCursor, as it came.",
          schema: { type: "string" },
        },
      ],
      responses: {
        "200": {
          description: "A page of trades.",
          headers: {
            Link: {
              description: 'CSV only: the next page, `<url>; rel="next"`; absent on the last page.',
              schema: { type: "string" },
            },
          },
          content: {
            "application/json": { schema: ref("TradeList") },
            "text/csv": {
              schema: {
                type: "string",
                description:
                  "Columns: id, createdAt, updatedAt, kind, status, userAddress, destinatary, usdAddress, stableSymbol, amount, amountIn, amountOut, gasWei, transactionHash, wallet, nonce, blockNumber, errorCode, errorMessage.",
              },
            },
          },
        },
        "400": errorResponse("invalid_argument: a query parameter, named in the message."),
        "401": TRADE_ERRORS["401"],
        "429": TRADE_ERRORS["429"],
      },
    },
  },
  "/api/v1/trades/summary": {
    get: {
      operationId: "tradeSummary",
      summary: "The caller's totals per kind and stable coin over [since, until)",
      tags: ["Trades"],
      parameters: [
        { name: "since", in: "query", description: "ISO 8601; open when absent.", schema: { type: "string" } },
        {
          name: "until",
          in: "query",
          description: "ISO 8601, excluded; open when absent.",
          schema: { type: "string" },
        },
      ],
      responses: {
        "200": {
          description: "Exact totals: counts, amounts in and out of the executed trades, gas in wei.",
          content: { "application/json": { schema: ref("TradeSummary") } },
        },
        "400": errorResponse("invalid_argument: since or until, named in the message."),
        "401": TRADE_ERRORS["401"],
        "429": TRADE_ERRORS["429"],
      },
    },
  },
  "/api/v1/trades/{transactionHash}": {
    get: {
      operationId: "trade",
      summary: "A trade's state, by its id or any transaction hash it broadcast",
      description: "The path takes the trade's id (a UUID: a trade held for an approval has no hash yet) or a hash.",
      tags: ["Trades"],
      parameters: [
        {
          name: "transactionHash",
          in: "path",
          required: true,
          description: "A transaction hash the trade broadcast, or the trade's id.",
          schema: { oneOf: [HASH, { type: "string", format: "uuid" }] },
        },
      ],
      responses: {
        "200": {
          description: "The trade, as the journal knows it and the chain confirms it.",
          content: { "application/json": { schema: ref("Trade") } },
        },
        "400": errorResponse("invalid_argument: neither a transaction hash nor a trade's id."),
        "401": TRADE_ERRORS["401"],
        "404": errorResponse("not_found: no trade of this caller has that id or broadcast that hash."),
        "429": TRADE_ERRORS["429"],
      },
    },
  },
} as const;
