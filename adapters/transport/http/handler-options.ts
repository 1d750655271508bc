/** What the HTTP handler (http-handler.ts) is built from: the use cases, the key check, and the settings of each step. */
import type { Logger } from "pino";

import type { UseCases } from "../../../core/index.js";
import type { Readiness } from "../json/index.js";
import type { ApiKeyVerifier } from "../request/index.js";
import type { TrustedProxies } from "./client-address.js";
import type { RateLimitOptions } from "./rate-limit.js";
import type { RequestMetrics } from "./steps/observe.js";

export interface HttpHandlerOptions {
  useCases: UseCases;
  verifier: ApiKeyVerifier;
  readiness: () => Promise<Readiness>;
  /** How long a readiness answer is reused (see json/readiness.ts). Default 1000 ms. */
  readinessCacheMs?: number;
  log: Logger;
  /** Largest request body or RPC message, in bytes. Default 16 KiB. */
  bodyLimitBytes?: number;
  /** Aborted when the shutdown begins: gRPC health answers NOT_SERVING, and its Watch streams end. */
  closing?: AbortSignal;
  /** Origins browsers may call from (CORS_ORIGINS; "*" = any); empty or absent = CORS off. */
  corsOrigins?: readonly string[];
  /** Per api key, and refused keys per client address (rate-limit.ts); absent = none. */
  rateLimits?: RateLimitOptions;
  /** TRUSTED_PROXIES: the peers whose X-Forwarded-For names the client (client-address.ts); absent = none. */
  trustedProxies?: TrustedProxies;
  /**
   * Whether the service's own RPCs over gRPC take the lean path (rpc/grpc-unary.ts). Default true;
   * false serves every RPC through Connect, which the equivalence tests compare it with.
   */
  grpcFastPath?: boolean;
  /** Where each answered request is counted (adapters/observability/metrics.ts). */
  metrics?: RequestMetrics;
  /** Told when the access file's verifier refuses a key it knows (expired, or used from elsewhere): the metrics. */
  onRefusedKnownKey?: (rule: "key_expired" | "key_address") => void;
}
