/**
 * The transports step of the composition root: one port serving gRPC, Connect, gRPC-Web and the
 * JSON routes, behind the api keys, CORS, limits and throttles; and, when metrics are on, the
 * Prometheus endpoint on its own port.
 */
import type { Logger } from "pino";

import type { ChainAdapter } from "../chain/index.js";
import type { AppConfig } from "../config/env.js";
import { generateApiKey } from "../dev-mode.js";
import type { ServiceMetrics } from "../observability/metrics.js";
import {
  TrustedProxies,
  createAccessKeyVerifier,
  createApiKeyVerifier,
  createHttpHandler,
  startServer,
  type ApiServer,
} from "../transport/index.js";
import type { AccessControl } from "./access.js";
import type { Shutdown } from "./shutdown.js";
import type { UseCases } from "./use-cases.js";

/** The API server, listening; and the key made up for it when the configuration holds none (embedded mode only). */
export async function serveApi(
  config: AppConfig,
  useCases: UseCases,
  adapter: ChainAdapter,
  context: { metrics: ServiceMetrics | undefined; log: Logger; shutdown: Shutdown; access?: AccessControl | undefined },
): Promise<{ server: ApiServer; generatedApiKey?: string }> {
  const { metrics, log, shutdown, access } = context;
  // The configuration holds no key only in embedded mode without ACCESS_FILE (loadConfig requires one on RPC_URL).
  const generatedApiKey = config.apiKeys.length === 0 && access === undefined ? generateApiKey() : undefined;
  const apiKeys = generatedApiKey === undefined ? config.apiKeys : [generatedApiKey];
  const closing = new AbortController();
  // One rule for the client's address, for the refused-key throttle and the connections per address.
  const trustedProxies = new TrustedProxies(config.trustedProxies);
  const handler = createHttpHandler({
    useCases,
    verifier: access === undefined ? createApiKeyVerifier(apiKeys) : createAccessKeyVerifier(access.current),
    readiness: () => adapter.readiness(),
    log,
    bodyLimitBytes: config.bodyLimitBytes,
    closing: closing.signal,
    corsOrigins: config.corsOrigins,
    rateLimits: config.rateLimits,
    trustedProxies,
    ...(metrics === undefined ? {} : { metrics, onRefusedKnownKey: (rule) => metrics.access.refusal(rule) }),
  });
  const server = await startServer({
    handler,
    host: config.host,
    port: config.port,
    ...(config.tls ? { tls: config.tls } : {}),
    log,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    trustedProxies,
  });
  shutdown.push(() => server.close());
  // Closers run last first: gRPC health turns NOT_SERVING and its Watch streams end, then the server drains.
  shutdown.push(async () => closing.abort());
  return { server, ...(generatedApiKey === undefined ? {} : { generatedApiKey }) };
}

/** Prometheus metrics on METRICS_PORT, watching the wallets; undefined when metrics are off. */
export async function serveMetrics(
  config: AppConfig,
  metrics: ServiceMetrics | undefined,
  adapter: ChainAdapter,
  context: { log: Logger; shutdown: Shutdown },
): Promise<string | undefined> {
  if (metrics === undefined) return undefined;
  metrics.watch(adapter.walletSource(), () => adapter.watchState());
  metrics.settings(
    {
      stuckAfterMs: config.stuckAfterMs,
      receiptTimeoutMs: config.receiptTimeoutMs,
      webhookRetryWindowMs: config.webhooks.retryWindowMs,
    },
    () => adapter.endpoints(),
  );
  const served = await metrics.serve(config.host, config.metricsPort);
  context.shutdown.push(() => served.close());
  context.log.info({ url: served.url }, "metrics served");
  return served.url;
}
