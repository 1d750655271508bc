/**
 * The service's configuration from the environment: `loadConfig`, read as a list of its
 * sections, each in a file of env/ (config.ts holds the shape it returns). The door for
 * the rest of the code: everything the configuration offers is imported from here.
 */
import { accessFile, apiKeys, knownKeyIds, tlsFiles } from "./env/access.js";
import { chainConfig } from "./env/chain.js";
import { type AppConfig, ConfigError } from "./env/config.js";
import { feedPolicy } from "./env/feeds.js";
import { corsOrigins, rateLimits, trustedProxies } from "./env/network.js";
import { parseEnvironment } from "./env/schema.js";
import { tradeSettings } from "./env/trade.js";
import { watchSettings } from "./env/watch.js";
import { webhookSettings } from "./env/webhooks.js";

export { MIN_API_KEY_LENGTH } from "./env/access.js";
export {
  type AppConfig,
  ConfigError,
  type EmbeddedChainConfig,
  type RemoteSignerConfig,
  type RpcChainConfig,
} from "./env/config.js";

/**
 * Validates the environment and builds the configuration. Files named by
 * API_KEYS_FILE, TLS_CERT and TLS_KEY are read here, so a missing file is also
 * reported at start.
 *
 * Each section adds its problems to one list, in this order, so that one start reports them
 * all; the configuration is returned only when the list is empty.
 *
 * @throws ConfigError listing every problem, each starting with the variable's name
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const e = parseEnvironment(env);
  const problems: string[] = [];

  const keys = apiKeys(e, problems);
  const access = accessFile(e, problems);
  const tls = tlsFiles(e, problems);
  const chain = chainConfig(e, keys, problems);
  const { limits, trade } = tradeSettings(e, problems);
  const rates = rateLimits(e, problems);
  const webhooks = webhookSettings(e, knownKeyIds(keys, access), problems);
  const proxies = trustedProxies(e, problems);
  const feeds = feedPolicy(e, problems);
  const watch = watchSettings(e, env, access, problems);

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    host: e.HOST,
    port: e.PORT,
    metricsPort: e.METRICS_PORT,
    logLevel: e.LOG_LEVEL,
    apiKeys: keys,
    ...(access !== undefined && { access }),
    ...(tls ? { tls } : {}),
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    limits,
    ...(e.CASH_DISCOUNT_BPS !== undefined ? { cashDiscountBps: e.CASH_DISCOUNT_BPS } : {}),
    priceCacheMs: e.PRICE_CACHE_MS,
    journal: { dataDir: e.DATA_DIR, ...(e.JOURNAL_URL !== undefined ? { url: e.JOURNAL_URL } : {}) },
    receiptTimeoutMs: e.RECEIPT_TIMEOUT_MS,
    idempotencyWaitMs: e.IDEMPOTENCY_WAIT_MS,
    quoteTtlMs: e.QUOTE_TTL_MS,
    auditCheckpointMs: e.AUDIT_CHECKPOINT_MS,
    trade,
    stuckAfterMs: e.STUCK_AFTER_MS,
    watch,
    rateLimits: rates,
    trustedProxies: proxies,
    webhooks,
    corsOrigins: corsOrigins(e),
    feedPolicy: feeds,
    chain,
  };
}
