/**
 * The OpenAPI document's cancels (docs/operations.md "On call", "Cancelling and speeding up a
 * trade"): POST /api/v1/trades/{id}/cancel and /speed-up, and the schema of a trade's cancel.
 */
import { TRADE_ERRORS, errorResponse, ref } from "./openapi-shared.js";

const UUID = { type: "string", pattern: "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" } as const;

export const CANCEL_SCHEMAS = {
  TradeCancel: {
    type: "object",
    description: "Only on a trade a cancel was asked of.",
    required: ["requestedBy", "requestedAt", "outcome", "noopHash"],
    additionalProperties: false,
    properties: {
      requestedBy: { type: "string", description: "The key's name in the access file (its id without one)." },
      requestedAt: { type: "string", format: "date-time" },
      outcome: {
        enum: ["pending", "done", "too_late"],
        description:
          "pending: its nonce is open; done: cancelled, nothing paid; too_late: its own transaction took the nonce first (mined, confirmed or reverted), or it ended otherwise.",
      },
      noopHash: {
        type: ["string", "null"],
        description:
          "The latest no-op (a 0-value transfer to the wallet itself) at the trade's nonce; null while none is.",
      },
    },
  },
} as const;

/** A cancel or a speed-up, answered 202 with the trade. */
const replacement = (what: "cancel" | "speedUp", description: string, body: object | undefined) => ({
  post: {
    operationId: `${what}Trade`,
    summary: what === "cancel" ? "Cancel a trade" : "Speed a trade up",
    description,
    tags: ["Trades"],
    parameters: [{ name: "id", in: "path", required: true, schema: UUID }],
    requestBody: {
      required: false,
      description: "Optional: no body (and no Content-Type) is taken.",
      content: {
        "application/json": {
          schema: body ?? { type: "object", additionalProperties: false, properties: {} },
        },
      },
    },
    responses: {
      "202": {
        description:
          "The trade as GET /api/v1/trades/{id} shows it, at once: the replacement's hash among its transactions (and as its transactionHash), and for a cancel its `cancel`.",
        headers: { Location: { schema: { type: "string" }, description: "/api/v1/trades/{id}" } },
        content: { "application/json": { schema: ref("Trade") } },
      },
      "400": errorResponse(
        what === "cancel"
          ? "invalid_argument: not a trade's id, or a body with a field."
          : "invalid_argument: not a trade's id, or maxFeePerGasGwei malformed, above the fee cap or below the least a replacement needs (named in the message).",
      ),
      "401": TRADE_ERRORS["401"],
      "403": errorResponse("permission_denied: the key sees the trade but did not send it, and is not an admin."),
      "404": errorResponse("not_found: no trade the key sees has that id."),
      "409": errorResponse(
        "failed_precondition: the trade is final (confirmed, failed, expired, rejected, cancelled) or mined, or (a speed-up) being cancelled or freed by a no-op (trade_not_replaceable), the state named.",
      ),
      "415": TRADE_ERRORS["415"],
      "503": errorResponse("unavailable: the node did not answer (a speed-up); nothing was signed."),
    },
  },
});

export const CANCEL_PATHS = {
  "/api/v1/trades/{id}/cancel": replacement(
    "cancel",
    "For the key that sent the trade, or an admin. With nothing signed (accepted, held, approved) it is cancelled at once. Signed, its transaction is replaced by a no-op at its nonce (10 % more on both fees, the market's when higher, never above MAX_FEE_PER_GAS_GWEI); it is `cancelled` once the no-op is mined and confirmed, or `confirmed` with `cancel.outcome` too_late when its own transaction was mined first (webhooks trade.cancelled, trade.cancel_failed). A second cancel answers the same, signing nothing.",
    undefined,
  ),
  "/api/v1/trades/{id}/speed-up": replacement(
    "speedUp",
    "For the key that sent the trade, or an admin: its pending transaction re-priced at its nonce (10 % more on both fees, the market's when higher), or at maxFeePerGasGwei; never above MAX_FEE_PER_GAS_GWEI. When the fees leave no room, the trade is answered as it is.",
    {
      type: "object",
      additionalProperties: false,
      properties: {
        maxFeePerGasGwei: {
          type: "string",
          pattern: "^\\d{1,30}(\\.\\d{1,9})?$",
          description: "The replacement's maxFeePerGas in gwei (at most 9 decimals).",
        },
      },
    },
  ),
} as const;
