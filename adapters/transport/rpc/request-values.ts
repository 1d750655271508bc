/**
 * The request's context (request/request-context.ts) in Connect's context values: what the
 * router hands an RPC as an argument (its id, logger, api_key check, outcome), as Connect hands
 * its handlers and interceptors their context values.
 */
import { createContextKey, createContextValues, type ContextValues } from "@connectrpc/connect";

import type { AcceptedKey, RequestContext } from "../request/index.js";

/** The request's context; undefined for a router mounted without the service's handler (an in-memory transport). */
export const kRequestContext = createContextKey<RequestContext | undefined>(undefined, {
  description: "request context",
});

/** Connect's context values for a request: its context. */
export function requestValues(context: RequestContext): ContextValues {
  return createContextValues().set(kRequestContext, context);
}

/** The key the pipeline accepted for the request whose context values these are, if it accepted one. */
export function acceptedKey(values: ContextValues): AcceptedKey | undefined {
  const key = values.get(kRequestContext)?.key;
  return key?.ok ? key : undefined;
}
