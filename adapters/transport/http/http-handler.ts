/**
 * The one request handler behind every protocol on the port, for HTTP/1.1 and HTTP/2 alike: a
 * short pipeline of named steps, each in its own file under steps/, so that a rule that applies
 * to every protocol has one place. In this order:
 * 1. the request context (request/request-context.ts): a request id (an acceptable incoming
 *    x-request-id, else a new UUID), echoed in the x-request-id response header and carried by
 *    every log line, and the path;
 * 2. CORS (steps/cors.ts): a preflight is answered when CORS_ORIGINS allows its origin;
 * 3. the api_key (steps/api-key.ts): checked once, when there is one and for every RPC, before
 *    the limits (one hash lookup, cheaper than the throttle's bookkeeping);
 * 4. the limits (steps/limits.ts): a request without a valid key from a client address with too
 *    many refused keys (the probes excepted), then a key over its rate;
 * 5. an RPC without a valid key refused (steps/api-key.ts), before a byte of its body is read;
 * 6. dispatch (steps/dispatch.ts): TokenService to the lean gRPC path or Connect, gRPC health
 *    and reflection, /docs, an unknown RPC's "unimplemented", the JSON routes;
 * 7. observe (steps/observe.ts): the request's metrics and one "request completed" line when info
 *    is logged, written by `answered`, which the server (server.ts) calls from its own listener
 *    when the response closes.
 * The refusals of steps 4 and 5 and of an unknown RPC take each protocol's own form (refusals.ts).
 * Headers, and so api_key, are never logged.
 */
import { bindRequestContext, type NodeHandlerFn } from "../request/index.js";
import type { HttpHandlerOptions } from "./handler-options.js";
import { protocolHandlers } from "./protocol-handlers.js";
import type { ServedHandler } from "./requests.js";
import { apiKeyStep } from "./steps/api-key.js";
import { corsPolicy } from "./steps/cors.js";
import { dispatchStep } from "./steps/dispatch.js";
import { limitsStep } from "./steps/limits.js";
import { observeStep } from "./steps/observe.js";

export type { HttpHandlerOptions } from "./handler-options.js";

export function createHttpHandler(options: HttpHandlerOptions): ServedHandler {
  const { log } = options;
  const cors = corsPolicy(options.corsOrigins ?? []);
  const limits = limitsStep(options.rateLimits, options.trustedProxies);
  const keys = apiKeyStep(options.verifier, limits.countRefusedKey, options.trustedProxies, options.onRefusedKnownKey);
  const handlers = protocolHandlers(options, limits.countRefusedKey);
  const dispatch = dispatchStep(handlers);
  const answered = observeStep({ log, metrics: options.metrics, routeOf: handlers.json.routeOf });

  const handler: NodeHandlerFn = (req, res) => {
    const context = bindRequestContext(req, log); // 1
    if (cors?.(req, res)) return; // 2: a preflight, answered
    const key = keys.check(req, context); // 3
    if (limits.refuse(req, res, context, key)) return; // 4
    if (keys.refuseRpc(req, res, context, key)) return; // 5
    dispatch(req, res, context, key); // 6
  };
  return Object.assign(handler, { answered }); // 7, when the response closes
}
