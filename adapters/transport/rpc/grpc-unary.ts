/**
 * The service's own RPCs (every method of TokenService: Sell, Buy, GetTrade, ListTrades, ...) over gRPC
 * proper, answered without Connect's machinery: HTTP/2, binary protobuf, one message each way.
 *
 * Connect serves a unary call as a stream: async iterables for the body and the answer,
 * `Headers` objects, an AbortController and a handler context per call, none of which a
 * one-message call needs (docs/decisions/0007-lean-grpc-unary-path.md). This path reads
 * the one message, calls the same TokenService functions (token.service.ts), and writes the
 * answer with the same Node calls Connect makes (writeHead, write, addTrailers, end), so the
 * two cannot be told apart on the wire (test/adapters/transport/grpc-unary.test.ts compares
 * them call by call).
 *
 * It takes only the plain case, and hands everything else to Connect:
 * - before reading: HTTP/1.1, another protocol or codec (Connect, gRPC-Web, application/grpc+json),
 *   a compressed request (`grpc-encoding` other than identity), or a `grpc-timeout` that does
 *   not parse go to Connect as they are;
 * - while reading: a message whose prefix declares more than the size limit goes to Connect as
 *   soon as the prefix is in, with the bytes read so far; Connect answers resource_exhausted at
 *   once, without waiting for a body that may never come (http/http2.ts then resets the stream);
 * - after reading: a body that is not exactly one uncompressed message within the size limit,
 *   or a message that does not decode, goes to Connect with the bytes read so far, which answers
 *   it with its own errors.
 *
 * What Connect does and this path does too: the answer's `grpc-encoding` names the first of the
 * client's `grpc-accept-encoding` that the server supports (the answer itself stays
 * uncompressed, as compressMinBytes makes Connect's), `grpc-message` is percent-encoded as the
 * gRPC spec says (grpc-message.ts), errors are mapped and logged by rpcError, and a valid
 * `grpc-timeout` does not cut a trade short (Connect only aborts a signal no handler reads):
 * a trade that started runs to its outcome, which a retry with its Idempotency-Key finds.
 */
import { fromBinary, toBinary, type DescMessage, type DescMethodUnary, type Message } from "@bufbuild/protobuf";

import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import { rpcError } from "./error.interceptor.js";
import { grpcPercentEncode } from "./grpc-message.js";
import {
  IDEMPOTENCY_KEY_HEADER,
  QUOTE_ID_HEADER,
  type AcceptedKey,
  callerOf,
  type NodeServerRequest,
  type NodeServerResponse,
  type RequestContext,
} from "../request/index.js";
import type { CallContext, TokenCalls } from "./token.service.js";

/** What Connect answers a binary gRPC call with. */
const CONTENT_TYPE_PROTO = "application/grpc+proto";
/** The request content types this path takes: binary protobuf (Connect's own pattern, without JSON). */
const BINARY_GRPC = /^application\/grpc(?:\+proto)?$/i;
/** A valid grpc-timeout (Connect's pattern); an invalid one is Connect's to refuse. */
const GRPC_TIMEOUT = /^\d{1,8}[HMSmun]$/;
/** Connect's response compressions, in its order of preference (connect-node's default acceptCompression). */
const RESPONSE_ENCODINGS = ["gzip", "br"];
/** The envelope's prefix: one flags byte and a 32-bit big-endian length. */
const PREFIX_BYTES = 5;

export interface GrpcUnaryOptions {
  calls: TokenCalls;
  /** The largest message accepted, in bytes (Connect's readMaxBytes). */
  readMaxBytes: number;
  /** Connect, serving the request with `body` in place of its own bytes (an RpcProcedure's `body`). */
  connect(
    req: NodeServerRequest,
    res: NodeServerResponse,
    context: RequestContext,
    body: AsyncIterable<Uint8Array>,
  ): void;
}

interface UnaryMethod {
  /** "tokentrade.v1.TokenService/Sell", as the logs name a procedure. */
  procedure: string;
  input: DescMessage;
  output: DescMessage;
  call(request: Message, context: CallContext): Promise<Message>;
}

/**
 * The path's handler, given the request's context: who called is its api_key check (`key`), which
 * the pipeline has accepted (the path declines a call without an accepted key), and its outcome
 * goes there for the request metrics.
 */
export type GrpcUnaryHandler = (req: NodeServerRequest, res: NodeServerResponse, context: RequestContext) => boolean;

