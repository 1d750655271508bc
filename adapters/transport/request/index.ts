/**
 * The request's basics, which every protocol on the port reads the same way: Node's request and
 * response types, the headers the service reads, the request context (id, path, logger, client
 * address, the api_key check) and the route handler that takes it, the api_key verifier, and how
 * an early answer ends a body still coming. The lowest folder of the transport: it imports none of
 * the others, so each of them can import it.
 */
export {
  MISSING_KEY_MESSAGE,
  WRONG_KEY_MESSAGE,
  callerOf,
  createApiKeyVerifier,
  type AcceptedKey,
  type ApiKeyCheck,
  type ApiKeyVerifier,
  type KeyClient,
} from "./api-key.js";
export { createAccessKeyVerifier } from "./access-keys.js";
export { DISCARD_LIMIT_BYTES, LINGER_MS, discardRest } from "./early-answer.js";
export { API_KEY_HEADER, IDEMPOTENCY_KEY_HEADER, QUOTE_ID_HEADER } from "./headers.js";
export type { NodeHandlerFn, NodeServerRequest, NodeServerResponse } from "./node-types.js";
export {
  bindRequestContext,
  boundRequestContext,
  newRequestId,
  requestContext,
  requestIdFrom,
  type ClientAddressOf,
  type RequestContext,
  type RouteHandler,
} from "./request-context.js";
export { requestPath } from "./request-path.js";
