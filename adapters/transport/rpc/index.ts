/**
 * The RPCs: TokenService over Connect (gRPC, Connect, gRPC-Web binary and text), its lean gRPC
 * path (grpc-unary.ts, docs/decisions/0007-lean-grpc-unary-path.md), the messages both map to
 * and from the use cases, the request's context as Connect's context values (request-values.ts),
 * and the one error map every protocol answers with (the JSON routes too).
 */
export {
  DOMAIN_HTTP_STATUS,
  DOMAIN_TO_CONNECT_CODE,
  INTERNAL_MESSAGE,
  codeName,
  httpStatusFor,
  toConnectError,
  type MappedError,
} from "./error-map.js";
export { errorInterceptor, rpcError, type RpcOutcome } from "./error.interceptor.js";
export { grpcPercentEncode, minimalGrpcMessageEncoding } from "./grpc-message.js";
export { grpcUnary, type GrpcUnaryHandler, type GrpcUnaryOptions } from "./grpc-unary.js";
export { priceMessage, receiptMessage, tradeInputFromMessage } from "./proto-mapping.js";
export { rpcAdapter, type RpcAdapterOptions, type RpcProcedure } from "./rpc-adapter.js";
export { acceptedKey, kRequestContext, requestValues } from "./request-values.js";
export { tokenRoutes } from "./rpc-routes.js";
export { TokenServiceImpl, tokenCalls, type CallContext, type TokenCalls } from "./token.service.js";
