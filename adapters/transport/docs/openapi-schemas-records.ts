/**
 * The OpenAPI document's schemas of the records the service keeps and hands out: the web3.js
 * receipt and its logs, the trade as the journal has it, the webhook event and deliveries, and the
 * trade history's page and summary.
 */
import { WATCH_EVENT_ENUM } from "./openapi-paths-wallets.js";
import { ADDRESS, HASH, HEX, ref } from "./openapi-shared.js";

export const RECORD_SCHEMAS = {
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
          ...WATCH_EVENT_ENUM,
        ],
      },
      timestamp: { type: "string", format: "date-time", description: "When the change happened." },
      data: {
        oneOf: [ref("Trade"), ref("WatchEventData")],
        description:
          "A trade's event: the trade right after the change (confirmations: null). An event about a wallet or the swap: its state.",
      },
    },
  },
  WebhookDelivery: {
    type: "object",
    required: ["id", "type", "tradeId", "transactionHash", "status", "createdAt", "nextAttemptAt", "attempts"],
    additionalProperties: false,
    properties: {
      id: { type: "string", description: "The webhook-id every attempt carried." },
      type: { type: "string" },
      tradeId: { type: ["string", "null"], description: "Null for an event about a wallet or the swap." },
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
      apiKeyName: {
        type: ["string", "null"],
        description:
          "The access file's name of the key that sent it, recorded when it was accepted; null without ACCESS_FILE.",
      },
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
      "apiKeyName",
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
} as const;
