/**
 * Readiness: what /readyz reports and gRPC health follows, one check shared by both, reused for a
 * while and bounded in time, so that probes cost the node a check a second at most.
 */
import { withTimeout } from "./json-http.js";

/** What /readyz reports. */
export interface Readiness {
  ready: boolean;
  detail: string;
}

/**
 * `readiness`, one check at a time, reused for `cacheMs` from when it started (failures too),
 * and failing after `timeoutMs` (default 5000). `cacheMs` 0 checks every time.
 */
export function cachedReadiness(
  readiness: () => Promise<Readiness>,
  { timeoutMs = 5_000, cacheMs }: { timeoutMs?: number; cacheMs: number },
): () => Promise<Readiness> {
  let last: { at: number; result: Promise<Readiness> } | undefined;
  return () => {
    const now = Date.now();
    if (last === undefined || now - last.at >= cacheMs) {
      last = { at: now, result: withTimeout(readiness(), timeoutMs, `readiness check took over ${timeoutMs} ms`) };
    }
    return last.result;
  };
}
