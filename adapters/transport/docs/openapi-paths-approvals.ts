/**
 * The OpenAPI document's approvals (docs/operations.md "Approvals"): the held trades an approver
 * may approve, an approver's decision, and the schema of a held trade's approval.
 */
import { TRADE_ERRORS, errorResponse, ref } from "./openapi-shared.js";

const UUID = { type: "string", pattern: "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" } as const;

const DECISION = {
  type: "object",
  required: ["by", "at", "reason"],
  additionalProperties: false,
  properties: {
    by: { type: "string", description: "The approver key's name in the access file." },
    at: { type: "string", format: "date-time" },
    reason: { type: ["string", "null"], maxLength: 500 },
  },
} as const;

/** `approval` of a held trade (Trade.approval). */
export const APPROVAL_SCHEMAS = {
  TradeApproval: {
    type: "object",
    description: "What a held trade's approval needs and has; only on a trade an approval rule held.",
    required: ["rules", "required", "heldAt", "expiresAt", "quote", "approvals", "rejection", "approvedAt"],
    additionalProperties: false,
    properties: {
      rules: { type: "array", items: { type: "string" }, description: "The names of the rules that held it." },
      required: { type: "integer", minimum: 1, description: "How many distinct approver keys must approve it." },
      heldAt: { type: "string", format: "date-time" },
      expiresAt: { type: "string", format: "date-time", description: "Not approved by then, it expires." },
      quote: {
        oneOf: [
          {
            type: "object",
            required: ["quoteId", "minOut", "expiresAt"],
            additionalProperties: false,
            properties: {
              quoteId: { type: "string" },
              minOut: { type: "string", pattern: "^[0-9]+$", description: "Base units." },
              expiresAt: { type: "string", format: "date-time" },
            },
          },
          { type: "null" },
        ],
        description: "The quote it named, its terms copied when it was held.",
      },
      approvals: { type: "array", items: DECISION, description: "Given so far, oldest first." },
      rejection: { oneOf: [DECISION, { type: "null" }] },
      approvedAt: { type: ["string", "null"], format: "date-time", description: "Its deadline counts from then." },
    },
  },
  ApprovalList: {
    type: "object",
    required: ["trades", "nextCursor"],
    additionalProperties: false,
    properties: {
      trades: { type: "array", items: ref("Trade") },
      nextCursor: { type: ["string", "null"] },
    },
  },
} as const;

/** An approver's decision, approve or reject. */
const decision = (verdict: "approve" | "reject", description: string) => ({
  post: {
    operationId: `${verdict}Trade`,
    summary: `${verdict === "approve" ? "Approve" : "Reject"} a held trade`,
    description,
    tags: ["Approvals"],
    parameters: [{ name: "id", in: "path", required: true, schema: UUID }],
    requestBody: {
      required: false,
      content: {
        "application/json": {
          schema: {
            type: "object",
            additionalProperties: false,
            properties: { reason: { type: "string", maxLength: 500 } },
          },
        },
      },
    },
    responses: {
      "200": {
        description: "The trade after the decision (or as it is now, to the same approver repeating it).",
        content: { "application/json": { schema: ref("Trade") } },
      },
      "400": errorResponse("invalid_argument: not a trade's id, or a bad reason."),
      "401": TRADE_ERRORS["401"],
      "403": errorResponse("permission_denied: the key lacks the approver role, or sent the trade."),
      "404": errorResponse("not_found: no trade of the keys this approver sees has that id."),
      "409": errorResponse("aborted: the trade is already approved, rejected or expired (approval_conflict)."),
    },
  },
});

export const APPROVAL_PATHS = {
  "/api/v1/approvals": {
    get: {
      operationId: "approvals",
      summary: "The held trades the caller may approve",
      description:
        "An approver key's: the trades of the keys it sees held for an approval, but its own and those it approved already, newest first, a page at a time.",
      tags: ["Approvals"],
      parameters: [
        { name: "status", in: "query", required: false, schema: { enum: ["pending"] } },
        { name: "limit", in: "query", required: false, schema: { type: "integer", minimum: 1, maximum: 500 } },
        { name: "cursor", in: "query", required: false, schema: { type: "string" } },
      ],
      responses: {
        "200": { description: "A page.", content: { "application/json": { schema: ref("ApprovalList") } } },
        "400": errorResponse("invalid_argument: status, limit or cursor, named in the message."),
        "401": TRADE_ERRORS["401"],
        "403": errorResponse("permission_denied: the key lacks the approver role."),
      },
    },
  },
  "/api/v1/trades/{id}/approve": decision(
    "approve",
    "The caller's approval. The last one the trade needs makes it approved: it is priced, proven and signed in the background, its deadline counted from now.",
  ),
  "/api/v1/trades/{id}/reject": decision("reject", "Rejects the held trade: final, nothing paid."),
} as const;
