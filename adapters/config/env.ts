import { hash } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

import { z } from "zod";

import { decimalToBaseUnits, TOKEN_DECIMALS } from "../../core/index.js";
import { parseTrustedProxies, type RateLimitOptions } from "../transport/index.js";
import { parseWebhooksFile, type WebhookEndpointConfig } from "./webhooks-file.js";
import {
  DEFAULT_FX_MAX_AGE_S,
  DEFAULT_NATIVE_USD_MAX_AGE_S,
  DEFAULT_SEQUENCER_GRACE_S,
  FEED_SETTINGS,
  SEQUENCER_SETTINGS,
  type FeedBounds,
  type FeedPolicy,
} from "../chain/feed-policy.js";

/**
 * The service's configuration, read from environment variables once at start-up.
 * Every variable is listed (with its default) in .env.example. A bad or missing
 * value stops start-up with a ConfigError naming the variable; values themselves
 * (keys!) are never echoed.
 */
export interface AppConfig {
  host: string;
  port: number;
  /** METRICS_PORT: Prometheus metrics at GET /metrics on HOST, without a key; 0 = off. */
  metricsPort: number;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Accepted api_key values (API_KEYS and API_KEYS_FILE together). Empty only in embedded mode. */
  apiKeys: string[];
  tls?: { cert: Buffer; key: Buffer };
  bodyLimitBytes: number;
  shutdownTimeoutMs: number;
  limits: { maxSellTokens: bigint; maxUsd: string; minSellTokens: bigint; minUsd: string };
  /** Cash discount in basis points, when configured. */
  cashDiscountBps?: number;
  /** PRICE_CACHE_MS: how long a price quote is served from memory (0 = never). */
  priceCacheMs: number;
  /** The durable trade journal: PostgreSQL at JOURNAL_URL, else SQLite under DATA_DIR. */
  journal: { url?: string; dataDir: string };
  /** RECEIPT_TIMEOUT_MS: how long a trade waits for its receipt before answering "pending". */
  receiptTimeoutMs: number;
  /** IDEMPOTENCY_WAIT_MS: how long a retry waits for the first request with its key before 409. */
  idempotencyWaitMs: number;
  /** QUOTE_TTL_MS: how long a quote may be named by a trade (Quote-Id). */
  quoteTtlMs: number;
  /** A trade's deadline and slippage, the fee cap, confirmations, and the lifecycle monitor's timing. */
  trade: {
    /** TRADE_LIFETIME_S: seconds from signing to the calldata's deadline. */
    lifetimeS: number;
    /** SLIPPAGE_BPS: how far below the preflight's output a trade may pay out (minOut), in basis points. */
    slippageBps: number;
    /** MAX_FEE_PER_GAS_GWEI, in wei: no trade while the base fee is above it; no replacement bids more. */
    feeCap: bigint;
    /** CONFIRMATIONS: blocks a receipt needs (its own included) before a trade is answered. */
    confirmations: number;
    /** REORG_DEPTH: how deep a mined transaction is watched for reorgs. */
    reorgDepth: number;
    /** RESUBMIT_AFTER_MS: unmined this long, a transaction is replaced with higher fees (doubling each time). */
    resubmitAfterMs: number;
    /** MONITOR_INTERVAL_MS: how often the lifecycle monitor looks. */
    intervalMs: number;
    /** MONITOR_LEASE_MS: how long another instance waits before taking over a dead instance's wallets. */
    leaseMs: number;
  };
  /** STUCK_AFTER_MS: a wallet's nonce unmined for longer makes /readyz answer 503. */
  stuckAfterMs: number;
  /** CORS_ORIGINS: origins browsers may call from ("*" = any); empty = CORS off. */
  corsOrigins: string[];
  /** RATE_LIMIT_RPS and RATE_LIMIT_BURST per api key; AUTH_FAILURES_PER_MINUTE per client address. */
  rateLimits: RateLimitOptions;
  /**
   * TRUSTED_PROXIES: addresses and CIDRs of the proxies in front of the service, from which alone
   * X-Forwarded-For names the client (adapters/transport/http/client-address.ts); empty = none.
   */
  trustedProxies: string[];
  /**
   * WEBHOOKS_FILE: each api key's webhook endpoint (none: no webhooks); WEBHOOK_ALLOW_INSECURE and
   * WEBHOOK_ALLOW_PRIVATE: http:// and internal destinations (development and tests);
   * WEBHOOK_RETRY_WINDOW_MS: how long an event is retried before it is failed.
   */
  webhooks: {
    endpoints: WebhookEndpointConfig[];
    allowInsecure: boolean;
    allowPrivate: boolean;
    retryWindowMs: number;
  };
  /** FEED_MAX_AGE_*_S, FEED_BOUNDS_*, SEQUENCER_UPTIME_FEED and SEQUENCER_GRACE_S: when a feed's answer is used. */
  feedPolicy: FeedPolicy;
  chain: EmbeddedChainConfig | RpcChainConfig;
}

