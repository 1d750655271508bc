import type { Http2ServerRequest, ServerHttp2Stream } from "node:http2";

import { createContextValues } from "@connectrpc/connect";
import type { Logger } from "pino";

import type { UseCases } from "../../core/index.js";
import { apiKeyInterceptor } from "./api-key.interceptor.js";
import type { ApiKeyCheck, ApiKeyVerifier } from "./api-key.js";
import { clientAddressOf, type TrustedProxies } from "./client-address.js";
import { API_KEY_HEADER } from "./headers.js";
import { errorInterceptor, kRequestLog, kRpcOutcome } from "./error.interceptor.js";
import { codeName } from "./error-map.js";
import { grpcPercentEncode, minimalGrpcMessageEncoding } from "./grpc-message.js";
import { discardRest } from "./json-http.js";
import { DEFAULT_BODY_LIMIT_BYTES, cachedReadiness, jsonRoutes, type Readiness } from "./json-routes.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1Alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { TokenService } from "../../gen/tokentrade/v1/token_pb.js";
import { healthService } from "./health.service.js";
import { Reflection, reflectionService } from "./reflection.service.js";
import { rpcAdapter } from "./rpc-adapter.js";
import { grpcUnary } from "./grpc-unary.js";
import { tokenCalls } from "./token.service.js";
import { corsPolicy } from "./cors.js";
import { docsHandler } from "./docs.js";
import { TokenBuckets, type RateLimitOptions } from "./rate-limit.js";
import { accessLog } from "../shared/logger.js";
import { bindRequestContext, boundRequestContext, requestContext } from "./request-context.js";
import type { NodeHandlerFn, NodeServerRequest, NodeServerResponse } from "./node-types.js";
import type { ServedHandler } from "./server.js";
import { tokenRoutes } from "./rpc-routes.js";

/** Every TokenService RPC's path starts with this; nothing else does. */
const RPC_PATH_PREFIX = `/${TokenService.typeName}/`;

/** gRPC's own services, served without an api_key: probes and tools call them without one. */
const ECOSYSTEM_SERVICES = [Health, ServerReflectionV1, ServerReflectionV1Alpha] as const;
const ECOSYSTEM_PATH_PREFIXES = ECOSYSTEM_SERVICES.map((service) => `/${service.typeName}/`);

/**
 * The probes, never throttled for refused keys: an orchestrator must not restart a healthy
 * instance because some client behind the same address keeps sending a wrong key.
 */
const PROBES = new Set(["/healthz", "/readyz"]);
const HEALTH_PREFIX = `/${Health.typeName}/`;

/** Where the handler keeps a request's api_key check for the JSON routes (a property, as request-context.ts keeps its context). */
const kKeyCheck = Symbol("api_key check");
type WithKeyCheck = NodeServerRequest & { [kKeyCheck]?: ApiKeyCheck };

/** An RPC's path shape: /package.Service/Method. */
const RPC_PATH = /^\/[A-Za-z_][\w.]*\/[A-Za-z_]\w*$/;

export interface HttpHandlerOptions {
  useCases: UseCases;
  verifier: ApiKeyVerifier;
  readiness: () => Promise<Readiness>;
  /** How long a readiness answer is reused (see json-routes.ts). Default 1000 ms. */
  readinessCacheMs?: number;
  log: Logger;
  /** Largest request body or RPC message, in bytes. Default 16 KiB. */
  bodyLimitBytes?: number;
  /** Aborted when the shutdown begins: gRPC health answers NOT_SERVING, and its Watch streams end. */
  closing?: AbortSignal;
  /** Origins browsers may call from (CORS_ORIGINS; "*" = any); empty or absent = CORS off. */
  corsOrigins?: readonly string[];
  /** Per api key, and refused keys per client address (rate-limit.ts); absent = none. */
  rateLimits?: RateLimitOptions;
  /** TRUSTED_PROXIES: the peers whose X-Forwarded-For names the client (client-address.ts); absent = none. */
  trustedProxies?: TrustedProxies;
  /**
   * Whether the service's own RPCs over gRPC take the lean path (grpc-unary.ts). Default true;
   * false serves every RPC through Connect, which the equivalence tests compare it with.
   */
  grpcFastPath?: boolean;
  /** Where each answered request is counted (adapters/observability/metrics.ts). */
  metrics?: { request(route: string, protocol: string, code: string, seconds: number): void };
}

