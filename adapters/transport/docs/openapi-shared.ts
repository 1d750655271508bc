/**
 * What the OpenAPI document's sections share: the address and hash shapes, references to its
 * schemas, and the error answers of a trade (docs/api.md, "Errors"), which the other operations pick from.
 */

export const ADDRESS = {
  type: "string",
  pattern: "^0x[0-9a-fA-F]{40}$",
  description: "0x and 40 hex digits; mixed case must pass its EIP-55 checksum.",
} as const;
export const HASH = { type: "string", pattern: "^0x[0-9a-f]{64}$" } as const;
export const HEX = { type: "string", pattern: "^0x[0-9a-f]*$" } as const;

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const errorResponse = (description: string) => ({
  description,
  content: { "application/json": { schema: ref("Error") } },
});

/** The error answers a trade can get (docs/api.md, "Errors"). */
export const TRADE_ERRORS = {
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

export const trade = (operationId: string, summary: string, description: string) => ({
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
    "202": {
      description:
        "Held for an approval (an approval rule of the access file matched it): nothing was signed. The trade as GET /api/v1/trades/{id} shows it, with its approval; Location names that URL. A retry with the same Idempotency-Key answers 202 while it waits, then its outcome.",
      headers: { Location: { schema: { type: "string" }, description: "/api/v1/trades/{id}" } },
      content: { "application/json": { schema: ref("Trade") } },
    },
    ...TRADE_ERRORS,
  },
});
