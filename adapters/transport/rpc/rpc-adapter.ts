/**
 * The RPC side of the port: connect-node's adapter (gRPC, Connect, gRPC-Web over a
 * ConnectRouter), plus gRPC-Web's text mode, which connect-es does not speak and which Google's
 * grpc-web client uses by default (`mode: "grpcwebtext"`): `application/grpc-web-text`, the
 * gRPC-Web frames base64-encoded in both directions.
 *
 * A text request is served as the binary one it encodes: its body decoded on the fly and its
 * content type made `application/grpc-web+proto`; the answer is encoded on the fly, chunk by
 * chunk, and typed `application/grpc-web-text+proto`. Everything else is connect-node's own adapter.
 */
import { Code, ConnectError, createConnectRouter } from "@connectrpc/connect";
import {
  connectNodeAdapter,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
  type ConnectNodeAdapterOptions,
} from "@connectrpc/connect-node";

import {
  LINGER_MS,
  discardRest,
  type NodeHandlerFn,
  type NodeServerRequest,
  type NodeServerResponse,
} from "../request/index.js";

const GRPC_WEB_TEXT = /^application\/grpc-web-text(?:\+proto)?(?:;|$)/i;

/** connect-node's adapter, plus `withBody`: a request served with a body other than its own. */
export type RpcAdapter = NodeHandlerFn & {
  /**
   * Serves `req` as Connect would, reading `body` instead of the request's own bytes (the lean
   * gRPC path hands over a request it has begun to read). A path the router does not serve goes
   * to the adapter as it is.
   */
  withBody(req: NodeServerRequest, res: NodeServerResponse, body: AsyncIterable<Uint8Array>): void;
};

/** connectNodeAdapter, also serving gRPC-Web text. */
export function rpcAdapter(options: ConnectNodeAdapterOptions): RpcAdapter {
  const binary = connectNodeAdapter(options) as NodeHandlerFn;
  const router = createConnectRouter(options);
  options.routes(router);
  const handlers = new Map(router.handlers.map((handler) => [handler.requestPath, handler]));

  /** `withBody`; in text mode the request is typed as the binary call it encodes, and the answer encoded back. */
  const serve = (
    req: NodeServerRequest,
    res: NodeServerResponse,
    body: AsyncIterable<Uint8Array>,
    textMode: boolean,
  ) => {
    const handler = handlers.get(req.url?.split("?", 2)[0] ?? "");
    if (handler === undefined) {
      binary(req, res); // the fallback, as for any unknown path
      return;
    }
    const universal = universalRequestFromNodeRequest(req, res, undefined, options.contextValues?.(req));
    if (textMode) universal.header.set("content-type", "application/grpc-web+proto");
    universal.body = body;
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
        if (ConnectError.from(reason).code !== Code.Aborted) res.destroy();
      });
  };

  const handler: NodeHandlerFn = (req, res) => {
    if (req.httpVersionMajor === 1) {
      const { socket } = req; // a request Connect lets go of is left without it
      res.once("finish", () => afterAnswer(req, socket));
    }
    if (!GRPC_WEB_TEXT.test(String(req.headers["content-type"] ?? ""))) {
      binary(req, res);
      return;
    }
    // Text mode: served as the binary call it encodes, its body decoded on the fly.
    serve(req, res, base64Decoded(req as AsyncIterable<Uint8Array>), true);
  };
  return Object.assign(handler, {
    withBody: (req: NodeServerRequest, res: NodeServerResponse, body: AsyncIterable<Uint8Array>) =>
      serve(req, res, body, false),
  });
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
