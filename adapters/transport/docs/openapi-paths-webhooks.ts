/**
 * The OpenAPI document's webhook sections: the event POSTed to a key's endpoint, and the paths
 * that list the caller's deliveries and send a failed one again.
 */
import { TRADE_ERRORS, errorResponse, ref } from "./openapi-shared.js";

export const WEBHOOKS = {
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
} as const;

export const WEBHOOK_PATHS = {
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
} as const;
