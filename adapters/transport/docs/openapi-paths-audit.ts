/**
 * The OpenAPI document's audit section: GET /api/v1/audit, a page of the audit log for an admin
 * key, and the schemas of its answer (core/ports/audit.port.ts, docs/operations.md "The audit log").
 */
import { AUDIT_ACTIONS } from "../../../core/index.js";
import { errorResponse, ref, TRADE_ERRORS } from "./openapi-shared.js";

const SHA256 = { type: "string", pattern: "^[0-9a-f]{64}$" } as const;

export const AUDIT_SCHEMAS = {
  AuditRecord: {
    type: "object",
    description:
      "One decision of the service's, chained: `hash` is the SHA-256 of the record's canonical JSON (RFC 8785) without `hash`; `prevHash` the previous record's hash (64 zeros before the first).",
    required: ["seq", "at", "actor", "action", "subject", "details", "prevHash", "hash"],
    additionalProperties: false,
    properties: {
      seq: { type: "integer", minimum: 1 },
      at: { type: "string", format: "date-time" },
      actor: { type: "string", description: "The key's name in the access file (its id without one), or `service`." },
      action: { enum: [...AUDIT_ACTIONS] },
      subject: {
        type: ["string", "null"],
        description: "A trade's id, a delivery's id, an instance, a file's digest.",
      },
      details: { type: "object" },
      prevHash: SHA256,
      hash: SHA256,
    },
  },
  AuditList: {
    type: "object",
    required: ["records", "nextCursor"],
    additionalProperties: false,
    properties: {
      records: { type: "array", items: ref("AuditRecord") },
      nextCursor: { type: ["string", "null"] },
    },
  },
} as const;

export const AUDIT_PATHS = {
  "/api/v1/audit": {
    get: {
      operationId: "auditLog",
      summary: "The audit log, oldest first, a page at a time (an admin key only)",
      description:
        'Every decision about money or access: trades accepted and refused (with the code and the rule or limit), trades forgotten, the access file loaded, reloaded or refused, deliveries retried by hand, the service started and stopped. With `Accept: text/csv` the same page comes as CSV (`details` as JSON), the next page\'s URL in a `Link: <...>; rel="next"` header. `npm run audit -- verify --file` checks the JSON records exported.',
      tags: ["Audit"],
      parameters: [
        { name: "action", in: "query", schema: { enum: [...AUDIT_ACTIONS] } },
        { name: "actor", in: "query", schema: { type: "string", maxLength: 256 } },
        {
          name: "since",
          in: "query",
          description: "`at` at or after this: ISO 8601 date, or date-time with a time zone.",
          schema: { type: "string" },
        },
        { name: "until", in: "query", description: "`at` before this (same format).", schema: { type: "string" } },
        { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 1000, default: 100 } },
        { name: "cursor", in: "query", description: "A previous page's nextCursor.", schema: { type: "string" } },
      ],
      responses: {
        "200": {
          description: "A page of records.",
          headers: {
            Link: {
              description: 'CSV only: the next page, `<url>; rel="next"`; absent on the last page.',
              schema: { type: "string" },
            },
          },
          content: {
            "application/json": { schema: ref("AuditList") },
            "text/csv": {
              schema: {
                type: "string",
                description: "Columns: seq, at, actor, action, subject, details, prevHash, hash.",
              },
            },
          },
        },
        "400": errorResponse("invalid_argument: a query parameter, named in the message."),
        "401": TRADE_ERRORS["401"],
        "403": errorResponse(
          "permission_denied: the key does not hold the admin role (or the service runs without ACCESS_FILE).",
        ),
        "429": TRADE_ERRORS["429"],
      },
    },
  },
} as const;