/** `npm start` without RPC_URL: an in-process Hardhat chain, served on 127.0.0.1:chainPort. */
export interface EmbeddedChainConfig {
  mode: "embedded";
  chainPort: number;
  /** CHAIN_BLOCK_TIME_MS: mine a block every this many ms instead of one per transaction (automine). */
  blockTimeMs?: number;
}

/** RPC_URL set: an existing chain, with the suite's addresses from a file and the wallets' keys from a keystore or the environment. */
export interface RpcChainConfig {
  mode: "rpc";
  /** The first endpoint (what one-endpoint callers use). */
  rpcUrl: string;
  /** Every endpoint, in order of preference (RPC_URL, comma-separated). */
  rpcUrls: string[];
  /** RPC_TIMEOUT_MS: a request unanswered this long fails over to the next endpoint. */
  rpcTimeoutMs: number;
  /** RPC_BATCH_SIZE: the most calls in one JSON-RPC request (hosted providers cap batches). */
  rpcBatchSize: number;
  deploymentFile: string;
  /**
   * NATIVE_USD_FEED: the chain's native coin in USD (a Chainlink AggregatorV3 such as ETH / USD),
   * for the gas in USD of quotes and the trade history; overrides the deployment file's
   * feeds.nativeUsd. Neither set: those USD figures are null.
   */
  nativeUsdFeed?: string;
  /** 0x-prefixed 32-byte hex keys of the exchange wallets (EXCHANGE_PRIVATE_KEYS); empty with a keystore. */
  privateKeys: string[];
  /** EXCHANGE_KEYSTORE and its password file, read at start (decrypted by the composition root). */
  keystore?: { files: Array<{ path: string; json: string }>; password: string };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigError";
  }
}

/** An empty variable counts as unset. */
const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => (typeof value === "string" && value.trim() === "" ? undefined : value), schema.optional());

const integer = (name: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `${name}: must be an integer from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name}: must be an integer from ${min} to ${max}`);

const decimal = (name: string) =>
  z
    .string()
    .regex(/^\d+(\.\d+)?$/, `${name}: must be a plain decimal number greater than 0, such as "10000"`)
    .refine((text) => Number(text) > 0, `${name}: must be greater than 0`);

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;

const flag = (name: string) =>
  z.enum(["true", "false"], { error: `${name}: must be true or false` }).transform((text) => text === "true");

/** Thirty days: no feed's heartbeat comes near it. */
const MAX_FEED_AGE_S = 30 * 86_400;

/** "min-max", plain decimals in the pair's units, such as "0.5-2". */
const bounds = (name: string) =>
  z
    .string()
    .regex(
      /^\s*\d+(\.\d+)?\s*-\s*\d+(\.\d+)?\s*$/,
      `${name}: must be "min-max", two plain decimal numbers in the pair's units, such as "0.5-2"`,
    )
    .transform((text): FeedBounds => {
      const [min, max] = text.split("-").map((part) => part.trim());
      return { min: min!, max: max! };
    })
    .refine(
      ({ min, max }) => compareDecimals(min, max) < 0 && Number(min) > 0,
      `${name}: min must be greater than 0 and less than max`,
    );

