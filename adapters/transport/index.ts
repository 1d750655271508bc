/**
 * The transport adapter's door, for the composition root (adapters/main.ts), the configuration
 * and the tests: the server and its handler, and what configures them. Inside, each folder is a
 * job with its own index.ts as its only door (.dependency-cruiser.cjs holds them to it):
 * - request/: what every protocol reads of a request (types, headers, context, the api_key check);
 * - http/: the server and the handler's pipeline (CORS, api_key, limits, dispatch, observe);
 * - json/: the JSON routes and their small HTTP layer;
 * - rpc/: TokenService over Connect and the lean gRPC path, and the error map;
 * - grpc-services/: gRPC health and reflection;
 * - docs/: the OpenAPI document and the docs page.
 *
 * The folders are layered, each importing only those below it (.dependency-cruiser.cjs):
 * request/ at the bottom; rpc/ and docs/ on it; json/ on those three (its errors are rpc/'s error
 * map, /api/v1/openapi.json is docs/'s); http/ on top, wiring every other into its pipeline.
 * grpc-services/ imports none of them.
 */
export {
  DEFAULT_LIMITS,
  TrustedProxies,
  createHttpHandler,
  parseTrustedProxies,
  startServer,
  type ApiServer,
  type BucketLimit,
  type HttpHandlerOptions,
  type RateLimitOptions,
  type ServerLimits,
  type TlsOptions,
} from "./http/index.js";
export type { Readiness } from "./json/index.js";
export { createAccessKeyVerifier, createApiKeyVerifier, type ApiKeyVerifier } from "./request/index.js";
