/**
 * The OpenAPI document's wallets section: POST /api/v1/wallets/{address}/resume, an admin's end
 * of a wallet's pause (OUTSIDE_TX_POLICY=pause), and the data of the events about a wallet or the
 * swap (docs/SPEC.md §10.3).
 */
import { WATCH_EVENT_TYPES } from "../../../core/index.js";
import { errorResponse, ref, TRADE_ERRORS } from "./openapi-shared.js";

const ADDRESS = { type: "string", pattern: "^0x[0-9a-fA-F]{40}$" } as const;
const AMOUNT = {
  type: "object",
  required: ["value", "baseUnits"],
  properties: { value: { type: "string" }, baseUnits: { type: "string", pattern: "^[0-9]+$" } },
} as const;

export const WALLET_SCHEMAS = {
  WalletResume: {
    type: "object",
    required: ["wallet", "paused", "pause"],
    additionalProperties: false,
    properties: {
      wallet: ADDRESS,
      paused: { const: false },
      pause: {
        type: "object",
        required: ["since", "nonce", "hash"],
        additionalProperties: false,
        description: "The pause that ended: since when, and the outside transaction that caused it.",
        properties: {
          since: { type: "string", format: "date-time" },
          nonce: { type: "integer" },
          hash: { type: ["string", "null"] },
        },
      },
    },
  },
  WatchEventData: {
    type: "object",
    description:
      "An event about a wallet or the swap (wallet.outside_transaction, wallet.balance_low/ok, swap.reserves_low/ok): the wallet's state (`wallet`, `block`, `paused`, `balances` by asset, `tradesLeft`) or the swap's (`swap`, `block`, `reserves` by coin); with `asset`, `balance` (the amount compared), `threshold`, `clearsAt` and `setting` for an alarm, `transaction` and `policy` for an outside transaction.",
    properties: {
      wallet: ADDRESS,
      swap: ADDRESS,
      block: { type: ["integer", "null"] },
      paused: { type: "boolean" },
      balances: { type: "object", additionalProperties: AMOUNT },
      reserves: { type: "object", additionalProperties: AMOUNT },
      tradesLeft: { type: ["integer", "null"] },
      asset: { type: "string" },
      balance: AMOUNT,
      threshold: AMOUNT,
      clearsAt: AMOUNT,
      setting: { type: "string" },
      policy: { enum: ["alert", "pause"] },
      transaction: {
        type: "object",
        required: ["hash", "nonce", "to", "value", "blockNumber"],
        properties: {
          hash: { type: ["string", "null"] },
          nonce: { type: "integer" },
          to: { type: ["string", "null"] },
          value: { type: ["string", "null"], description: "Wei, decimal." },
          blockNumber: { type: "integer" },
        },
      },
    },
  },
} as const;

/** The watch's event types, for the WebhookEvent schema. */
export const WATCH_EVENT_ENUM = [...WATCH_EVENT_TYPES];

export const WALLET_PATHS = {
  "/api/v1/wallets/{address}/resume": {
    post: {
      operationId: "resumeWallet",
      summary: "End a paused exchange wallet's pause (an admin key only); recorded in the audit log",
      description:
        "With OUTSIDE_TX_POLICY=pause, a transaction this service never signed, mined from an exchange wallet, pauses it: its trades are refused (503 wallet_paused) until an admin resumes it. No body.",
      tags: ["Wallets"],
      parameters: [{ name: "address", in: "path", required: true, schema: ADDRESS }],
      responses: {
        "200": {
          description: "The wallet trades again.",
          content: { "application/json": { schema: ref("WalletResume") } },
        },
        "400": errorResponse("invalid_argument: the address is not an exchange wallet of this service."),
        "401": TRADE_ERRORS["401"],
        "403": errorResponse("permission_denied: the key does not hold the admin role (or there is no ACCESS_FILE)."),
        "409": errorResponse("failed_precondition: the wallet is not paused (wallet_not_paused)."),
        "429": TRADE_ERRORS["429"],
      },
    },
  },
} as const;