/**
 * The one request handler behind every protocol on the port, for HTTP/1.1 and
 * HTTP/2 alike, in this order:
 * - CORS (cors.ts): preflights answered when CORS_ORIGINS allows their origin;
 * - rate limits (rate-limit.ts): the key checked first (when there is one, and for every RPC); a
 *   request without a valid key from a client address with too many refused keys (the probes
 *   excepted), then a key over its rate;
 * - RPCs (gRPC, Connect, gRPC-Web binary and text) on /tokentrade.v1.TokenService/*, to the
 *   Connect adapter (rpc-adapter.ts), the key checked first, then the error and api_key
 *   interceptors;
 * - gRPC health and reflection (health.service.ts, reflection.service.ts), without a key;
 * - /docs (docs.ts), then the JSON routes (json-routes.ts); an RPC to a service or method
 *   this server does not have gets its protocol's "unimplemented".
 *
 * Every request gets a request id (an acceptable incoming x-request-id, else a new
 * UUID), echoed in the x-request-id response header and carried by every log line,
 * and one "request completed" line when info is logged. Headers, and so api_key, are
 * never logged. The line and the request's metrics are written by `answered`, which the
 * server (server.ts) calls from its own listener when the response closes.
 */
export function createHttpHandler(options: HttpHandlerOptions): ServedHandler {
  const { log } = options;
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  // One readiness check for /readyz and gRPC health, shared and cached (see json-routes.ts).
  const readiness = cachedReadiness(options.readiness, { cacheMs: options.readinessCacheMs ?? 1_000 });
  // Refused keys per client address: counted where a key is refused (the JSON routes, the RPC check below).
  const refusedKeys = options.rateLimits?.authFailures ? new TokenBuckets(options.rateLimits.authFailures) : undefined;
  const json = jsonRoutes({
    useCases: options.useCases,
    verifier: options.verifier,
    readiness,
    readinessCacheMs: 0,
    bodyLimitBytes,
    log,
    ...(refusedKeys === undefined
      ? {}
      : {
          onRefusedKey: (req: NodeServerRequest) => refusedKeys.take(clientAddressOf(req, options.trustedProxies)),
        }),
    checkedKey: (req) => (req as WithKeyCheck)[kKeyCheck],
  });
  // What every RPC's handlers and interceptors reach: the request's logger and its outcome holder.
  const contextValues = (req: NodeServerRequest) =>
    createContextValues().set(kRequestLog, requestContext(req, log).log).set(kRpcOutcome, rpcOutcome(req));
  // Unknown RPCs get their protocol's "unimplemented"; anything else, the JSON routes.
  const fallback: NodeHandlerFn = (req, res) => (refuseUnknownRpc(req, res, log) ? undefined : json(req, res));
  const ecosystem = rpcAdapter({
    routes: (router) => {
      router.service(
        Health,
        healthService({
          ready: async () => (await readiness()).ready,
          services: [TokenService.typeName],
          closing: options.closing ?? new AbortController().signal,
        }),
      );
      const reflection = reflectionService(new Reflection([TokenService, ...ECOSYSTEM_SERVICES]));
      router.service(ServerReflectionV1, reflection);
      router.service(ServerReflectionV1Alpha, reflection);
    },
    interceptors: [errorInterceptor(log)],
    readMaxBytes: bodyLimitBytes,
    contextValues,
    fallback,
  });
  // TokenService's calls, one set for Connect and the lean gRPC path (one cached price message).
  const calls = tokenCalls(options.useCases);
  const connect = rpcAdapter({
    routes: tokenRoutes(options.useCases, calls),
    // First in the list is outermost: errors from the key check are logged too.
    interceptors: [errorInterceptor(log), apiKeyInterceptor(options.verifier)],
    readMaxBytes: bodyLimitBytes,
    // One rule for JSON on every path: a field the message does not have is refused, as the
    // /api/v1 routes refuse it (SPEC: "exactly the four fields"). Binary protobuf keeps its own
    // rule: unknown field numbers are skipped, so older servers read newer clients.
    jsonOptions: { ignoreUnknownFields: false },
    // Answers go out uncompressed: a receipt is 2 to 4 KiB, and gzip cost both ends more CPU
    // per sell than it saved. Compressed requests are still accepted.
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    contextValues,
    fallback,
  });

  // TokenService over gRPC without Connect's pipeline; what it does not take goes to Connect.
  const lean =
    options.grpcFastPath === false
      ? undefined
      : grpcUnary({
          calls,
          readMaxBytes: bodyLimitBytes,
          log,
          connect: (req, res, body) => {
            minimalGrpcMessageEncoding(req, res);
            connect.withBody(req, res, body);
          },
        });

  const access = accessLog(log);
  const { metrics } = options;
  const rpcRoutes = new Set([
    ...Object.values(TokenService.method).map((m) => `/${TokenService.typeName}/${m.name}`),
    ...ECOSYSTEM_SERVICES.flatMap((service) =>
      Object.values(service.method).map((m) => `/${service.typeName}/${m.name}`),
    ),
  ]);
  const cors = corsPolicy(options.corsOrigins ?? []);
  const docs = docsHandler();
  const perKey = options.rateLimits?.perKey ? new TokenBuckets(options.rateLimits.perKey) : undefined;
  /** A request's end, told by the server (ServedHandler.answered): its metrics and its access line. */
  const answered = (res: NodeServerResponse): void => {
    const { req } = res;
    const context = boundRequestContext(req);
    // Not taken by this handler (refused by the server before), or nothing to tell.
    const logged = log.isLevelEnabled("info");
    if (context === undefined || (metrics === undefined && !logged)) return;
    const { id, path } = context;
    const seconds = (performance.now() - context.started) / 1000;
    if (metrics !== undefined) {
      const protocol = protocolOf(req, path);
      const route = protocol === "http" ? json.routeOf(path) : rpcRoutes.has(path) ? path : "other";
      const code =
        protocol === "grpc" || protocol === "grpc-web"
          ? (rpcOutcome(req).code ?? grpcCodeOf(res))
          : String(res.statusCode);
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
      });
    }
  };

  const handler: NodeHandlerFn = (req, res) => {
    const context = bindRequestContext(req, log);
    const { path } = context;
    if (cors?.(req, res)) return; // a preflight, answered
    const raw = req.headers[API_KEY_HEADER];
    const rpc = path.startsWith(RPC_PATH_PREFIX);
    // The key first, when there is one (and for every RPC): one hash lookup, cheaper than the
    // throttle's bookkeeping. The JSON routes take this check rather than making it again.
    const key = rpc || raw !== undefined ? options.verifier.check(Array.isArray(raw) ? raw.join(",") : raw) : undefined;
    if (key !== undefined) (req as WithKeyCheck)[kKeyCheck] = key;
    // The client's address, by TRUSTED_PROXIES' rule: needed only for a request without a valid key.
    const address = refusedKeys !== undefined && key?.ok !== true ? clientAddressOf(req, options.trustedProxies) : "";
    if (refusedKeys !== undefined && key?.ok !== true && !PROBES.has(path) && !path.startsWith(HEALTH_PREFIX)) {
      // A client address with too many refused keys: refused, unless the key is valid (a valid key
      // is never refused for its neighbours' mistakes behind one address) or it is a probe.
      const blocked = refusedKeys.peek(address);
      if (!blocked.ok) {
        res.setHeader("x-request-id", context.id);
        refuseRateLimited(
          req,
          res,
          blocked.retryAfterS,
          `too many requests with a refused ${API_KEY_HEADER} from this address; retry in ${blocked.retryAfterS} s`,
        );
        return;
      }
    }
    if (perKey !== undefined && key?.ok) {
      const turn = perKey.take(key.scope);
      if (!turn.ok) {
        res.setHeader("x-request-id", context.id);
        refuseRateLimited(
          req,
          res,
          turn.retryAfterS,
          `rate limit of this ${API_KEY_HEADER} reached; retry in ${turn.retryAfterS} s`,
        );
        return;
      }
    }
    if (rpc) {
      res.setHeader("x-request-id", context.id);
      // The key first, before a byte of the body is read or buffered: a caller without one
      // holds nothing (the interceptor checks it again, for the context it sets).
      if (key !== undefined && !key.ok) {
        context.log.info({ code: "unauthenticated", reason: key.message, procedure: path }, "rpc refused");
        refusedKeys?.take(address);
        refuseUnauthenticated(req, res, key.message);
        return;
      }
      if (lean !== undefined && key?.ok && lean(req, res, key.scope, rpcOutcome(req))) return;
      minimalGrpcMessageEncoding(req, res);
      connect(req, res);
    } else if (ECOSYSTEM_PATH_PREFIXES.some((prefix) => path.startsWith(prefix))) {
      res.setHeader("x-request-id", context.id);
      minimalGrpcMessageEncoding(req, res);
      ecosystem(req, res);
    } else if (!docs(req, res, path)) {
      fallback(req, res); // the JSON routes send the x-request-id header with their others
    }
  };
  return Object.assign(handler, { answered });
}

