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
  check(req: NodeServerRequest, path: string): ApiKeyCheck | undefined;
  /** Step 5: refuses an RPC whose key was refused (true: answered). */
  refuseRpc(req: NodeServerRequest, res: NodeServerResponse, context: RequestContext, key?: ApiKeyCheck): boolean;
}

/** @param countRefusedKey - the refused-key throttle's count (limits.ts), absent without one */
export function apiKeyStep(verifier: ApiKeyVerifier, countRefusedKey?: (req: NodeServerRequest) => void): ApiKeyStep {
  return {
    check(req, path) {
      const raw = req.headers[API_KEY_HEADER];
      if (raw === undefined && !path.startsWith(RPC_PATH_PREFIX)) return undefined;
      const key = verifier.check(Array.isArray(raw) ? raw.join(",") : raw);
      (req as WithKeyCheck)[kKeyCheck] = key;
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