/**
 * The lean gRPC path. The handler returns false, having done nothing, for a request it does
 * not take from the first byte; the caller then hands it to Connect itself.
 */
export function grpcUnary(options: GrpcUnaryOptions): GrpcUnaryHandler {
  const { readMaxBytes } = options;
  const methods = unaryMethods(options.calls);
  const frameOf = frameCache();

  const handler: GrpcUnaryHandler = (req, res, context) => {
    const { key } = context;
    if (key?.ok !== true) return false;
    const method = plainCall(req, methods);
    if (method === undefined) return false;
    const accepted = req.headers["grpc-accept-encoding"];
    const call: Call = {
      method,
      res,
      context,
      key,
      responseHeaders: answerHeaders(Array.isArray(accepted) ? accepted.join(", ") : accepted),
      chunks: [],
      length: 0,
    };
    (req as Reading)[kCall] = call;
    req.on("data", onData);
    req.on("end", onEnd);
    return true;
  };

  /** The request's bytes so far (`this` is the request); past the limit, or declared past it, Connect takes over. */
  function onData(this: Reading, chunk: Buffer): void {
    const call = this[kCall]!;
    const before = call.length;
    call.chunks.push(chunk);
    call.length += chunk.length;
    if (call.length > PREFIX_BYTES + readMaxBytes || (before < PREFIX_BYTES && declaredOver(call, readMaxBytes))) {
      // Over the limit: Connect says so. What comes next waits in the stream for it to read.
      this.pause();
      this.off("data", onData);
      this.off("end", onEnd);
      options.connect(this, call.res, call.context, replay(call.chunks, this));
    }
  }

  /** The whole request (`this`): one plain message is answered here, anything else by Connect. */
  function onEnd(this: Reading): void {
    this.off("data", onData);
    const call = this[kCall]!;
    // The server reset the stream (its body came too late, http/http2.ts): the client has its answer, CANCEL.
    if (this.aborted || (this as { stream?: { closed: boolean } }).stream?.closed === true) return;
    const body = call.chunks.length === 1 ? call.chunks[0]! : Buffer.concat(call.chunks, call.length);
    let request: Message;
    try {
      if (call.length < PREFIX_BYTES || body[0] !== 0 || body.readUInt32BE(1) !== call.length - PREFIX_BYTES)
        throw new Error("not one plain message");
      request = fromBinary(call.method.input, body.subarray(PREFIX_BYTES));
    } catch {
      // No message, several, a compressed or truncated one, or bytes that do not decode.
      options.connect(this, call.res, call.context, replay(call.chunks, undefined));
      return;
    }
    void answer(this, call, request, frameOf);
  }

  return handler;
}

/** TokenService's methods by their path, each with its messages and its call. */
function unaryMethods(calls: TokenCalls): Map<string, UnaryMethod> {
  const methods = new Map<string, UnaryMethod>();
  for (const method of Object.values(TokenService.method) as DescMethodUnary[]) {
    const call = calls[method.localName as keyof TokenCalls] as (
      request: Message,
      context: CallContext,
    ) => Promise<Message>;
    methods.set(`/${TokenService.typeName}/${method.name}`, {
      procedure: `${TokenService.typeName}/${method.name}`,
      input: method.input,
      output: method.output,
      call,
    });
  }
  return methods;
}

/** An answer's frame (the envelope's prefix, then the message), the last one reused while the call returns the same message (a cached price). */
function frameCache(): (method: UnaryMethod, message: Message) => Buffer {
  let last: { message: Message; frame: Buffer } | undefined;
  return (method, message) => {
    if (last?.message === message) return last.frame;
    const bytes = toBinary(method.output, message);
    const frame = Buffer.allocUnsafe(PREFIX_BYTES + bytes.length);
    frame[0] = 0;
    frame.writeUInt32BE(bytes.length, 1);
    frame.set(bytes, PREFIX_BYTES);
    last = { message, frame };
    return frame;
  };
}

/** The method of a request this path takes from its first byte (see the top of this file), else undefined. */
function plainCall(req: NodeServerRequest, methods: Map<string, UnaryMethod>): UnaryMethod | undefined {
  if (req.httpVersionMajor !== 2 || req.method !== "POST") return undefined;
  const headers = req.headers;
  const contentType = headers["content-type"];
  if (contentType === undefined || !BINARY_GRPC.test(contentType)) return undefined;
  const encoding = headers["grpc-encoding"];
  if (encoding !== undefined && encoding !== "identity") return undefined;
  const timeout = headers["grpc-timeout"];
  if (timeout !== undefined && (typeof timeout !== "string" || !GRPC_TIMEOUT.test(timeout))) return undefined;
  // The target as Connect matches it: as sent, without the query (no dot segments resolved).
  const target = req.url ?? "";
  const query = target.indexOf("?");
  return methods.get(query === -1 ? target : target.slice(0, query));
}

