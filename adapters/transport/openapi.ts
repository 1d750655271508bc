/**
 * The OpenAPI 3.1 document of the JSON routes (served at GET /api/v1/openapi.json, no key), the
 * routes of docs/SPEC.md as they answer: the `api_key` scheme, the `Idempotency-Key` header, the
 * web3.js 1.x receipt, and the `{"code", "message"}` error of every refusal. Its schemas are JSON
 * Schema 2020-12; test/adapters/transport/openapi.test.ts validates real answers against them,
 * so the document cannot drift from the routes unnoticed.
 */

const ADDRESS = {
  type: "string",
  pattern: "^0x[0-9a-fA-F]{40}$",
  description: "0x and 40 hex digits; mixed case must pass its EIP-55 checksum.",
} as const;
const HASH = { type: "string", pattern: "^0x[0-9a-f]{64}$" } as const;
const HEX = { type: "string", pattern: "^0x[0-9a-f]*$" } as const;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const errorResponse = (description: string) => ({
  description,
  content: { "application/json": { schema: ref("Error") } },
});

/** The error answers a trade can get (README "Errors"). */
const TRADE_ERRORS = {
  "400": errorResponse(
    "invalid_argument (a field, named in the message) or failed_precondition (funds, allowance, reserves, a revert, an expired or dropped trade). Nothing was sent.",
  ),
  "401": errorResponse("unauthenticated: missing or wrong api_key."),
  "403": errorResponse("permission_denied: userAddress is not a wallet the service signs for."),
  "404": errorResponse("not_found: the Quote-Id names no quote of this api_key's (quote_not_found). Nothing was sent."),
  "409": errorResponse(
    "aborted: the first request with this Idempotency-Key is still running, or the price moved past the quote's slippage (quote_slippage); already_exists: the quote was used by another trade (quote_used). Nothing was sent.",
  ),
  "410": errorResponse("failed_precondition: the quote expired (quote_expired). Nothing was sent."),
  "413": errorResponse("resource_exhausted: body larger than BODY_LIMIT_BYTES."),
  "415": errorResponse("invalid_argument: Content-Type is not application/json."),
  "422": errorResponse(
    "failed_precondition: Idempotency-Key reused with a different request, or the trade is not the one quoted (quote_mismatch, naming what differs).",
  ),
  "429": {
    description: "resource_exhausted: over the rate limit.",
    headers: { "Retry-After": { description: "Seconds to wait.", schema: { type: "integer", minimum: 1 } } },
    content: { "application/json": { schema: ref("Error") } },
  },
  "500": errorResponse("internal: a bug (logged with its request id)."),
  "503": errorResponse(
    "unavailable: price feed stale or broken, chain unreachable, fees above the cap, shutting down or overloaded. Nothing was sent.",
  ),
  "504": errorResponse(
    "deadline_exceeded: broadcast, no receipt within RECEIPT_TIMEOUT_MS; the message names the transaction hash. Retry with the same Idempotency-Key for the outcome.",
  ),
} as const;

const trade = (operationId: string, summary: string, description: string) => ({
  operationId,
  summary,
  description,
  tags: ["Trades"],
  parameters: [{ $ref: "#/components/parameters/IdempotencyKey" }, { $ref: "#/components/parameters/QuoteId" }],
  requestBody: { required: true, content: { "application/json": { schema: ref("TradeRequest") } } },
  responses: {
    "200": {
      description: "The mined transaction's receipt, in the web3.js 1.x shape.",
      content: { "application/json": { schema: ref("TransactionReceipt") } },
    },
    ...TRADE_ERRORS,
  },
});

