/**
 * The settings the alert rules compare with, exported so that a rule reads the service's own
 * value rather than a copy of it (deploy/prometheus/alerts.yml), and each JSON-RPC endpoint's
 * state as the provider's failover sees it:
 *
 * - `token_service_stuck_after_seconds`: STUCK_AFTER_MS, the age past which a wallet's oldest
 *   unmined nonce makes /readyz answer 503;
 * - `token_service_receipt_timeout_seconds`: RECEIPT_TIMEOUT_MS, how long a trade waits for its
 *   receipt before it answers 504 (trade_pending);
 * - `token_service_webhook_retry_window_seconds`: WEBHOOK_RETRY_WINDOW_MS, how long a delivery is
 *   retried before it is failed;
 * - `token_service_rpc_endpoint_up{endpoint}`: 1 while the endpoint is in use, 0 while it rests
 *   after a transport failure (RPC_URL's endpoints, each labelled as the rpc_* metrics label it).
 */
import { Gauge, type Registry } from "prom-client";

import type { EndpointStatus } from "../chain/index.js";
import { PREFIX } from "./prefix.js";

export interface ExportedSettings {
  stuckAfterMs: number;
  receiptTimeoutMs: number;
  webhookRetryWindowMs: number;
}

export function watchSettings(
  registry: Registry,
  settings: ExportedSettings,
  endpoints: () => readonly EndpointStatus[],
): void {
  const registers = [registry];
  const constant = (name: string, help: string, ms: number) =>
    new Gauge({ name: `${PREFIX}${name}`, help, registers }).set(ms / 1000);
  constant(
    "stuck_after_seconds",
    "STUCK_AFTER_MS: a wallet's oldest unmined nonce older than this makes the service not ready.",
    settings.stuckAfterMs,
  );
  constant(
    "receipt_timeout_seconds",
    "RECEIPT_TIMEOUT_MS: how long a trade waits for its receipt before answering trade_pending (504).",
    settings.receiptTimeoutMs,
  );
  constant(
    "webhook_retry_window_seconds",
    "WEBHOOK_RETRY_WINDOW_MS: how long a webhook delivery is retried before it is failed.",
    settings.webhookRetryWindowMs,
  );
  new Gauge({
    name: `${PREFIX}rpc_endpoint_up`,
    help: "1 while the JSON-RPC endpoint is in use, 0 while it rests after a transport failure.",
    labelNames: ["endpoint"],
    registers,
    collect() {
      this.reset();
      for (const endpoint of endpoints()) this.set({ endpoint: endpoint.url }, endpoint.up ? 1 : 0);
    },
  });
}
