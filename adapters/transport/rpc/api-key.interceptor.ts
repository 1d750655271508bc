import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";

import type { Caller } from "../../../core/index.js";
import { API_KEY_HEADER, type ApiKeyVerifier } from "../request/index.js";

/** Which accepted key authenticated the call (its position in the key list), for handlers and logs. */
export const kCallerKeyIndex = createContextKey<number | undefined>(undefined, { description: "caller key index" });

/** The caller's scope (a hash of its key), which scopes its idempotency keys. */
export const kCallerScope = createContextKey<string>("", { description: "caller scope" });
/** The caller with its access-file entry, when the service runs with ACCESS_FILE. */
export const kCaller = createContextKey<Caller | undefined>(undefined, { description: "caller" });

/**
 * Refuses every RPC (gRPC, Connect, gRPC-Web) whose `api_key` header or metadata
 * entry is missing or wrong with Code.Unauthenticated, before the handler runs, so a
 * refused trade sends nothing. On success the key's index goes into the context.
 *
 * For TokenService mounted on a router of its own (an in-memory transport). The service's
 * handler does not use it: its api_key step (http/steps/api-key.ts) checks the key once for every
 * protocol, refuses an RPC without a valid one before Connect sees it, and sets the same two
 * context values from its check (http/protocol-handlers.ts).
 */
export function apiKeyInterceptor(verifier: ApiKeyVerifier): Interceptor {
  return (next) => async (req) => {
    const result = verifier.check(req.header.get(API_KEY_HEADER));
    if (!result.ok) throw new ConnectError(result.message, Code.Unauthenticated);
    req.contextValues.set(kCallerKeyIndex, result.keyIndex);
    req.contextValues.set(kCallerScope, result.scope);
    return next(req);
  };
}