/** Runs the call and writes its answer, or its error, as Connect would. */
async function answer(
  req: NodeServerRequest,
  call: Call,
  request: Message,
  frameOf: (method: UnaryMethod, message: Message) => Buffer,
): Promise<void> {
  const { method, res, context, responseHeaders } = call;
  const idempotencyKey = req.headers[IDEMPOTENCY_KEY_HEADER];
  const quoteId = req.headers[QUOTE_ID_HEADER];
  let frame: Buffer;
  try {
    const message = await method.call(request, {
      ...callerOf(call.key),
      idempotencyKey: Array.isArray(idempotencyKey) ? idempotencyKey.join(", ") : idempotencyKey,
      quoteId: Array.isArray(quoteId) ? quoteId.join(", ") : quoteId,
    });
    frame = frameOf(method, message);
  } catch (thrown) {
    // A refusal, or a bug (an answer that does not encode included): "internal error", logged with its stack.
    const error = rpcError(thrown, context.log, method.procedure, context);
    if (closed(res)) return;
    res.writeHead(200, responseHeaders);
    // The error's metadata (retry-after, a held trade's trade-id and trade-status) as Connect sends it: trailers.
    const trailers: Record<string, string> = {
      "grpc-message": grpcPercentEncode(error.rawMessage),
      "grpc-status": String(error.code),
    };
    error.metadata.forEach((value, name) => {
      trailers[name] = value;
    });
    res.addTrailers(trailers);
    res.end();
    return;
  }
  context.rpcCode = "ok";
  if (closed(res)) return;
  res.writeHead(200, responseHeaders);
  res.write(frame);
  res.addTrailers(OK_TRAILERS);
  res.end();
}

/** A call being read: what the shared listeners need, kept on the request. */
interface Call {
  method: UnaryMethod;
  res: NodeServerResponse;
  /** The request's context, where the outcome goes. */
  context: RequestContext;
  /** Who called. */
  key: AcceptedKey;
  responseHeaders: Record<string, string>;
  chunks: Buffer[];
  length: number;
}
const kCall = Symbol("grpc unary call");
type Reading = NodeServerRequest & { [kCall]?: Call };

const OK_TRAILERS = { "grpc-status": "0" };

/** The answer's headers as Connect writes them: the content type, and the response compression it negotiated. */
const HEADERS_BY_ACCEPT = new Map<string, Record<string, string>>();
function answerHeaders(accepted: string | undefined): Record<string, string> {
  const key = accepted ?? "";
  let headers = HEADERS_BY_ACCEPT.get(key);
  if (headers === undefined) {
    const chosen = key
      .split(",")
      .map((name) => name.trim())
      .find((name) => RESPONSE_ENCODINGS.includes(name));
    headers =
      chosen === undefined
        ? { "content-type": CONTENT_TYPE_PROTO }
        : { "content-type": CONTENT_TYPE_PROTO, "grpc-encoding": chosen };
    // A client sends one of a few values; anything else is answered without being remembered.
    if (HEADERS_BY_ACCEPT.size < 64) HEADERS_BY_ACCEPT.set(key, headers);
  }
  return headers;
}

/** Whether the first message's prefix, once its five bytes are in, declares more than `limit` bytes. */
function declaredOver(call: Call, limit: number): boolean {
  if (call.length < PREFIX_BYTES) return false;
  const head = call.chunks.length === 1 ? call.chunks[0]! : Buffer.concat(call.chunks, call.length);
  return head.readUInt32BE(1) > limit;
}

/** A response the client has gone from (a reset stream, a closed connection): nothing more is written. */
function closed(res: NodeServerResponse): boolean {
  return res.writableEnded || (res as { stream?: { destroyed: boolean } }).stream?.destroyed === true;
}

/** The bytes already read, then (when given) the rest of the request's own. */
async function* replay(chunks: Buffer[], rest: AsyncIterable<Uint8Array> | undefined): AsyncIterable<Uint8Array> {
  for (const chunk of chunks) yield chunk;
  if (rest !== undefined) for await (const chunk of rest) yield chunk;
}
