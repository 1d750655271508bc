/**
 * What the dispatch step (steps/dispatch.ts) hands a request to, built once per handler: the
 * JSON routes, TokenService over Connect and over the lean gRPC path (one set of calls for both,
 * one cached price message), gRPC's health and reflection, the docs page, and what answers a path
 * nobody serves.
 */
import { createContextValues, type ContextValues } from "@connectrpc/connect";

import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ServerReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1Alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import { docsHandler } from "../docs/index.js";
import { Reflection, healthService, reflectionService } from "../grpc-services/index.js";
import { DEFAULT_BODY_LIMIT_BYTES, cachedReadiness, jsonRoutes, type Readiness } from "../json/index.js";
import {
  requestContext,
  type NodeHandlerFn,
  type NodeServerRequest,
  type NodeServerResponse,
} from "../request/index.js";
import {
  errorInterceptor,
  grpcUnary,
  kCaller,
  kCallerKeyIndex,
  kCallerScope,
  kRequestLog,
  kRpcOutcome,
  minimalGrpcMessageEncoding,
  rpcAdapter,
  tokenCalls,
  tokenRoutes,
  type GrpcUnaryHandler,
  type RpcAdapter,
} from "../rpc/index.js";
import type { HttpHandlerOptions } from "./handler-options.js";
import { ECOSYSTEM_SERVICES } from "./protocol-of.js";
import { refuseUnknownRpc } from "./refusals.js";
import { checkedKey } from "./steps/api-key.js";
import { rpcOutcome } from "./steps/observe.js";

export interface ProtocolHandlers {
  /** The JSON routes, and the label the metrics give a path of theirs. */
  json: NodeHandlerFn & { routeOf(path: string): string };
  /** TokenService over Connect: gRPC, Connect, gRPC-Web. */
  connect: RpcAdapter;
  /** TokenService over gRPC without Connect (grpc-unary.ts); undefined when grpcFastPath is false. */
  lean: GrpcUnaryHandler | undefined;
  /** gRPC health and reflection, without a key. */
  ecosystem: RpcAdapter;
  /** /docs and its files (true: answered). */
  docs: (req: NodeServerRequest, res: NodeServerResponse, path: string) => boolean;
  /** Unknown RPCs get their protocol's "unimplemented"; anything else, the JSON routes. */
  fallback: NodeHandlerFn;
}

/** @param countRefusedKey - the refused-key throttle's count (steps/limits.ts), for the JSON routes' 401s */
export function protocolHandlers(
  options: HttpHandlerOptions,
  countRefusedKey: ((req: NodeServerRequest) => void) | undefined,
): ProtocolHandlers {
  const { log } = options;
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  // One readiness check for /readyz and gRPC health, shared and cached (see json/readiness.ts).
  const readiness = cachedReadiness(options.readiness, { cacheMs: options.readinessCacheMs ?? 1_000 });
  const json = jsonRoutes({
    useCases: options.useCases,
    verifier: options.verifier,
    readiness,
    readinessCacheMs: 0,
    bodyLimitBytes,
    log,
    ...(countRefusedKey === undefined ? {} : { onRefusedKey: countRefusedKey }),
    checkedKey,
  });
  const fallback: NodeHandlerFn = (req, res) => (refuseUnknownRpc(req, res, log) ? undefined : json(req, res));
  // What every RPC's handlers and interceptors reach: the request's logger and its outcome holder.
  const contextValues = (req: NodeServerRequest): ContextValues =>
    createContextValues().set(kRequestLog, requestContext(req, log).log).set(kRpcOutcome, rpcOutcome(req));
  const ecosystem = ecosystemAdapter(options, readiness, bodyLimitBytes, contextValues, fallback);
  // TokenService's calls, one set for Connect and the lean gRPC path (one cached price message).
  const calls = tokenCalls(options.useCases);
  const connect = rpcAdapter({
    routes: tokenRoutes(options.useCases, calls),
    // The key is not checked again here: the pipeline's api_key step refused every TokenService
    // call without a valid one, and hands the caller's scope to the handlers (callerContext).
    interceptors: [errorInterceptor(log)],
    readMaxBytes: bodyLimitBytes,
    // One rule for JSON on every path: a field the message does not have is refused, as the
    // /api/v1 routes refuse it (SPEC: "exactly the four fields"). Binary protobuf keeps its own
    // rule: unknown field numbers are skipped, so older servers read newer clients.
    jsonOptions: { ignoreUnknownFields: false },
    // Answers go out uncompressed: a receipt is 2 to 4 KiB, and gzip cost both ends more CPU
    // per sell than it saved. Compressed requests are still accepted.
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    contextValues: (req) => callerContext(contextValues(req), req),
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
  return { json, connect, lean, ecosystem, docs: docsHandler(), fallback };
}

/** The caller the api_key step found, for TokenService's handlers: its key's position and its scope. */
function callerContext(values: ContextValues, req: NodeServerRequest): ContextValues {
  const key = checkedKey(req);
  if (key?.ok) values.set(kCallerKeyIndex, key.keyIndex).set(kCallerScope, key.scope).set(kCaller, key.caller);
  return values;
}

/** gRPC health (following /readyz, NOT_SERVING once the shutdown begins) and reflection, v1 and v1alpha. */
function ecosystemAdapter(
  options: HttpHandlerOptions,
  readiness: () => Promise<Readiness>,
  bodyLimitBytes: number,
  contextValues: (req: NodeServerRequest) => ContextValues,
  fallback: NodeHandlerFn,
): RpcAdapter {
  return rpcAdapter({
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
    interceptors: [errorInterceptor(options.log)],
    readMaxBytes: bodyLimitBytes,
    contextValues,
    fallback,
  });
}