/**
 * Answers an RPC to a service or method this server does not have as its protocol says, and
 * returns true: gRPC and gRPC-Web with grpc-status 12 (UNIMPLEMENTED) in a trailers-only
 * answer, Connect with HTTP 404 and code "unimplemented". Anything else is not an RPC: false.
 */
function refuseUnknownRpc(req: NodeServerRequest, res: NodeServerResponse, log: Logger): boolean {
  const { path, id } = requestContext(req, log);
  if (req.method !== "POST" || !RPC_PATH.test(path)) return false;
  const contentType = String(req.headers["content-type"] ?? "");
  const connectProtocol =
    req.headers["connect-protocol-version"] !== undefined || /^application\/(connect\+|proto\b)/i.test(contentType);
  if (!/^application\/grpc/i.test(contentType) && !connectProtocol) return false;
  res.setHeader("x-request-id", id);
  const service = path.slice(1, path.lastIndexOf("/"));
  const message = `${path.slice(1)} is not served here (no service ${service}, or no such method)`;
  answerRpcError(req, res, { grpcStatus: 12, httpStatus: 404, code: "unimplemented", message });
  return true;
}

const kOutcome = Symbol("rpc outcome");

/** The request's RPC outcome holder (written by the error interceptor, or by a refusal here). */
function rpcOutcome(req: NodeServerRequest): { code?: string } {
  const holder = req as NodeServerRequest & { [kOutcome]?: { code?: string } };
  holder[kOutcome] ??= {};
  return holder[kOutcome];
}

