/**
 * The OpenAPI 3.1 document of the JSON routes (served at GET /api/v1/openapi.json, no key), the
 * routes of docs/SPEC.md as they answer: the `api_key` scheme, the `Idempotency-Key` header, the
 * web3.js 1.x receipt, and the `{"code", "message"}` error of every refusal. Its schemas are JSON
 * Schema 2020-12; test/adapters/transport/openapi.test.ts validates real answers against them,
 * so the document cannot drift from the routes unnoticed.
 */

import { APPROVAL_PATHS, APPROVAL_SCHEMAS } from "./openapi-paths-approvals.js";
import { CANCEL_PATHS, CANCEL_SCHEMAS } from "./openapi-paths-cancels.js";
import { AUDIT_PATHS, AUDIT_SCHEMAS } from "./openapi-paths-audit.js";
import { PROBE_PATHS } from "./openapi-paths-probes.js";
import { TRADE_PATHS } from "./openapi-paths-trades.js";
import { WALLET_PATHS, WALLET_SCHEMAS } from "./openapi-paths-wallets.js";
import { WEBHOOK_PATHS, WEBHOOKS } from "./openapi-paths-webhooks.js";
import { CALL_SCHEMAS } from "./openapi-schemas-calls.js";
import { RECORD_SCHEMAS } from "./openapi-schemas-records.js";

/** The document, its sections in the order it has always been served in. */
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
  tags: [
    { name: "Trades" },
    { name: "Price" },
    { name: "Approvals" },
    { name: "Webhooks" },
    { name: "Audit" },
    { name: "Wallets" },
    { name: "Probes" },
  ],
  webhooks: WEBHOOKS,
  paths: {
    ...TRADE_PATHS,
    ...APPROVAL_PATHS,
    ...CANCEL_PATHS,
    ...WEBHOOK_PATHS,
    ...AUDIT_PATHS,
    ...WALLET_PATHS,
    ...PROBE_PATHS,
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
      ...CALL_SCHEMAS,
      ...RECORD_SCHEMAS,
      ...AUDIT_SCHEMAS,
      ...APPROVAL_SCHEMAS,
      ...CANCEL_SCHEMAS,
      ...WALLET_SCHEMAS,
    },
  },
} as const;

/** The document as served: serialised once. */
export const OPENAPI_JSON = JSON.stringify(OPENAPI_DOCUMENT);
