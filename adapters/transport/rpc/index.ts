/**
 * The RPCs: TokenService over Connect (gRPC, Connect, gRPC-Web binary and text), its lean gRPC
 * path (grpc-unary.ts, docs/decisions/0007-lean-grpc-unary-path.md), the messages both map to
 * and from the use cases, and the one error map every protocol answers with (the JSON routes too).
 */
export { apiKeyInterceptor, kCaller, kCallerKeyIndex, kCallerScope } from "./api-key.interceptor.js";
export {
  DOMAIN_HTTP_STATUS,
  DOMAIN_TO_CONNECT_CODE,
  INTERNAL_MESSAGE,
  codeName,
  httpStatusFor,
  toConnectError,
  type MappedError,
} from "./error-map.js";
export { errorInterceptor, kRequestLog, kRpcOutcome, rpcError } from "./error.interceptor.js";
export { grpcPercentEncode, minimalGrpcMessageEncoding } from "./grpc-message.js";
export { grpcUnary, type GrpcUnaryHandler, type GrpcUnaryOptions } from "./grpc-unary.js";
export { priceMessage, receiptMessage, tradeInputFromMessage } from "./proto-mapping.js";
export { rpcAdapter, type RpcAdapter } from "./rpc-adapter.js";
export { tokenRoutes } from "./rpc-routes.js";
export { TokenServiceImpl, tokenCalls, type CallContext, type TokenCalls } from "./token.service.js";
