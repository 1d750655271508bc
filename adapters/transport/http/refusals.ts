/**
 * The pipeline's own refusals, answered before any protocol's handler runs (over a rate limit,
 * an RPC without a valid key, an RPC this server does not have), each in its protocol's own
 * form and without reading the request body first:
 * - gRPC and gRPC-Web: a trailers-only answer with the gRPC status;
 * - Connect and the JSON routes: the HTTP status with `{"code", "message"}`.
 * HTTP/2 ends the stream. HTTP/1.1 then reads and drops what is left of the body, within bounds
 * (discardRest, request/early-answer.ts): a client still writing it reads the answer rather than
 * a broken pipe.
 */
import type { Http2ServerRequest, ServerHttp2Stream } from "node:http2";

import { discardRest, type NodeServerRequest, type NodeServerResponse, type RequestContext } from "../request/index.js";
import { grpcPercentEncode } from "../rpc/index.js";
import { isRpcRequest } from "./protocol-of.js";

/** Over a rate limit: 429 with Retry-After (JSON, Connect), RESOURCE_EXHAUSTED (gRPC, gRPC-Web). */
export function refuseRateLimited(
  req: NodeServerRequest,
  res: NodeServerResponse,
  context: RequestContext,
  retryAfterS: number,
  message: string,
): void {
  res.setHeader("retry-after", String(retryAfterS));
  answerRpcError(req, res, context, { grpcStatus: 8, httpStatus: 429, code: "resource_exhausted", message });
}

/**
 * Refuses an RPC without a valid api_key in its protocol's own form, as Connect would have:
 * gRPC and gRPC-Web with grpc-status 16, Connect as HTTP 401 with its error body.
 */
export function refuseUnauthenticated(
  req: NodeServerRequest,
  res: NodeServerResponse,
  context: RequestContext,
  message: string,
): void {
  answerRpcError(req, res, context, { grpcStatus: 16, httpStatus: 401, code: "unauthenticated", message });
}

/**
 * Answers an RPC to a service or method this server does not have as its protocol says, and
 * returns true: gRPC and gRPC-Web with grpc-status 12 (UNIMPLEMENTED) in a trailers-only
 * answer, Connect with HTTP 404 and code "unimplemented". Anything else is not an RPC: false.
 */
export function refuseUnknownRpc(req: NodeServerRequest, res: NodeServerResponse, context: RequestContext): boolean {
  const { path, id } = context;
  if (!isRpcRequest(req, path)) return false;
  res.setHeader("x-request-id", id);
  const service = path.slice(1, path.lastIndexOf("/"));
  const message = `${path.slice(1)} is not served here (no service ${service}, or no such method)`;
  answerRpcError(req, res, context, { grpcStatus: 12, httpStatus: 404, code: "unimplemented", message });
  return true;
}

/** An RPC's error in its protocol's own form: gRPC's for gRPC and gRPC-Web, else Connect's (and the JSON routes'). */
function answerRpcError(
  req: NodeServerRequest,
  res: NodeServerResponse,
  context: RequestContext,
  { grpcStatus, httpStatus, code, message }: { grpcStatus: number; httpStatus: number; code: string; message: string },
): void {
  context.rpcCode = code;
  const contentType = String(req.headers["content-type"] ?? "");
  if (/^application\/grpc/i.test(contentType)) answerGrpcError(req, res, contentType, grpcStatus, message);
  else answerJsonError(req, res, httpStatus, code, message);
}

/** gRPC and gRPC-Web: a trailers-only answer (HTTP 200, the status in the headers). */
function answerGrpcError(
  req: NodeServerRequest,
  res: NodeServerResponse,
  contentType: string,
  grpcStatus: number,
  message: string,
): void {
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
}

/** Connect and the JSON routes: `httpStatus` with `{"code", "message"}`. */
function answerJsonError(
  req: NodeServerRequest,
  res: NodeServerResponse,
  httpStatus: number,
  code: string,
  message: string,
): void {
  const body = JSON.stringify({ code, message });
  res.writeHead(httpStatus, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
  discardRest(req);
}
