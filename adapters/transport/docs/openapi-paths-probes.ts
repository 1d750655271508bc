/** The OpenAPI document's probes: /healthz and /readyz, without a key. */
import { errorResponse } from "./openapi-shared.js";

export const PROBE_PATHS = {
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
} as const;
