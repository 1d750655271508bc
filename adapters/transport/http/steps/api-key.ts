/**
 * Steps 3 and 5, the api_key: checked once per request, for every protocol, and the result kept
 * on the request for what comes after: the limits (step 4), the JSON routes (which answer 401
 * only for a route that takes a key, after 404 and 405), and Connect (whose handlers read the
 * caller's scope from it, protocol-handlers.ts). An RPC without a valid key is refused here
 * (step 5), after the limits, before a byte of its body is read.
 */
import {
  API_KEY_HEADER,
  type ApiKeyCheck,
  type ApiKeyVerifier,
  type NodeServerRequest,
  type NodeServerResponse,
  type RequestContext,
} from "../../request/index.js";
import { clientAddressOf, type TrustedProxies } from "../client-address.js";
import { RPC_PATH_PREFIX } from "../protocol-of.js";
import { refuseUnauthenticated } from "../refusals.js";

/** Where the pipeline keeps a request's api_key check (a property, as request-context.ts keeps its context). */
const kKeyCheck = Symbol("api_key check");
type WithKeyCheck = NodeServerRequest & { [kKeyCheck]?: ApiKeyCheck };

/** The api_key check the pipeline made of a request, or undefined when it made none (no key, not an RPC). */
export function checkedKey(req: NodeServerRequest): ApiKeyCheck | undefined {
  return (req as WithKeyCheck)[kKeyCheck];
}

export interface ApiKeyStep {
  /**
   * Step 3: the key, when there is one (and for every RPC): one hash lookup, cheaper than the
   * throttle's bookkeeping, which is why it comes before the limits.
   */
  check(req: NodeServerRequest, context: RequestContext): ApiKeyCheck | undefined;
  /** Step 5: refuses an RPC whose key was refused (true: answered). */
  refuseRpc(req: NodeServerRequest, res: NodeServerResponse, context: RequestContext, key?: ApiKeyCheck): boolean;
}

/**
 * @param countRefusedKey - the refused-key throttle's count (limits.ts), absent without one
 * @param onRefusedKnownKey - told when a key the access file knows is refused (expired, or from elsewhere): the metrics
 */
export function apiKeyStep(
  verifier: ApiKeyVerifier,
  countRefusedKey?: (req: NodeServerRequest) => void,
  proxies?: TrustedProxies,
  onRefusedKnownKey?: (rule: "key_expired" | "key_address") => void,
): ApiKeyStep {
  return {
    check(req, context) {
      const raw = req.headers[API_KEY_HEADER];
      if (raw === undefined && !context.path.startsWith(RPC_PATH_PREFIX)) return undefined;
      const key = verifier.check(Array.isArray(raw) ? raw.join(",") : raw, () => clientAddressOf(req, proxies));
      (req as WithKeyCheck)[kKeyCheck] = key;
      if (key.ok) context.keyName = key.caller?.key?.name;
      else if (key.rule !== undefined) {
        // The client is told "invalid api_key" and nothing more; the operator, which key and why.
        context.log.warn({ reason: key.reason }, "known api key refused");
        onRefusedKnownKey?.(key.rule);
      }
      return key;
    },
    refuseRpc(req, res, context, key) {
      if (key === undefined || key.ok || !context.path.startsWith(RPC_PATH_PREFIX)) return false;
      res.setHeader("x-request-id", context.id);
      context.log.info({ code: "unauthenticated", reason: key.message, procedure: context.path }, "rpc refused");
      countRefusedKey?.(req);
      refuseUnauthenticated(req, res, key.message);
      return true;
    },
  };
}
