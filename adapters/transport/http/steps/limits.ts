/**
 * Step 4, the limits (rate-limit.ts), after the key is checked: a request without a valid key
 * from a client address with too many refused keys (never the probes: an orchestrator must not
 * restart a healthy instance because some client behind the same address keeps sending a wrong
 * key), then a key over its own rate. And the count of refused keys per address, which the
 * api_key step (an RPC) and the JSON routes (a route that takes a key) add to.
 */
import {
  API_KEY_HEADER,
  type NodeServerRequest,
  type NodeServerResponse,
  type RequestContext,
} from "../../request/index.js";
import { HEALTH_PREFIX } from "../protocol-of.js";
import { TokenBuckets, type RateLimitOptions } from "../rate-limit.js";
import { refuseRateLimited } from "../refusals.js";

/** The probes, never throttled for refused keys (nor is gRPC health). */
const PROBES = new Set(["/healthz", "/readyz"]);

export interface LimitsStep {
  /** Refuses a request over a limit (true: answered with 429 or RESOURCE_EXHAUSTED), after its key's check (step 3). */
  refuse(req: NodeServerRequest, res: NodeServerResponse, context: RequestContext): boolean;
  /** Counts a refused key against the request's client address; absent without the throttle. */
  countRefusedKey: ((context: RequestContext) => void) | undefined;
}

/** The client's address is the context's, by TRUSTED_PROXIES' rule (client-address.ts). */
export function limitsStep(rateLimits?: RateLimitOptions): LimitsStep {
  // Refused keys per client address: counted where a key is refused (the JSON routes, the RPC check).
  const refusedKeys = rateLimits?.authFailures ? new TokenBuckets(rateLimits.authFailures) : undefined;
  const perKey = rateLimits?.perKey ? new TokenBuckets(rateLimits.perKey) : undefined;
  return {
    refuse(req, res, context) {
      const { path, key } = context;
      if (refusedKeys !== undefined && key?.ok !== true && !PROBES.has(path) && !path.startsWith(HEALTH_PREFIX)) {
        // A client address with too many refused keys: refused, unless the key is valid (a valid key
        // is never refused for its neighbours' mistakes behind one address) or it is a probe. The
        // address by TRUSTED_PROXIES' rule: needed only for a request without a valid key.
        const blocked = refusedKeys.peek(context.clientAddress);
        if (!blocked.ok) {
          res.setHeader("x-request-id", context.id);
          refuseRateLimited(
            req,
            res,
            context,
            blocked.retryAfterS,
            `too many requests with a refused ${API_KEY_HEADER} from this address; retry in ${blocked.retryAfterS} s`,
          );
          return true;
        }
      }
      if (perKey !== undefined && key?.ok) {
        const turn = perKey.take(key.scope);
        if (!turn.ok) {
          res.setHeader("x-request-id", context.id);
          refuseRateLimited(
            req,
            res,
            context,
            turn.retryAfterS,
            `rate limit of this ${API_KEY_HEADER} reached; retry in ${turn.retryAfterS} s`,
          );
          return true;
        }
      }
      return false;
    },
    countRefusedKey: refusedKeys === undefined ? undefined : (context) => void refusedKeys.take(context.clientAddress),
  };
}
