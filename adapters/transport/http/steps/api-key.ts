/**
 * Steps 3 and 5, the api_key: checked once per request, for every protocol, whether or not the
 * request carries a key, and the verifier's answer put in the request's context (`key`), which
 * the pipeline hands to what comes after: the limits (step 4), the request's handler (the JSON
 * routes, which answer 401 only for a route that takes a key, after 404 and 405; Connect's
 * handlers and the lean gRPC path, which read the caller from it), and the access line. An RPC
 * without a valid key is refused here (step 5), after the limits, before a byte of its body is read.
 */
import {
  API_KEY_HEADER,
  type ApiKeyVerifier,
  type NodeServerRequest,
  type NodeServerResponse,
  type RequestContext,
} from "../../request/index.js";
import { RPC_PATH_PREFIX } from "../protocol-of.js";
import { refuseUnauthenticated } from "../refusals.js";

export interface ApiKeyStep {
  /**
   * Step 3: the key, into `context.key`: one hash lookup, cheaper than the throttle's
   * bookkeeping, which is why it comes before the limits. The verifier is given the context, and
   * through it the client's address.
   */
  check(req: NodeServerRequest, context: RequestContext): void;
  /** Step 5: refuses an RPC whose key was refused (true: answered). */
  refuseRpc(req: NodeServerRequest, res: NodeServerResponse, context: RequestContext): boolean;
}

/**
 * @param countRefusedKey - the refused-key throttle's count (limits.ts), absent without one
 * @param onRefusedKnownKey - told when a key the access file knows is refused (expired, or from elsewhere): the metrics
 */
export function apiKeyStep(
  verifier: ApiKeyVerifier,
  countRefusedKey?: (context: RequestContext) => void,
  onRefusedKnownKey?: (rule: "key_expired" | "key_address") => void,
): ApiKeyStep {
  return {
    check(req, context) {
      const raw = req.headers[API_KEY_HEADER];
      const key = verifier.check(Array.isArray(raw) ? raw.join(",") : raw, context);
      context.key = key;
      if (!key.ok && key.rule !== undefined) {
        // The client is told "invalid api_key" and nothing more; the operator, which key and why.
        context.log.warn({ reason: key.reason }, "known api key refused");
        onRefusedKnownKey?.(key.rule);
      }
    },
    refuseRpc(req, res, context) {
      const { key } = context;
      if (key === undefined || key.ok || !context.path.startsWith(RPC_PATH_PREFIX)) return false;
      res.setHeader("x-request-id", context.id);
      context.log.info({ code: "unauthenticated", reason: key.message, procedure: context.path }, "rpc refused");
      countRefusedKey?.(context);
      refuseUnauthenticated(req, res, context, key.message);
      return true;
    },
  };
}
