/**
 * How the service meets the network in front of it: the rate limits (RATE_LIMIT_RPS,
 * RATE_LIMIT_BURST, AUTH_FAILURES_PER_MINUTE), the trusted proxies and the CORS origins.
 */
import { parseTrustedProxies, type RateLimitOptions } from "../../transport/index.js";
import type { Env } from "./schema.js";

export function rateLimits(e: Env, problems: string[]): RateLimitOptions {
  if (e.RATE_LIMIT_BURST !== undefined && e.RATE_LIMIT_RPS === 0)
    problems.push("RATE_LIMIT_BURST: is only used with RATE_LIMIT_RPS");
  return {
    ...(e.RATE_LIMIT_RPS > 0
      ? { perKey: { rate: e.RATE_LIMIT_RPS, burst: e.RATE_LIMIT_BURST ?? 3 * e.RATE_LIMIT_RPS } }
      : {}),
    ...(e.AUTH_FAILURES_PER_MINUTE > 0
      ? { authFailures: { rate: e.AUTH_FAILURES_PER_MINUTE / 60, burst: e.AUTH_FAILURES_PER_MINUTE } }
      : {}),
  };
}

/** TRUSTED_PROXIES, parsed; each entry that is no address or CIDR is a problem. */
export function trustedProxies(e: Env, problems: string[]): string[] {
  const trusted = parseTrustedProxies(e.TRUSTED_PROXIES ?? "");
  for (const reason of trusted.problems) problems.push(`TRUSTED_PROXIES: ${reason}`);
  return trusted.proxies;
}

export function corsOrigins(e: Env): string[] {
  return (e.CORS_ORIGINS ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter((o) => o !== "");
}
