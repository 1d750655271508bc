/**
 * The service's routes, built once per handler into the one router (router.ts): every path the
 * port serves, with its handler:
 * - TokenService's procedures (/tokentrade.v1.TokenService/*): gRPC to the lean path when it takes
 *   the call, anything else (Connect, gRPC-Web binary and text, what the lean path hands over) to
 *   Connect; one set of calls for both, one cached price message;
 * - gRPC health and reflection, without a key;
 * - /docs and its files;
 * - the JSON routes (/api/v1/..., the probes, the OpenAPI document);
 * - the fallback, for any other path: a TokenService or gRPC method this server does not have, or
 *   an RPC to a service it does not have, gets its protocol's "unimplemented"; another path under
 *   /docs a 404; the rest the JSON routes' parameterised routes, or their 404.
 * One readiness check, cached, behind /readyz and gRPC health.
 */
import type { ConnectRouter } from "@connectrpc/connect";

import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1Alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import { docsRoutes } from "../docs/index.js";
import { Reflection, healthService, reflectionService } from "../grpc-services/index.js";
import { DEFAULT_BODY_LIMIT_BYTES, cachedReadiness, jsonRoutes, type Readiness } from "../json/index.js";
import type { NodeServerRequest, RequestContext, RouteHandler } from "../request/index.js";
import {
  errorInterceptor,
  grpcUnary,
  minimalGrpcMessageEncoding,
  rpcAdapter,
  tokenCalls,
  tokenRoutes,
  type GrpcUnaryHandler,
  type RpcProcedure,
} from "../rpc/index.js";
import type { HttpHandlerOptions } from "./handler-options.js";
import { ECOSYSTEM_SERVICES, RPC_PATH_PREFIX, isEcosystemPath } from "./protocol-of.js";
import { refuseUnknownRpc } from "./refusals.js";
import { Router } from "./router.js";

/** The router, and the label the request metrics give a JSON route's path. */
export interface ServiceRoutes {
  router: Router;
  jsonLabel(path: string): string;
}

/** @param countRefusedKey - the refused-key throttle's count (steps/limits.ts), for the JSON routes' 401s */
export function serviceRoutes(
  options: HttpHandlerOptions,
  countRefusedKey: ((context: RequestContext) => void) | undefined,
): ServiceRoutes {
  const { log, useCases } = options;
  const readMaxBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  // One readiness check for /readyz and gRPC health, shared and cached (see json/readiness.ts).
  const readiness = cachedReadiness(options.readiness, { cacheMs: options.readinessCacheMs ?? 1_000 });
  const json = jsonRoutes({
    useCases,
    readiness,
    bodyLimitBytes: readMaxBytes,
    ...(countRefusedKey === undefined ? {} : { onRefusedKey: countRefusedKey }),
  });
  const docs = docsRoutes();
  const fallback: RouteHandler = (req, res, context) => {
    const { path } = context;
    if (path.startsWith(RPC_PATH_PREFIX) || isEcosystemPath(path)) {
      res.setHeader("x-request-id", context.id);
      minimalGrpcMessageEncoding(req, res);
    } else if (docs.owns(path)) {
      docs.other(req, res, context);
      return;
    }
    if (!refuseUnknownRpc(req, res, context)) json.other(req, res, context);
  };
  // TokenService's calls, one set for Connect and the lean gRPC path (one cached price message).
  const calls = tokenCalls(useCases);
  const connect = rpcAdapter({
    routes: tokenRoutes(useCases, calls),
    // The key is not checked again here: the pipeline's api_key step refused every TokenService
    // call without a valid one, and its check reaches the handlers in the request's context.
    interceptors: [errorInterceptor(log)],
    readMaxBytes,
    // One rule for JSON on every path: a field the message does not have is refused, as the
    // /api/v1 routes refuse it (SPEC: "exactly the four fields"). Binary protobuf keeps its own
    // rule: unknown field numbers are skipped, so older servers read newer clients.
    jsonOptions: { ignoreUnknownFields: false },
    // Answers go out uncompressed: a receipt is 2 to 4 KiB, and gzip cost both ends more CPU
    // per sell than it saved. Compressed requests are still accepted.
    compressMinBytes: Number.MAX_SAFE_INTEGER,
  });
  // TokenService over gRPC without Connect's pipeline; what it does not take goes to Connect.
  const lean =
    options.grpcFastPath === false
      ? undefined
      : grpcUnary({
          calls,
          readMaxBytes,
          connect: (req, res, context, body) => {
            minimalGrpcMessageEncoding(req, res);
            connect.get(context.path)?.(req, res, context, body);
          },
        });
  const ecosystem = rpcAdapter({
    routes: ecosystemServices(options, readiness),
    interceptors: [errorInterceptor(log)],
    readMaxBytes,
  });
  const router = new Router(fallback)
    .add([...connect].map(([path, procedure]) => [path, rpcRoute(procedure, fallback, lean)] as const))
    .add([...ecosystem].map(([path, procedure]) => [path, rpcRoute(procedure, fallback, undefined)] as const))
    .add(docs.paths)
    .add(json.paths);
  return { router, jsonLabel: json.label };
}

/**
 * A procedure's route: the request id, then the lean gRPC path when it takes the call, else Connect
 * (with grpc-message in the gRPC spec's encoding). A target that reaches the path only once
 * resolved (dot segments) is not the procedure's, as Connect matches the target as sent: the
 * fallback answers it.
 */
function rpcRoute(procedure: RpcProcedure, fallback: RouteHandler, lean: GrpcUnaryHandler | undefined): RouteHandler {
  return (req, res, context) => {
    if (!sentAs(req, context.path)) {
      fallback(req, res, context);
      return;
    }
    res.setHeader("x-request-id", context.id);
    if (lean?.(req, res, context)) return;
    minimalGrpcMessageEncoding(req, res);
    procedure(req, res, context);
  };
}

/** Whether the request target, without its query, is `path` as it was sent. */
function sentAs(req: NodeServerRequest, path: string): boolean {
  const target = req.url ?? "";
  return target.length === path.length ? target === path : target.startsWith(path) && target[path.length] === "?";
}

/** gRPC health (following /readyz, NOT_SERVING once the shutdown begins) and reflection, v1 and v1alpha. */
function ecosystemServices(
  options: HttpHandlerOptions,
  readiness: () => Promise<Readiness>,
): (router: ConnectRouter) => void {
  return (router) => {
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
  };
}
