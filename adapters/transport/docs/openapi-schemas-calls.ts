/**
 * The OpenAPI document's schemas of what the calls send and get back besides trades: the error of
 * every refusal, the quote and its request, the trade request, and the price record.
 */
import { ADDRESS, ref } from "./openapi-shared.js";

export const CALL_SCHEMAS = {
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
} as const;