/** The protocol a request speaks: an RPC protocol on RPC paths, else "http" (the JSON routes). */
function protocolOf(req: NodeServerRequest, path: string): string {
  if (req.method !== "POST" || !RPC_PATH.test(path)) return "http";
  const contentType = String(req.headers["content-type"] ?? "");
  if (/^application\/grpc-web/i.test(contentType)) return "grpc-web";
  if (/^application\/grpc/i.test(contentType)) return "grpc";
  return "connect";
}

/** A trailers-only answer's gRPC code name, from its grpc-status header. */
function grpcCodeOf(res: NodeServerResponse): string {
  const status = Number(res.getHeader("grpc-status"));
  return Number.isInteger(status) ? codeName(status) : "unknown";
}

/** Over a rate limit: 429 with Retry-After (JSON, Connect), RESOURCE_EXHAUSTED (gRPC, gRPC-Web). */
function refuseRateLimited(
  req: NodeServerRequest,
  res: NodeServerResponse,
  retryAfterS: number,
  message: string,
): void {
  res.setHeader("retry-after", String(retryAfterS));
  answerRpcError(req, res, { grpcStatus: 8, httpStatus: 429, code: "resource_exhausted", message });
}

/**
 * Refuses an RPC without a valid api_key in its protocol's own form, as Connect would have:
 * gRPC and gRPC-Web as a trailers-only answer with grpc-status 16, Connect as HTTP 401 with
 * its error body. The request body is not read before (see answerRpcError).
 */
function refuseUnauthenticated(req: NodeServerRequest, res: NodeServerResponse, message: string): void {
  answerRpcError(req, res, { grpcStatus: 16, httpStatus: 401, code: "unauthenticated", message });
}

/**
 * An RPC's error in its protocol's own form, without reading the request body first: gRPC and
 * gRPC-Web as a trailers-only answer with `grpcStatus`, anything else (Connect, JSON) as
 * `httpStatus` with `{"code", "message"}`. HTTP/2 ends the stream. HTTP/1.1 then reads and drops
 * what is left of the body, within bounds (discardRest, json-http.ts): a client still writing
 * it reads the answer rather than a broken pipe.
 */
function answerRpcError(
  req: NodeServerRequest,
  res: NodeServerResponse,
  { grpcStatus, httpStatus, code, message }: { grpcStatus: number; httpStatus: number; code: string; message: string },
): void {
  rpcOutcome(req).code = code;
  const contentType = String(req.headers["content-type"] ?? "");
  if (/^application\/grpc/i.test(contentType)) {
    const grpcType = /^application\/grpc-web/i.test(contentType) ? contentType.split(";")[0]! : "application/grpc";
    const headers = {
      "content-type": grpcType,
      "grpc-status": String(grpcStatus),
      "grpc-message": grpcPercentEncode(message),
    };
    const stream = (req as Http2ServerRequest).stream as ServerHttp2Stream | undefined;
    if (stream !== undefined) {
      // Trailers-only: one HEADERS frame that ends the stream, as gRPC clients expect.
      // With the headers set on the response so far: the request id, CORS.
      stream.respond({ ...res.getHeaders(), ":status": 200, ...headers }, { endStream: true });
      return;
    }
    res.writeHead(200, headers);
    res.end();
    discardRest(req);
    return;
  }
  const body = JSON.stringify({ code, message });
  res.writeHead(httpStatus, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
  discardRest(req);
}