/** Compares two plain decimals exactly. */
function compareDecimals(a: string, b: string): number {
  const scale = Math.max(a.split(".")[1]?.length ?? 0, b.split(".")[1]?.length ?? 0);
  const units = (text: string) => decimalToBaseUnits(text, scale, "down") ?? 0n;
  const [x, y] = [units(a), units(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

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
});

/** Shortest accepted API key: long enough that guessing is hopeless. */
export const MIN_API_KEY_LENGTH = 16;

function readFile(name: string, path: string, problems: string[]): string | undefined {
  try {
    return readFileSync(resolve(path), "utf8");
  } catch (error) {
    problems.push(`${name}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    return undefined;
  }
}

/** The keystore files (comma-separated paths) and their password, read now so that a missing file stops the start. */
function readKeystores(
  paths: string,
  passwordFile: string | undefined,
  problems: string[],
): RpcChainConfig["keystore"] {
  const files: Array<{ path: string; json: string }> = [];
  for (const path of paths
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")) {
    const json = readFile("EXCHANGE_KEYSTORE", path, problems);
    if (json !== undefined) files.push({ path, json });
  }
  if (files.length === 0 && !problems.some((p) => p.startsWith("EXCHANGE_KEYSTORE:")))
    problems.push("EXCHANGE_KEYSTORE: names no file");
  if (passwordFile === undefined) {
    problems.push(
      "EXCHANGE_KEYSTORE_PASSWORD_FILE: is required with EXCHANGE_KEYSTORE (a file holding the keystore's password)",
    );
    return undefined;
  }
  const text = readFile("EXCHANGE_KEYSTORE_PASSWORD_FILE", passwordFile, problems);
  if (text === undefined) return undefined;
  // The file's last line break is not part of the password (echo and editors add one).
  const password = text.replace(/\r?\n$/, "");
  if (password === "") problems.push("EXCHANGE_KEYSTORE_PASSWORD_FILE: is empty");
  return { files, password };
}

/** Keys from API_KEYS (comma-separated) and API_KEYS_FILE (one per line, # comments), checked. */
function apiKeys(env: z.infer<typeof schema>, problems: string[]): string[] {
  const keys: string[] = [];
  const check = (name: string, list: string[]) => {
    for (const key of list) {
      if (key.length < MIN_API_KEY_LENGTH) {
        problems.push(`${name}: every key must be at least ${MIN_API_KEY_LENGTH} characters long`);
        return;
      }
      if (/[\s,]/.test(key)) {
        problems.push(`${name}: keys must not contain spaces or commas`);
        return;
      }
    }
    keys.push(...list);
  };
  if (env.API_KEYS !== undefined) {
    check(
      "API_KEYS",
      env.API_KEYS.split(",")
        .map((k) => k.trim())
        .filter((k) => k !== ""),
    );
    if (keys.length === 0 && !problems.some((p) => p.startsWith("API_KEYS:"))) problems.push("API_KEYS: holds no key");
  }
  if (env.API_KEYS_FILE !== undefined) {
    const text = readFile("API_KEYS_FILE", env.API_KEYS_FILE, problems);
    if (text !== undefined) {
      const list = text
        .split(/\r?\n/)
        .map((line) => line.trim())
        .filter((line) => line !== "" && !line.startsWith("#"));
      if (list.length === 0) problems.push("API_KEYS_FILE: holds no key");
      else check("API_KEYS_FILE", list);
    }
  }
  return [...new Set(keys)];
}

/**
 * Validates the environment and builds the configuration. Files named by
 * API_KEYS_FILE, TLS_CERT and TLS_KEY are read here, so a missing file is also
 * reported at start.
 *
 * @throws ConfigError listing every problem, each starting with the variable's name
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => {
        const name = String(issue.path[0] ?? "environment");
        return issue.message.startsWith(`${name}:`) ? issue.message : `${name}: ${issue.message}`;
      }),
    );
  }
  const e = parsed.data;
  const problems: string[] = [];

  const keys = apiKeys(e, problems);

  let tls: AppConfig["tls"];
  if ((e.TLS_CERT === undefined) !== (e.TLS_KEY === undefined)) {
    problems.push(
      e.TLS_CERT === undefined
        ? "TLS_CERT: is required when TLS_KEY is set"
        : "TLS_KEY: is required when TLS_CERT is set",
    );
  } else if (e.TLS_CERT !== undefined && e.TLS_KEY !== undefined) {
    const cert = readFile("TLS_CERT", e.TLS_CERT, problems);
    const key = readFile("TLS_KEY", e.TLS_KEY, problems);
    if (cert !== undefined && key !== undefined) tls = { cert: Buffer.from(cert), key: Buffer.from(key) };
  }

  let chain: AppConfig["chain"];
  if (e.RPC_URL === undefined) {
    for (const name of [
      "DEPLOYMENT_FILE",
      "NATIVE_USD_FEED",
      "EXCHANGE_PRIVATE_KEYS",
      "EXCHANGE_KEYSTORE",
      "EXCHANGE_KEYSTORE_PASSWORD_FILE",
    ] as const) {
      if (e[name] !== undefined)
        problems.push(`${name}: is only used with RPC_URL; set RPC_URL to use an existing chain, or unset ${name}`);
    }
    chain = {
      mode: "embedded",
      chainPort: e.CHAIN_PORT,
      ...(e.CHAIN_BLOCK_TIME_MS !== undefined ? { blockTimeMs: e.CHAIN_BLOCK_TIME_MS } : {}),
    };
  } else {
    if (e.CHAIN_BLOCK_TIME_MS !== undefined)
      problems.push(
        "CHAIN_BLOCK_TIME_MS: is only used by the embedded chain; unset it with RPC_URL (the chain sets its own block time)",
      );
    if (e.DEPLOYMENT_FILE === undefined)
      problems.push("DEPLOYMENT_FILE: is required when RPC_URL is set (the suite's addresses, see .env.example)");
    const privateKeys = (e.EXCHANGE_PRIVATE_KEYS ?? "")
      .split(",")
      .map((k) => k.trim())
      .filter((k) => k !== "");
    let keystore: RpcChainConfig["keystore"];
    if (e.EXCHANGE_KEYSTORE !== undefined && e.EXCHANGE_PRIVATE_KEYS !== undefined) {
      problems.push("EXCHANGE_KEYSTORE: set either EXCHANGE_KEYSTORE or EXCHANGE_PRIVATE_KEYS, not both");
    } else if (e.EXCHANGE_KEYSTORE !== undefined) {
      keystore = readKeystores(e.EXCHANGE_KEYSTORE, e.EXCHANGE_KEYSTORE_PASSWORD_FILE, problems);
    } else if (e.EXCHANGE_PRIVATE_KEYS === undefined || privateKeys.length === 0) {
      problems.push(
        "EXCHANGE_KEYSTORE: is required when RPC_URL is set (or EXCHANGE_PRIVATE_KEYS, comma-separated 0x-prefixed keys)",
      );
    } else if (!privateKeys.every((k) => PRIVATE_KEY.test(k))) {
      problems.push("EXCHANGE_PRIVATE_KEYS: every key must be 0x followed by 64 hex digits");
    }
    if (e.EXCHANGE_KEYSTORE_PASSWORD_FILE !== undefined && e.EXCHANGE_KEYSTORE === undefined) {
      problems.push("EXCHANGE_KEYSTORE_PASSWORD_FILE: is only used with EXCHANGE_KEYSTORE");
    }
    if (keys.length === 0 && !problems.some((p) => p.startsWith("API_KEYS"))) {
      problems.push("API_KEYS: is required when RPC_URL is set (or API_KEYS_FILE)");
    }
    const rpcUrls = e.RPC_URL.split(",").map((url) => url.trim());
    if (new Set(rpcUrls).size !== rpcUrls.length) problems.push("RPC_URL: lists the same URL twice");
    chain = {
      mode: "rpc",
      rpcUrl: rpcUrls[0]!,
      rpcUrls,
      rpcTimeoutMs: e.RPC_TIMEOUT_MS,
      rpcBatchSize: e.RPC_BATCH_SIZE,
      deploymentFile: e.DEPLOYMENT_FILE ?? "",
      ...(e.NATIVE_USD_FEED === undefined ? {} : { nativeUsdFeed: e.NATIVE_USD_FEED }),
      privateKeys,
      ...(keystore === undefined ? {} : { keystore }),
    };
  }

  const maxSellTokens = decimalToBaseUnits(e.MAX_SELL_TOKENS, TOKEN_DECIMALS, "down") ?? 0n;
  if (maxSellTokens <= 0n) problems.push("MAX_SELL_TOKENS: must be at least 1e-18");
  const minSellTokens = decimalToBaseUnits(e.MIN_SELL_TOKENS, TOKEN_DECIMALS, "up") ?? 0n;
  if (minSellTokens > maxSellTokens) problems.push("MIN_SELL_TOKENS: must not be more than MAX_SELL_TOKENS");
  // Compared exactly, at more decimals than any stable coin has.
  if ((decimalToBaseUnits(e.MIN_USD, 36, "up") ?? 0n) > (decimalToBaseUnits(e.MAX_USD, 36, "down") ?? 0n)) {
    problems.push("MIN_USD: must not be more than MAX_USD");
  }
  const feeCap = decimalToBaseUnits(e.MAX_FEE_PER_GAS_GWEI, 9, "down") ?? 0n;
  if (feeCap <= 0n) problems.push("MAX_FEE_PER_GAS_GWEI: must be greater than 0");
  if (e.MONITOR_LEASE_MS < 3 * e.MONITOR_INTERVAL_MS) {
    problems.push(
      "MONITOR_LEASE_MS: must be at least 3 × MONITOR_INTERVAL_MS, so a live monitor renews its lease in time",
    );
  }
  // Watched only as deep as it is answered, a confirmed trade would stop being watched for reorgs at once.
  if (e.REORG_DEPTH <= e.CONFIRMATIONS)
    problems.push(
      `REORG_DEPTH: must be at least CONFIRMATIONS + 1, so a confirmed trade is still watched for reorgs (REORG_DEPTH=${e.REORG_DEPTH}, CONFIRMATIONS=${e.CONFIRMATIONS})`,
    );
  if (e.RATE_LIMIT_BURST !== undefined && e.RATE_LIMIT_RPS === 0)
    problems.push("RATE_LIMIT_BURST: is only used with RATE_LIMIT_RPS");
  const rateLimits: RateLimitOptions = {
    ...(e.RATE_LIMIT_RPS > 0
      ? { perKey: { rate: e.RATE_LIMIT_RPS, burst: e.RATE_LIMIT_BURST ?? 3 * e.RATE_LIMIT_RPS } }
      : {}),
    ...(e.AUTH_FAILURES_PER_MINUTE > 0
      ? { authFailures: { rate: e.AUTH_FAILURES_PER_MINUTE / 60, burst: e.AUTH_FAILURES_PER_MINUTE } }
      : {}),
  };
  const trusted = parseTrustedProxies(e.TRUSTED_PROXIES ?? "");
  let webhookEndpoints: WebhookEndpointConfig[] = [];
  if (e.WEBHOOKS_FILE !== undefined) {
    const text = readFile("WEBHOOKS_FILE", e.WEBHOOKS_FILE, problems);
    // An api key's id is its scope (adapters/transport/request/api-key.ts); with no key configured (dev mode generates one) ids are not checked.
    const knownIds =
      keys.length === 0 ? undefined : new Set(keys.map((key) => hash("sha256", key, "hex").slice(0, 32)));
    if (text !== undefined)
      webhookEndpoints = parseWebhooksFile(
        text,
        { allowInsecure: e.WEBHOOK_ALLOW_INSECURE, allowPrivate: e.WEBHOOK_ALLOW_PRIVATE, knownIds },
        problems,
      );
  }
  for (const reason of trusted.problems) problems.push(`TRUSTED_PROXIES: ${reason}`);
  if (e[SEQUENCER_SETTINGS.grace] !== undefined && e[SEQUENCER_SETTINGS.feed] === undefined) {
    problems.push(`${SEQUENCER_SETTINGS.grace}: is only used with ${SEQUENCER_SETTINGS.feed}`);
  }
  const rule = (key: keyof typeof FEED_SETTINGS) => {
    const maxAgeS = e[FEED_SETTINGS[key].maxAge];
    const feedBounds = e[FEED_SETTINGS[key].bounds];
    return {
      ...(maxAgeS === undefined ? {} : { maxAgeS }),
      ...(feedBounds === undefined ? {} : { bounds: feedBounds }),
    };
  };
  const sequencer = e[SEQUENCER_SETTINGS.feed];
  const feedPolicy: FeedPolicy = {
    tokenUsd: rule("tokenUsd"),
    eurUsd: rule("eurUsd"),
    chfUsd: rule("chfUsd"),
    nativeUsd: rule("nativeUsd"),
    ...(sequencer === undefined
      ? {}
      : { sequencer: { address: sequencer, graceS: e[SEQUENCER_SETTINGS.grace] ?? DEFAULT_SEQUENCER_GRACE_S } }),
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    host: e.HOST,
    port: e.PORT,
    metricsPort: e.METRICS_PORT,
    logLevel: e.LOG_LEVEL,
    apiKeys: keys,
    ...(tls ? { tls } : {}),
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    limits: { maxSellTokens, maxUsd: e.MAX_USD, minSellTokens, minUsd: e.MIN_USD },
    ...(e.CASH_DISCOUNT_BPS !== undefined ? { cashDiscountBps: e.CASH_DISCOUNT_BPS } : {}),
    priceCacheMs: e.PRICE_CACHE_MS,
    journal: { dataDir: e.DATA_DIR, ...(e.JOURNAL_URL !== undefined ? { url: e.JOURNAL_URL } : {}) },
    receiptTimeoutMs: e.RECEIPT_TIMEOUT_MS,
    idempotencyWaitMs: e.IDEMPOTENCY_WAIT_MS,
    quoteTtlMs: e.QUOTE_TTL_MS,
    trade: {
      lifetimeS: e.TRADE_LIFETIME_S,
      slippageBps: e.SLIPPAGE_BPS,
      feeCap,
      confirmations: e.CONFIRMATIONS,
      reorgDepth: e.REORG_DEPTH,
      resubmitAfterMs: e.RESUBMIT_AFTER_MS,
      intervalMs: e.MONITOR_INTERVAL_MS,
      leaseMs: e.MONITOR_LEASE_MS,
    },
    stuckAfterMs: e.STUCK_AFTER_MS,
    rateLimits,
    trustedProxies: trusted.proxies,
    webhooks: {
      endpoints: webhookEndpoints,
      allowInsecure: e.WEBHOOK_ALLOW_INSECURE,
      allowPrivate: e.WEBHOOK_ALLOW_PRIVATE,
      retryWindowMs: e.WEBHOOK_RETRY_WINDOW_MS,
    },
    corsOrigins: (e.CORS_ORIGINS ?? "")
      .split(",")
      .map((o) => o.trim())
      .filter((o) => o !== ""),
    feedPolicy,
    chain,
  };
}
