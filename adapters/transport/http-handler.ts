import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { Logger } from "pino";

import type { UseCases } from "../../core/index.js";
import { apiKeyInterceptor } from "./api-key.interceptor.js";
import type { ApiKeyVerifier } from "./api-key.js";
import { errorInterceptor, kRequestLog } from "./error.interceptor.js";
import { minimalGrpcMessageEncoding } from "./grpc-message.js";
import { DEFAULT_BODY_LIMIT_BYTES, jsonRoutes, type Readiness } from "./json-routes.js";
import { bindRequestContext, requestContext, requestIdFrom } from "./logger.js";
import type { NodeHandlerFn } from "./node-types.js";
import { tokenRoutes } from "./routes.js";

export interface HttpHandlerOptions {
  useCases: UseCases;
  verifier: ApiKeyVerifier;
  readiness: () => Promise<Readiness>;
  log: Logger;
  /** Largest request body or RPC message, in bytes. Default 16 KiB. */
  bodyLimitBytes?: number;
}

/**
 * The one request handler behind every protocol on the port, for HTTP/1.1 and
 * HTTP/2 alike:
 * - RPCs (gRPC, Connect, gRPC-Web) on /token.v1.TokenService/*, through the error
 *   and api_key interceptors;
 * - everything else to the JSON routes (the adapter's fallback).
 *
 * Every request gets a request id (an acceptable incoming x-request-id, else a new
 * UUID), echoed in the x-request-id response header and carried by every log line,
 * and one "request completed" line. Headers, and so api_key, are never logged.
 */
export function createHttpHandler(options: HttpHandlerOptions): NodeHandlerFn {
  const { log } = options;
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const connect = connectNodeAdapter({
    routes: tokenRoutes(options.useCases),
    // First in the list is outermost: errors from the key check are logged too.
    interceptors: [errorInterceptor(log), apiKeyInterceptor(options.verifier)],
    readMaxBytes: bodyLimitBytes,
    contextValues: (req) => createContextValues().set(kRequestLog, requestContext(req, log).log),
    fallback: jsonRoutes({
      useCases: options.useCases,
      verifier: options.verifier,
      readiness: options.readiness,
      bodyLimitBytes,
      log,
    }),
  });

  return (req, res) => {
    const id = requestIdFrom(req);
    const reqLog = log.child({ reqId: id });
    bindRequestContext(req, { id, log: reqLog });
    const started = process.hrtime.bigint();
    res.setHeader("x-request-id", id);
    res.once("close", () => {
      const path = new URL(req.url ?? "/", "http://localhost").pathname;
      reqLog.info(
        {
          method: req.method,
          path,
          httpVersion: req.httpVersion,
          status: res.statusCode,
          completed: res.writableFinished,
          ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        },
        "request completed",
      );
    });
    minimalGrpcMessageEncoding(req, res);
    connect(req, res);
  };
}
