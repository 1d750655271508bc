/**
 * The RPC side of the port: a ConnectRouter's procedures (gRPC, Connect, gRPC-Web), each served
 * from its path in the service's one router (http/router.ts) with the request's context passed
 * in Connect's context values, plus gRPC-Web's text mode, which connect-es does not speak and
 * which Google's grpc-web client uses by default (`mode: "grpcwebtext"`):
 * `application/grpc-web-text`, the gRPC-Web frames base64-encoded in both directions.
 *
 * Each procedure is served as connect-node's adapter serves it (its universal request, the
 * router's handler, its universal response written back), but from the router's table rather
 * than a map of its own, so that the request's state arrives as an argument. A text request is
 * served as the binary one it encodes: its body decoded on the fly and its content type made
 * `application/grpc-web+proto`; the answer is encoded on the fly, chunk by chunk, and typed
 * `application/grpc-web-text+proto`.
 */
import {
  Code,
  ConnectError,
  createConnectRouter,
  type ConnectRouter,
  type ConnectRouterOptions,
} from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import type { UniversalHandler } from "@connectrpc/connect/protocol";

import {
  LINGER_MS,
  discardRest,
  type NodeServerRequest,
  type NodeServerResponse,
  type RequestContext,
} from "../request/index.js";
import { requestValues } from "./request-values.js";

const GRPC_WEB_TEXT = /^application\/grpc-web-text(?:\+proto)?(?:;|$)/i;

/**
 * One procedure of the router: serves `req` with its context. With `body`, reads that instead of
 * the request's own bytes (the lean gRPC path hands over a request it has begun to read).
 */
export type RpcProcedure = (
  req: NodeServerRequest,
  res: NodeServerResponse,
  context: RequestContext,
  body?: AsyncIterable<Uint8Array>,
) => void;

export interface RpcAdapterOptions extends ConnectRouterOptions {
  /** Registers the services on the router. */
  routes: (router: ConnectRouter) => void;
}

/**
 * The procedures of the services `options.routes` registers, by their path (`/package.Service/Method`).
 * Compressed requests are accepted (gzip, br), as connect-node's adapter accepts them by default.
 */
export function rpcAdapter(options: RpcAdapterOptions): Map<string, RpcProcedure> {
  const router = createConnectRouter({ acceptCompression: [compressionGzip, compressionBrotli], ...options });
  options.routes(router);
  return new Map(router.handlers.map((handler) => [handler.requestPath, procedure(handler)]));
}

/** Serves one of the router's handlers. */
function procedure(handler: UniversalHandler): RpcProcedure {
  const name = `rpc ${handler.method.name} of ${handler.service.typeName}`;
  return (req, res, context, body) => {
    if (req.httpVersionMajor === 1) {
      const { socket } = req; // a request Connect lets go of is left without it
      res.once("finish", () => afterAnswer(req, socket));
    }
    const textMode = GRPC_WEB_TEXT.test(String(req.headers["content-type"] ?? ""));
    const universal = universalRequestFromNodeRequest(req, res, undefined, requestValues(context));
    if (textMode) {
      // Served as the binary call it encodes, its body decoded on the fly.
      universal.header.set("content-type", "application/grpc-web+proto");
      universal.body = base64Decoded(body ?? (req as AsyncIterable<Uint8Array>));
    } else if (body !== undefined) universal.body = body;
    handler(universal)
      .then((answer) => {
        if (textMode) {
          answer.header?.delete("content-length");
          if (answer.header?.get("content-type")?.startsWith("application/grpc-web")) {
            answer.header.set("content-type", "application/grpc-web-text+proto");
            if (answer.body !== undefined) answer.body = base64Encoded(answer.body);
          }
        }
        return universalResponseToNodeResponse(answer, res);
      })
      .catch((reason: unknown) => {
        if (ConnectError.from(reason).code === Code.Aborted) return;
        // As connect-node's adapter does for a request it reads itself; one read for it is cut short.
        if (body === undefined && !textMode) console.error(`handler for ${name} failed`, reason);
        else res.destroy();
      });
  };
}

/**
 * After an HTTP/1.1 answer. One sent before the request's body ended (a message whose prefix
 * declares more than readMaxBytes is refused at once) leaves HTTP/1.1 no stream to reset, as
 * HTTP/2 has (http/http2.ts): the client gets a bounded time to finish sending the body, then the
 * connection is closed. A body Connect still holds is read and dropped (discardRest); one it has let
 * go (the envelope reader stopped at the prefix) is dropped by Node's parser as it comes.
 */
function afterAnswer(req: NodeServerRequest, socket: NodeServerRequest["socket"]): void {
  if (req.complete) return;
  if (!req.destroyed) {
    discardRest(req);
    return;
  }
  const timer = setTimeout(() => {
    if (!req.complete) socket.destroy();
  }, LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
}

/**
 * Base64 text chunks as bytes. Whitespace is skipped; each complete group of four characters
 * is decoded as it arrives, so a body made of several padded pieces decodes too.
 * @throws ConnectError invalid_argument on a character outside base64's alphabet
 */
export async function* base64Decoded(chunks: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  let pending = "";
  for await (const chunk of chunks) {
    pending += Buffer.from(chunk).toString("latin1").replace(/\s+/g, "");
    const whole = pending.length - (pending.length % 4);
    if (whole === 0) continue;
    yield decodeGroups(pending.slice(0, whole));
    pending = pending.slice(whole);
  }
  if (pending !== "") yield decodeGroups(pending.padEnd(pending.length + ((4 - (pending.length % 4)) % 4), "="));
}

const GROUP = /^(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)$/;

/** Groups of four base64 characters as bytes; a padded group may end one piece and another follow. */
function decodeGroups(text: string): Uint8Array {
  const out: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i += 4) {
    const group = text.slice(i, i + 4);
    if (!GROUP.test(group)) throw new ConnectError("the grpc-web-text body is not base64", Code.InvalidArgument);
    if (group.endsWith("=") || i + 4 === text.length) {
      out.push(Buffer.from(text.slice(start, i + 4), "base64"));
      start = i + 4;
    }
  }
  return out.length === 1 ? out[0]! : Buffer.concat(out);
}

/**
 * Bytes as base64 text, each chunk encoded (and padded) on its own as it comes, so that a
 * streamed message is never held back: what Envoy's grpc-web filter sends, and what Google's
 * client decodes, four characters at a time.
 */
export async function* base64Encoded(chunks: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of chunks) {
    if (chunk.length > 0) yield Buffer.from(Buffer.from(chunk).toString("base64"), "latin1");
  }
}
