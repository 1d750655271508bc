/**
 * Every variable the service reads, with its default and the form its value must have: the
 * first check of `loadConfig`, whose problems are all reported together. Checks that relate
 * two variables, or read a file, come after it, in the sections beside this file.
 */
import { z } from "zod";

import {
  DEFAULT_FX_MAX_AGE_S,
  DEFAULT_NATIVE_USD_MAX_AGE_S,
  FEED_SETTINGS,
  SEQUENCER_SETTINGS,
} from "../../chain/index.js";
import { ConfigError } from "./config.js";
import { bounds, decimal, decimalOrHex, flag, integer, optional } from "./fields.js";

/** Thirty days: no feed's heartbeat comes near it. */
const MAX_FEED_AGE_S = 30 * 86_400;

const schema = z.object({
  HOST: optional(z.string().regex(/^[A-Za-z0-9.:\-[\]]+$/, "HOST: must be a host name or IP address")).default(
    "127.0.0.1",
  ),
  PORT: optional(integer("PORT", 0, 65535)).default(8080),
  METRICS_PORT: optional(integer("METRICS_PORT", 0, 65535)).default(9464),
  CHAIN_PORT: optional(integer("CHAIN_PORT", 0, 65535)).default(8545),
  CHAIN_BLOCK_TIME_MS: optional(integer("CHAIN_BLOCK_TIME_MS", 1, 3_600_000)),
  LOG_LEVEL: optional(
    z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
      error: "LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent",
    }),
  ).default("info"),
  API_KEYS: optional(z.string()),
  API_KEYS_FILE: optional(z.string()),
  ACCESS_FILE: optional(z.string()),
  RPC_URL: optional(
    z
      .string()
      .regex(
        /^\s*(https?|wss?):\/\/[^\s,]+\s*(,\s*(https?|wss?):\/\/[^\s,]+\s*)*$/,
        "RPC_URL: must be one http://, https://, ws:// or wss:// URL, or several separated by commas",
      ),
  ),
  RPC_TIMEOUT_MS: optional(integer("RPC_TIMEOUT_MS", 100, 120_000)).default(10_000),
  RPC_BATCH_SIZE: optional(integer("RPC_BATCH_SIZE", 1, 1000)).default(100),
  EXCHANGE_KEYSTORE: optional(z.string()),
  EXCHANGE_KEYSTORE_PASSWORD_FILE: optional(z.string()),
  DEPLOYMENT_FILE: optional(z.string()),
  EXCHANGE_PRIVATE_KEYS: optional(z.string()),
  SIGNER: optional(
    z.enum(["key", "pkcs11", "aws-kms"], {
      error: "SIGNER: must be key (EXCHANGE_PRIVATE_KEYS or EXCHANGE_KEYSTORE), pkcs11 or aws-kms",
    }),
  ).default("key"),
  EXCHANGE_ADDRESSES: optional(z.string()),
  SIGNER_TIMEOUT_MS: optional(integer("SIGNER_TIMEOUT_MS", 100, 60_000)).default(5_000),
  SIGNER_CONCURRENCY: optional(integer("SIGNER_CONCURRENCY", 1, 64)).default(4),
  PKCS11_MODULE: optional(z.string()),
  PKCS11_TOKEN_LABEL: optional(z.string()),
  // The slot id as softhsm2-util prints it (decimal) or pkcs11-tool does (0x…).
  PKCS11_SLOT: optional(decimalOrHex("PKCS11_SLOT")),
  PKCS11_PIN_FILE: optional(z.string()),
  PKCS11_KEY_LABELS: optional(z.string()),
  PKCS11_KEY_IDS: optional(z.string()),
  KMS_KEY_IDS: optional(z.string()),
  TLS_CERT: optional(z.string()),
  TLS_KEY: optional(z.string()),
  MAX_SELL_TOKENS: optional(decimal("MAX_SELL_TOKENS")).default("100000"),
  MAX_USD: optional(decimal("MAX_USD")).default("100000"),
  MIN_SELL_TOKENS: optional(decimal("MIN_SELL_TOKENS")).default("0.01"),
  MIN_USD: optional(decimal("MIN_USD")).default("0.01"),
  CASH_DISCOUNT_BPS: optional(integer("CASH_DISCOUNT_BPS", 0, 9999)),
  PRICE_CACHE_MS: optional(integer("PRICE_CACHE_MS", 0, 60_000)).default(1000),
  DATA_DIR: optional(z.string()).default("data"),
  JOURNAL_URL: optional(
    z.string().regex(/^postgres(ql)?:\/\/\S+$/, "JOURNAL_URL: must be a postgres:// or postgresql:// URL"),
  ),
  RECEIPT_TIMEOUT_MS: optional(integer("RECEIPT_TIMEOUT_MS", 1000, 3_600_000)).default(120_000),
  IDEMPOTENCY_WAIT_MS: optional(integer("IDEMPOTENCY_WAIT_MS", 0, 600_000)).default(10_000),
  QUOTE_TTL_MS: optional(integer("QUOTE_TTL_MS", 5_000, 600_000)).default(30_000),
  AUDIT_CHECKPOINT_MS: optional(integer("AUDIT_CHECKPOINT_MS", 1_000, 86_400_000)).default(3_600_000),
  TRADE_LIFETIME_S: optional(integer("TRADE_LIFETIME_S", 10, 86_400)).default(300),
  SLIPPAGE_BPS: optional(integer("SLIPPAGE_BPS", 0, 5_000)).default(100),
  MAX_FEE_PER_GAS_GWEI: optional(
    z
      .string()
      .regex(
        /^\d+(\.\d{1,9})?$/,
        'MAX_FEE_PER_GAS_GWEI: must be a plain decimal number of gwei with at most 9 decimals, such as "100"',
      ),
  ).default("100"),
  CONFIRMATIONS: optional(integer("CONFIRMATIONS", 1, 1_000)).default(1),
  REORG_DEPTH: optional(integer("REORG_DEPTH", 1, 10_000)).default(64),
  RESUBMIT_AFTER_MS: optional(integer("RESUBMIT_AFTER_MS", 1_000, 3_600_000)).default(30_000),
  MONITOR_INTERVAL_MS: optional(integer("MONITOR_INTERVAL_MS", 100, 60_000)).default(1_000),
  MONITOR_LEASE_MS: optional(integer("MONITOR_LEASE_MS", 1_000, 600_000)).default(15_000),
  STUCK_AFTER_MS: optional(integer("STUCK_AFTER_MS", 1_000, 86_400_000)).default(600_000),
  OUTSIDE_TX_POLICY: optional(
    z.enum(["alert", "pause"], {
      error:
        "OUTSIDE_TX_POLICY: must be alert (record and alarm) or pause (also stop the wallet's trades until an admin resumes it)",
    }),
  ).default("alert"),
  WATCH_INTERVAL_MS: optional(integer("WATCH_INTERVAL_MS", 100, 600_000)).default(1_000),
  [FEED_SETTINGS.tokenUsd.maxAge]: optional(integer(FEED_SETTINGS.tokenUsd.maxAge, 1, MAX_FEED_AGE_S)),
  [FEED_SETTINGS.eurUsd.maxAge]: optional(integer(FEED_SETTINGS.eurUsd.maxAge, 1, MAX_FEED_AGE_S)).default(
    DEFAULT_FX_MAX_AGE_S,
  ),
  [FEED_SETTINGS.chfUsd.maxAge]: optional(integer(FEED_SETTINGS.chfUsd.maxAge, 1, MAX_FEED_AGE_S)).default(
    DEFAULT_FX_MAX_AGE_S,
  ),
  [FEED_SETTINGS.tokenUsd.bounds]: optional(bounds(FEED_SETTINGS.tokenUsd.bounds)),
  [FEED_SETTINGS.eurUsd.bounds]: optional(bounds(FEED_SETTINGS.eurUsd.bounds)),
  [FEED_SETTINGS.chfUsd.bounds]: optional(bounds(FEED_SETTINGS.chfUsd.bounds)),
  [FEED_SETTINGS.nativeUsd.maxAge]: optional(integer(FEED_SETTINGS.nativeUsd.maxAge, 1, MAX_FEED_AGE_S)).default(
    DEFAULT_NATIVE_USD_MAX_AGE_S,
  ),
  [FEED_SETTINGS.nativeUsd.bounds]: optional(bounds(FEED_SETTINGS.nativeUsd.bounds)),
  NATIVE_USD_FEED: optional(
    z
      .string()
      .regex(/^0x[0-9a-fA-F]{40}$/, "NATIVE_USD_FEED: must be a contract address, 0x followed by 40 hex digits"),
  ),
  [SEQUENCER_SETTINGS.feed]: optional(
    z
      .string()
      .regex(
        /^0x[0-9a-fA-F]{40}$/,
        `${SEQUENCER_SETTINGS.feed}: must be a contract address, 0x followed by 40 hex digits`,
      ),
  ),
  [SEQUENCER_SETTINGS.grace]: optional(integer(SEQUENCER_SETTINGS.grace, 0, 86_400)),
  CORS_ORIGINS: optional(
    z
      .string()
      .regex(
        /^\s*(\*|https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?|https?:\/\/\[[0-9A-Fa-f:.]+\](:\d{1,5})?)\s*(,\s*(\*|https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?|https?:\/\/\[[0-9A-Fa-f:.]+\](:\d{1,5})?)\s*)*$/,
        'CORS_ORIGINS: must be "*" or origins such as https://app.example.com (scheme, host and optional port; no path), separated by commas',
      ),
  ),
  RATE_LIMIT_RPS: optional(integer("RATE_LIMIT_RPS", 0, 1_000_000)).default(0),
  RATE_LIMIT_BURST: optional(integer("RATE_LIMIT_BURST", 1, 10_000_000)),
  AUTH_FAILURES_PER_MINUTE: optional(integer("AUTH_FAILURES_PER_MINUTE", 0, 1_000_000)).default(60),
  TRUSTED_PROXIES: optional(z.string()),
  BODY_LIMIT_BYTES: optional(integer("BODY_LIMIT_BYTES", 1024, 1024 * 1024)).default(16 * 1024),
  SHUTDOWN_TIMEOUT_MS: optional(integer("SHUTDOWN_TIMEOUT_MS", 0, 600_000)).default(30_000),
  WEBHOOKS_FILE: optional(z.string()),
  WEBHOOK_ALLOW_INSECURE: optional(flag("WEBHOOK_ALLOW_INSECURE")).default(false),
  WEBHOOK_ALLOW_PRIVATE: optional(flag("WEBHOOK_ALLOW_PRIVATE")).default(false),
  WEBHOOK_RETRY_WINDOW_MS: optional(integer("WEBHOOK_RETRY_WINDOW_MS", 1_000, 30 * 86_400_000)).default(86_400_000),
  WEBHOOK_RETENTION_DAYS: optional(integer("WEBHOOK_RETENTION_DAYS", 1, 3_650)).default(30),
});

/** The environment after the schema: defaults filled in, numbers parsed. */
export type Env = z.infer<typeof schema>;

/** @throws ConfigError listing every variable whose value has not the form it must have */
export function parseEnvironment(env: NodeJS.ProcessEnv): Env {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => {
        const name = String(issue.path[0] ?? "environment");
        return issue.message.startsWith(`${name}:`) ? issue.message : `${name}: ${issue.message}`;
      }),
    );
  }
  return parsed.data;
}