export const OPENAPI_DOCUMENT = {
  openapi: "3.1.0",
  info: {
    title: "Token trading service",
    version: "1.0.0",
    description:
      "Trades one ERC-20 token against DAI, USDT and USDC, and quotes its price in CHF, EUR and USD. Every call but the probes and this document needs the `api_key` header. The same operations are served over gRPC, Connect and gRPC-Web (tokentrade.v1.TokenService) on the same port.",
  },
  servers: [{ url: "/" }],
  security: [{ api_key: [] }],
  tags: [{ name: "Trades" }, { name: "Price" }, { name: "Webhooks" }, { name: "Probes" }],
  webhooks: {
    tradeEvent: {
      post: {
        summary: "A change of a trade's state, POSTed to the api key's endpoint (WEBHOOKS_FILE)",
        description:
          "Standard Webhooks (https://www.standardwebhooks.com): verify webhook-signature (HMAC-SHA256 of webhook-id, webhook-timestamp and the body, joined by dots) with the endpoint's secret, e.g. with the standardwebhooks package; drop a webhook-id already seen. Retried until a 2xx, with backoff, for 24 hours by default; redirects are not followed.",
        tags: ["Webhooks"],
        security: [],
        parameters: [
          {
            name: "webhook-id",
            in: "header",
            required: true,
            schema: { type: "string", pattern: "^msg_[0-9a-f]{32}$" },
          },
          { name: "webhook-timestamp", in: "header", required: true, schema: { type: "string", pattern: "^[0-9]+$" } },
          { name: "webhook-signature", in: "header", required: true, schema: { type: "string" } },
        ],
        requestBody: { required: true, content: { "application/json": { schema: ref("WebhookEvent") } } },
        responses: { "2XX": { description: "Delivered; anything else is retried." } },
      },
    },
  },
  paths: {
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
          "400": errorResponse(
            "invalid_argument: a field, named in the message (as a trade's), or kind or slippageBps.",
          ),
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
        summary: "A trade's state, by any transaction hash it broadcast",
        tags: ["Trades"],
        parameters: [{ name: "transactionHash", in: "path", required: true, schema: HASH }],
        responses: {
          "200": {
            description: "The trade, as the journal knows it and the chain confirms it.",
            content: { "application/json": { schema: ref("Trade") } },
          },
          "400": errorResponse("invalid_argument: not a transaction hash."),
          "401": TRADE_ERRORS["401"],
          "404": errorResponse("not_found: no trade of this caller broadcast that hash."),
          "429": TRADE_ERRORS["429"],
        },
      },
    },
    "/api/v1/webhooks/deliveries": {
      get: {
        operationId: "webhookDeliveries",
        summary: "The caller's webhook deliveries, newest first, with each attempt",
        tags: ["Webhooks"],
        parameters: [
          { name: "status", in: "query", schema: { enum: ["pending", "delivered", "failed"] } },
          { name: "cursor", in: "query", description: "The previous page's nextCursor.", schema: { type: "string" } },
          { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 200, default: 50 } },
        ],
        responses: {
          "200": {
            description: "A page of deliveries.",
            content: { "application/json": { schema: ref("WebhookDeliveryList") } },
          },
          "400": errorResponse("invalid_argument: status, cursor or limit, named in the message."),
          "401": TRADE_ERRORS["401"],
          "429": TRADE_ERRORS["429"],
        },
      },
    },
    "/api/v1/webhooks/deliveries/{id}/retry": {
      post: {
        operationId: "retryWebhookDelivery",
        summary: "Send a failed delivery again (pending, due now, with a new retry window)",
        tags: ["Webhooks"],
        parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }],
        responses: {
          "200": {
            description: "The delivery, pending again.",
            content: { "application/json": { schema: ref("WebhookDelivery") } },
          },
          "401": TRADE_ERRORS["401"],
          "404": errorResponse("not_found: no delivery of this caller has that id."),
          "409": errorResponse("failed_precondition: the delivery is not failed."),
          "429": TRADE_ERRORS["429"],
        },
      },
    },
    "/healthz": {
      get: {
        operationId: "health",
        summary: "Liveness",
        tags: ["Probes"],
        security: [],
        responses: {
          "200": {
            description: "Alive.",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  properties: { status: { const: "ok" } },
                  required: ["status"],
                  additionalProperties: false,
                },
              },
            },
          },
        },
      },
    },
    "/readyz": {
      get: {
        operationId: "ready",
        summary: "Readiness: chain reachable, wallets funded, none stuck, swap not paused",
        tags: ["Probes"],
        security: [],
        responses: {
          "200": {
            description: "Ready.",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  properties: { status: { const: "ready" }, detail: { type: "string" } },
                  required: ["status", "detail"],
                  additionalProperties: false,
                },
              },
            },
          },
          "503": errorResponse("unavailable: why not."),
        },
      },
    },
  },
  components: {
    securitySchemes: {
      api_key: { type: "apiKey", in: "header", name: "api_key", description: "One of the service's API_KEYS." },
    },
    parameters: {
      IdempotencyKey: {
        name: "Idempotency-Key",
        in: "header",
        required: false,
        description:
          "Makes the trade safe to retry: a retry with the same key and request answers the first one's outcome and never trades twice.",
        schema: { type: "string", minLength: 1, maxLength: 255 },
      },
      QuoteId: {
        name: "Quote-Id",
        in: "header",
        required: false,
        description:
          "A quote's quoteId (POST /api/v1/token/quote): the trade must be the one quoted, and executes with its minOut and a deadline no later than its expiry, once.",
        schema: { type: "string", pattern: "^q_[0-9a-f]{32}$" },
      },
    },
    schemas: {
      Error: {
        type: "object",
        properties: {
          code: {
            type: "string",
            enum: [
              "invalid_argument",
              "unauthenticated",
              "permission_denied",
              "failed_precondition",
              "not_found",
              "already_exists",
              "unimplemented",
              "resource_exhausted",
              "aborted",
              "unavailable",
              "deadline_exceeded",
              "internal",
            ],
          },
          message: { type: "string", description: "What is wrong, naming the field." },
        },
        required: ["code", "message"],
        additionalProperties: false,
      },
      QuoteRequest: {
        type: "object",
        properties: {
          kind: { type: "string", enum: ["sell", "buy", "remittance"] },
          userAddress: { ...ADDRESS, description: "The exchange wallet; default: the service's only one." },
          destinatary: {
            ...ADDRESS,
            description: "Unset: the quote binds none (its gas is estimated paying userAddress).",
          },
          amount: { type: "string", description: "Tokens for a sell, USD for a buy or a remittance, as in a trade." },
          usdAddress: ADDRESS,
          slippageBps: { type: "integer", minimum: 0, maximum: 1000, default: 50 },
        },
        required: ["kind", "amount", "usdAddress"],
        additionalProperties: false,
      },
      QuoteAmount: {
        type: "object",
        properties: {
          value: { type: "string", pattern: "^\\d+(\\.\\d+)?$", description: "Whole units, exact." },
          baseUnits: { type: "string", pattern: "^\\d+$" },
        },
        required: ["value", "baseUnits"],
        additionalProperties: false,
      },
      QuoteIssue: {
        type: "object",
        properties: {
          type: {
            type: "string",
            enum: [
              "balance_short",
              "reserves_short",
              "trading_paused",
              "price_stale",
              "price_out_of_bounds",
              "price_unavailable",
              "fees_too_high",
              "amount_below_minimum",
              "amount_above_maximum",
            ],
          },
          message: { type: "string" },
          details: {
            type: "object",
            additionalProperties: { type: "string" },
            description: "The numbers, as exact decimal text (e.g. asset, balance, needed).",
          },
        },
        required: ["type", "message", "details"],
        additionalProperties: false,
      },
      Quote: {
        type: "object",
        properties: {
          quoteId: { type: "string", pattern: "^q_[0-9a-f]{32}$" },
          expiresAt: { type: "string", format: "date-time" },
          kind: { type: "string", enum: ["sell", "buy", "remittance"] },
          userAddress: ADDRESS,
          destinatary: { oneOf: [ADDRESS, { type: "null" }] },
          usdAddress: ADDRESS,
          slippageBps: { type: "integer", minimum: 0, maximum: 1000 },
          amountIn: ref("QuoteAmount"),
          expectedOut: ref("QuoteAmount"),
          minOut: ref("QuoteAmount"),
          price: {
            type: "object",
            properties: {
              usd: { type: "string", description: "USD per token, exact." },
              roundId: { type: "string", pattern: "^\\d+$" },
              updatedAt: { type: "string", format: "date-time" },
            },
            required: ["usd", "roundId", "updatedAt"],
            additionalProperties: false,
          },
          gas: {
            type: "object",
            properties: {
              units: { type: "string", pattern: "^\\d+$" },
              estimated: { type: "boolean", description: "False: a typical figure (the call cannot succeed now)." },
              priceWei: { type: "string", pattern: "^\\d+$" },
            },
            required: ["units", "estimated", "priceWei"],
            additionalProperties: false,
          },
          networkFee: {
            type: "object",
            properties: {
              wei: { type: "string", pattern: "^\\d+$" },
              usd: {
                type: ["string", "null"],
                pattern: "^\\d+(\\.\\d{1,6})?$",
                description:
                  "`wei` × the native coin's USD price (its Chainlink feed, read at the quote's block), rounded up to 6 decimals (a millionth of a dollar): an estimate of a cost never understates it. Null when the deployment names no native-coin feed (NATIVE_USD_FEED) or its answer is older than FEED_MAX_AGE_NATIVE_USD_S or outside FEED_BOUNDS_NATIVE_USD; that refuses no trade, so it is no issue.",
              },
            },
            required: ["wei", "usd"],
            additionalProperties: false,
          },
          issues: { type: "array", items: ref("QuoteIssue") },
        },
        required: [
          "quoteId",
          "expiresAt",
          "kind",
          "userAddress",
          "destinatary",
          "usdAddress",
          "slippageBps",
          "amountIn",
          "expectedOut",
          "minOut",
          "price",
          "gas",
          "networkFee",
          "issues",
        ],
        additionalProperties: false,
      },
      TradeRequest: {
        type: "object",
        properties: {
          userAddress: { ...ADDRESS, description: "The exchange wallet that trades (one the service signs for)." },
          destinatary: { ...ADDRESS, description: "Who receives what the trade pays out." },
          amount: {
            type: "string",
            pattern: "^[0-9]+(\\.[0-9]+)?$",
            description:
              "Decimal text: tokens (sell, 18 decimals) or USD (buy, remittance; at most the stable coin's decimals).",
          },
          usdAddress: { ...ADDRESS, description: "The stable coin: DAI, USDT or USDC." },
        },
        required: ["userAddress", "destinatary", "amount", "usdAddress"],
        additionalProperties: false,
      },
      PriceRecord: {
        type: "object",
        properties: {
          cryptoCurrency: { type: "string" },
          rateForCashCurrency: ref("Rates"),
          rateWithDiscountForCashCurrency: {
            ...ref("OptionalRates"),
            description: "Empty unless CASH_DISCOUNT_BPS is set.",
          },
        },
        required: ["cryptoCurrency", "rateForCashCurrency", "rateWithDiscountForCashCurrency"],
        additionalProperties: false,
      },
      Rates: {
        type: "object",
        properties: {
          CHF: { type: "number", exclusiveMinimum: 0 },
          EUR: { type: "number", exclusiveMinimum: 0 },
          USD: { type: "number", exclusiveMinimum: 0 },
        },
        required: ["CHF", "EUR", "USD"],
        additionalProperties: false,
      },
      OptionalRates: {
        type: "object",
        properties: {
          CHF: { type: "number", exclusiveMinimum: 0 },
          EUR: { type: "number", exclusiveMinimum: 0 },
          USD: { type: "number", exclusiveMinimum: 0 },
        },
        additionalProperties: false,
      },
      TransactionReceipt: {
        type: "object",
        description: "web3.js 1.x's receipt: numbers as numbers, `events` keyed by log position.",
        properties: {
          blockHash: HASH,
          blockNumber: { type: "integer", minimum: 0 },
          contractAddress: { type: "null" },
          cumulativeGasUsed: { type: "integer", minimum: 0 },
          effectiveGasPrice: { type: "integer", minimum: 0 },
          from: { type: "string", pattern: "^0x[0-9a-f]{40}$" },
          gasUsed: { type: "integer", minimum: 0 },
          logsBloom: { type: "string", pattern: "^0x[0-9a-f]{512}$" },
          status: { type: "boolean" },
          to: { type: "string", pattern: "^0x[0-9a-f]{40}$" },
          transactionHash: HASH,
          transactionIndex: { type: "integer", minimum: 0 },
          type: { type: "string", pattern: "^0x[0-9a-f]+$" },
          events: { type: "object", patternProperties: { "^[0-9]+$": ref("EventLog") }, additionalProperties: false },
        },
        required: [
          "blockHash",
          "blockNumber",
          "contractAddress",
          "cumulativeGasUsed",
          "effectiveGasPrice",
          "from",
          "gasUsed",
          "logsBloom",
          "status",
          "to",
          "transactionHash",
          "transactionIndex",
          "type",
          "events",
        ],
        additionalProperties: false,
      },
      EventLog: {
        type: "object",
        properties: {
          address: ADDRESS,
          blockHash: HASH,
          blockNumber: { type: "integer", minimum: 0 },
          logIndex: { type: "integer", minimum: 0 },
          removed: { type: "boolean" },
          transactionHash: HASH,
          transactionIndex: { type: "integer", minimum: 0 },
          id: { type: "string", pattern: "^log_[0-9a-f]{8}$" },
          returnValues: { type: "object" },
          signature: { type: ["string", "null"] },
          raw: {
            type: "object",
            properties: { data: HEX, topics: { type: "array", items: HASH } },
            required: ["data", "topics"],
            additionalProperties: false,
          },
        },
        required: [
          "address",
          "blockHash",
          "blockNumber",
          "logIndex",
          "removed",
          "transactionHash",
          "transactionIndex",
          "id",
          "returnValues",
          "signature",
          "raw",
        ],
        additionalProperties: false,
      },
      WebhookEvent: {
        type: "object",
        required: ["type", "timestamp", "data"],
        properties: {
          type: {
            enum: [
              "trade.submitted",
              "trade.replaced",
              "trade.mined",
              "trade.confirmed",
              "trade.reorged",
              "trade.failed",
              "trade.expired",
            ],
          },
          timestamp: { type: "string", format: "date-time", description: "When the change happened." },
          data: { ...ref("Trade"), description: "The trade right after the change (confirmations: null)." },
        },
      },
      WebhookDelivery: {
        type: "object",
        required: ["id", "type", "tradeId", "transactionHash", "status", "createdAt", "nextAttemptAt", "attempts"],
        additionalProperties: false,
        properties: {
          id: { type: "string", description: "The webhook-id every attempt carried." },
          type: { type: "string" },
          tradeId: { type: "string" },
          transactionHash: { oneOf: [HASH, { type: "null" }] },
          status: { enum: ["pending", "delivered", "failed"] },
          createdAt: { type: "string", format: "date-time" },
          nextAttemptAt: { type: ["string", "null"], format: "date-time" },
          attempts: {
            type: "array",
            items: {
              type: "object",
              required: ["at", "statusCode", "error"],
              additionalProperties: false,
              properties: {
                at: { type: "string", format: "date-time" },
                statusCode: { type: ["integer", "null"], description: "The receiver's HTTP status; null: no answer." },
                error: { type: ["string", "null"] },
              },
            },
          },
        },
      },
      WebhookDeliveryList: {
        type: "object",
        required: ["deliveries", "nextCursor"],
        additionalProperties: false,
        properties: {
          deliveries: { type: "array", items: ref("WebhookDelivery") },
          nextCursor: { type: ["string", "null"] },
        },
      },
      Trade: {
        type: "object",
        properties: {
          id: { type: "string" },
          kind: { enum: ["sell", "buy", "remittance"] },
          status: { enum: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "expired"] },
          request: ref("TradeRequest"),
          wallet: { type: ["string", "null"] },
          nonce: { type: ["integer", "null"], minimum: 0 },
          deadline: { type: ["integer", "null"], description: "Unix seconds after which the trade cannot execute." },
          transactionHash: { oneOf: [HASH, { type: "null" }] },
          transactions: {
            type: "array",
            items: {
              type: "object",
              properties: {
                hash: HASH,
                maxFeePerGas: { type: "string", pattern: "^[0-9]+$", description: "wei" },
                maxPriorityFeePerGas: { type: "string", pattern: "^[0-9]+$", description: "wei" },
                noop: { type: "boolean" },
                sentAt: { type: "string", format: "date-time" },
              },
              required: ["hash", "maxFeePerGas", "maxPriorityFeePerGas", "noop", "sentAt"],
              additionalProperties: false,
            },
          },
          confirmations: { type: ["integer", "null"], minimum: 0 },
          receipt: { oneOf: [ref("TransactionReceipt"), { type: "null" }] },
          error: {
            oneOf: [
              {
                type: "object",
                properties: { code: { type: "string" }, message: { type: "string" } },
                required: ["code", "message"],
                additionalProperties: false,
              },
              { type: "null" },
            ],
          },
          createdAt: { type: "string", format: "date-time" },
          updatedAt: { type: "string", format: "date-time" },
        },
        required: [
          "id",
          "kind",
          "status",
          "request",
          "wallet",
          "nonce",
          "deadline",
          "transactionHash",
          "transactions",
          "confirmations",
          "receipt",
          "error",
          "createdAt",
          "updatedAt",
        ],
        additionalProperties: false,
      },
      TradeList: {
        type: "object",
        properties: {
          trades: { type: "array", items: ref("Trade") },
          nextCursor: { type: ["string", "null"], description: "The next page's cursor; null on the last page." },
        },
        required: ["trades", "nextCursor"],
        additionalProperties: false,
      },
      Amount: {
        type: "object",
        properties: {
          value: {
            type: ["string", "null"],
            pattern: "^[0-9]+(\\.[0-9]+)?$",
            description: "Decimal text in the coin's units; null when the coin is no longer configured.",
          },
          baseUnits: { type: "string", pattern: "^[0-9]+$" },
        },
        required: ["value", "baseUnits"],
        additionalProperties: false,
      },
      TradeSummary: {
        type: "object",
        properties: {
          since: { type: ["string", "null"], format: "date-time" },
          until: { type: ["string", "null"], format: "date-time" },
          groups: {
            type: "array",
            items: {
              type: "object",
              properties: {
                kind: { enum: ["sell", "buy", "remittance"] },
                usdAddress: { type: "string", pattern: "^0x[0-9a-f]{40}$" },
                stableSymbol: { type: ["string", "null"] },
                count: { type: "integer", minimum: 0, description: "Trades in the range, in any status." },
                executed: { type: "integer", minimum: 0, description: "Of them, mined or confirmed." },
                amountIn: { ...ref("Amount"), description: "Tokens for a sell, the stable coin otherwise." },
                amountOut: { ...ref("Amount"), description: "The stable coin for a sell, tokens otherwise." },
                gasWei: { type: "string", pattern: "^[0-9]+$" },
                gasUsd: {
                  type: ["string", "null"],
                  pattern: "^\\d+(\\.\\d+)?$",
                  description:
                    "Gas spent in USD at the time of each trade: each executed trade's gasUsed × effectiveGasPrice × the native coin's USD price the service read when it signed it, summed exactly (every digit, nothing rounded). Null when any executed trade of the group has no such price (signed before the deployment named a native-coin feed, or while its answer failed the feed policy); \"0\" when none executed.",
                },
              },
              required: [
                "kind",
                "usdAddress",
                "stableSymbol",
                "count",
                "executed",
                "amountIn",
                "amountOut",
                "gasWei",
                "gasUsd",
              ],
              additionalProperties: false,
            },
          },
        },
        required: ["since", "until", "groups"],
        additionalProperties: false,
      },
    },
  },
} as const;

/** The document as served: serialised once. */
export const OPENAPI_JSON = JSON.stringify(OPENAPI_DOCUMENT);
