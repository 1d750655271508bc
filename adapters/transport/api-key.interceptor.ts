import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";

import type { ApiKeyVerifier } from "./api-key.js";
import { API_KEY_HEADER } from "./headers.js";

/** Which accepted key authenticated the call (its position in the key list), for handlers and logs. */
export const kCallerKeyIndex = createContextKey<number | undefined>(undefined, { description: "caller key index" });

/** The caller's scope (a hash of its key), which scopes its idempotency keys. */
export const kCallerScope = createContextKey<string>("", { description: "caller scope" });

/**
 * Refuses every RPC (gRPC, Connect, gRPC-Web) whose `api_key` header or metadata
 * entry is missing or wrong with Code.Unauthenticated, before the handler runs, so a
 * refused trade sends nothing. On success the key's index goes into the context.
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
