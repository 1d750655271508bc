/**
 * The one request handler behind every protocol on the port, for HTTP/1.1 and HTTP/2 alike: a
 * short pipeline of named steps, each in its own file under steps/, so that a rule that applies
 * to every protocol has one place, ending in the one router (router.ts, built by routes.ts). In
 * this order:
 * 1. the request context (request/request-context.ts): a request id (an acceptable incoming
 *    x-request-id, else a new UUID), echoed in the x-request-id response header and carried by
 *    every log line, the path, and the client's address by TRUSTED_PROXIES' rule (found when first
 *    asked for); the pipeline hands it to each step and to the request's handler;
 * 2. CORS (steps/cors.ts): a preflight is answered when CORS_ORIGINS allows its origin;
 * 3. the api_key (steps/api-key.ts): checked once for every request, before the limits (one hash
 *    lookup, cheaper than the throttle's bookkeeping), into the context (`key`);
 * 4. the limits (steps/limits.ts): a request without a valid key from a client address with too
 *    many refused keys (the probes excepted), then a key over its rate;
 * 5. an RPC without a valid key refused (steps/api-key.ts), before a byte of its body is read;
 * 6. the router (router.ts): the path's handler (TokenService's procedures to the lean gRPC path
 *    or Connect, gRPC health and reflection, /docs, the JSON routes), or the fallback (an unknown
 *    RPC's "unimplemented", a 404), given the context;
 * 7. observe (steps/observe.ts): the request's metrics and one "request completed" line when info
 *    is logged, written by `answered`, which the server (server.ts) calls from its own listener
 *    when the response closes.
 * The refusals of steps 4 and 5 and of an unknown RPC take each protocol's own form (refusals.ts).
 * Headers, and so api_key, are never logged.
 */
import { bindRequestContext, type ClientAddressOf, type NodeHandlerFn } from "../request/index.js";
import { clientAddressOf } from "./client-address.js";
import type { HttpHandlerOptions } from "./handler-options.js";
import type { ServedHandler } from "./requests.js";
import { serviceRoutes } from "./routes.js";
import { apiKeyStep } from "./steps/api-key.js";
import { corsPolicy } from "./steps/cors.js";
import { limitsStep } from "./steps/limits.js";
import { observeStep } from "./steps/observe.js";

export type { HttpHandlerOptions } from "./handler-options.js";

export function createHttpHandler(options: HttpHandlerOptions): ServedHandler {
  const { log, trustedProxies } = options;
  const addressOf: ClientAddressOf = (req) => clientAddressOf(req, trustedProxies);
  const cors = corsPolicy(options.corsOrigins ?? []);
  const limits = limitsStep(options.rateLimits);
  const keys = apiKeyStep(options.verifier, limits.countRefusedKey, options.onRefusedKnownKey);
  const { router, jsonLabel } = serviceRoutes(options, limits.countRefusedKey);
  const answered = observeStep({ log, metrics: options.metrics, routeOf: jsonLabel });

  const handler: NodeHandlerFn = (req, res) => {
    const context = bindRequestContext(req, log, addressOf); // 1
    if (cors?.(req, res)) return; // 2: a preflight, answered
    keys.check(req, context); // 3
    if (limits.refuse(req, res, context)) return; // 4
    if (keys.refuseRpc(req, res, context)) return; // 5
    router.route(req, res, context); // 6
  };
  return Object.assign(handler, { answered }); // 7, when the response closes
}
