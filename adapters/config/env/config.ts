/**
 * The configuration's shape: what `loadConfig` (../env.ts) returns, and the error it throws.
 * The sections beside this file each build one part of it.
 */
import type { AccessPolicy } from "../../../core/index.js";
import type { FeedPolicy, WatchSettings } from "../../chain/index.js";
import type { RateLimitOptions } from "../../transport/index.js";
import type { WebhookEndpointConfig } from "../webhooks-file.js";

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
  /** Accepted api_key values (API_KEYS and API_KEYS_FILE together). Empty in embedded mode, and with ACCESS_FILE. */
  apiKeys: string[];
  /**
   * ACCESS_FILE: the keys by their SHA-256 with their roles, scopes and limits, and the denylist,
   * as read at start (re-read when it changes: adapters/startup/access.ts). Undefined without one:
   * every key a trader with no limits.
   */
  access?: { path: string; policy: AccessPolicy };
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
  /** AUDIT_CHECKPOINT_MS: how often the audit log's head (seq and hash) is logged, a witness for an outside log store. */
  auditCheckpointMs: number;
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
  /**
   * The wallet watch: OUTSIDE_TX_POLICY (alert or pause), WATCH_INTERVAL_MS, and the thresholds
   * WATCH_NATIVE_MIN, WATCH_<SYMBOL>_MIN and WATCH_RESERVES_<SYMBOL>_MIN (whole units).
   */
  watch: WatchSettings;
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
   * WEBHOOK_RETRY_WINDOW_MS: how long an event is retried before it is failed;
   * WEBHOOK_RETENTION_DAYS: how long a delivered or failed event is kept, then deleted (in ms).
   */
  webhooks: {
    endpoints: WebhookEndpointConfig[];
    allowInsecure: boolean;
    allowPrivate: boolean;
    retryWindowMs: number;
    retentionMs: number;
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
  /** SIGNER=pkcs11 or aws-kms: the embedded chain funds these wallets, whose keys are in the signer. */
  signer?: RemoteSignerConfig;
}

/**
 * SIGNER=pkcs11 or SIGNER=aws-kms (adapters/config/env/signer.ts): the keys' settings, and
 * EXCHANGE_ADDRESSES, the wallets they must be; SIGNER_TIMEOUT_MS, SIGNER_CONCURRENCY.
 */
export type RemoteSignerConfig =
  | {
      kind: "pkcs11";
      module: string;
      token: { label: string } | { slot: number };
      pin: string;
      /** PKCS11_PIN_FILE: read again when the token refuses the PIN after the start. */
      pinFile: string;
      keys: Array<{ label: string } | { id: string }>;
      keyVariable: "PKCS11_KEY_LABELS" | "PKCS11_KEY_IDS";
      addresses: string[];
      sessions: number;
      timeoutMs: number;
    }
  | { kind: "aws-kms"; keyIds: string[]; addresses: string[]; timeoutMs: number; concurrency: number };

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
  /** SIGNER=pkcs11 or aws-kms: the keys are there instead (no private keys, no keystore). */
  signer?: RemoteSignerConfig;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigError";
  }
}
