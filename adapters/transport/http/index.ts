/**
 * The HTTP side of the port: the server (connections, limits on what a client may hold, HTTP/1.1
 * and HTTP/2 guards, the graceful stop) and the one handler behind it, a pipeline of steps
 * (request context, CORS, api_key, rate limits, dispatch to a protocol, observe).
 */
export { TrustedProxies, clientAddressOf, parseTrustedProxies } from "./client-address.js";
export { createHttpHandler, type HttpHandlerOptions } from "./http-handler.js";
export { TokenBuckets, type BucketLimit, type RateLimitOptions } from "./rate-limit.js";
export { DEFAULT_LIMITS, type ServerLimits } from "./server-limits.js";
export { startServer, type ApiServer, type ServedHandler, type ServerOptions, type TlsOptions } from "./server.js";
export type { RequestMetrics } from "./steps/observe.js";
