/**
 * Step 7, observe: a request's end, told by the server when its response closes
 * (ServedHandler.answered), gives its metrics (route, protocol, code, seconds) and its one
 * "request completed" line, whatever protocol answered it, from the request's context (the one
 * its handler was given, with its api_key check). An RPC's code is the context's `rpcCode`,
 * which whoever answered it writes: the error interceptor (Connect), the lean gRPC path, or a
 * refusal of the pipeline's own (refusals.ts).
 */
import type { Logger } from "pino";

import { accessLog } from "../../../shared/logger.js";
import { boundRequestContext, type NodeServerResponse } from "../../request/index.js";
import { codeName } from "../../rpc/index.js";
import { RPC_ROUTES, protocolOf } from "../protocol-of.js";

/** Where each answered request is counted (adapters/observability/metrics.ts). */
export interface RequestMetrics {
  request(route: string, protocol: string, code: string, seconds: number): void;
}

/**
 * The observe step. Headers, and so api_key, are never logged.
 * @param routeOf - the JSON routes' label of a path
 */
export function observeStep(options: {
  log: Logger;
  metrics: RequestMetrics | undefined;
  routeOf: (path: string) => string;
}): (res: NodeServerResponse) => void {
  const { log, metrics, routeOf } = options;
  const access = accessLog(log);
  return (res) => {
    const { req } = res;
    const context = boundRequestContext(req);
    // Not taken by this handler (refused by the server before), or nothing to tell.
    const logged = log.isLevelEnabled("info");
    if (context === undefined || (metrics === undefined && !logged)) return;
    const { id, path } = context;
    const seconds = (performance.now() - context.started) / 1000;
    if (metrics !== undefined) {
      const protocol = protocolOf(req, path);
      const route = protocol === "http" ? routeOf(path) : RPC_ROUTES.has(path) ? path : "other";
      const code =
        protocol === "grpc" || protocol === "grpc-web" ? (context.rpcCode ?? grpcCodeOf(res)) : String(res.statusCode);
      metrics.request(route, protocol, code, seconds);
    }
    if (logged) {
      access({
        reqId: id,
        method: req.method,
        path,
        httpVersion: req.httpVersion,
        status: res.statusCode,
        completed: res.writableFinished,
        ms: Math.round(seconds * 1_000_000) / 1000,
        key: context.key?.ok === true ? context.key.caller?.key?.name : undefined,
      });
    }
  };
}

/** A trailers-only answer's gRPC code name, from its grpc-status header. */
function grpcCodeOf(res: NodeServerResponse): string {
  const status = Number(res.getHeader("grpc-status"));
  return Number.isInteger(status) ? codeName(status) : "unknown";
}
