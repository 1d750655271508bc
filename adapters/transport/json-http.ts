/**
 * The small HTTP layer under the JSON routes (json-routes.ts): errors that carry their HTTP
 * status and Connect code, reading a bounded JSON body, and writing a JSON answer.
 */
import type { ServerResponse } from "node:http";

import { Code } from "@connectrpc/connect";

import { httpStatusFor } from "./error-map.js";
import type { NodeServerRequest, NodeServerResponse } from "./node-types.js";

/**
 * An error answered as `{"code": "<connect code>", "message": "..."}`. The status is
 * Connect's for the code, except for the four HTTP-level refusals that have no code
 * of their own; each keeps the HTTP status clients expect and a code chosen below.
 */
export class HttpError extends Error {
  constructor(
    readonly code: Code,
    message: string,
    readonly status: number = httpStatusFor(code),
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** The client went away (closed or reset its connection) before its request body arrived: nobody to answer. */
export class ClientGoneError extends Error {
  constructor() {
    super("the client went away before its request body arrived");
  }
}

/** 404 → not_found (Connect maps not_found to 404 itself). */
export function notFound(method: string, path: string): HttpError {
  return new HttpError(Code.NotFound, `no route for ${method} ${path.slice(0, 200)}`);
}

/** 405 → unimplemented: the path exists, the method is not implemented on it. Allow lists the one that is. */
export function methodNotAllowed(method: string, path: string, allowed: string): HttpError {
  return new HttpError(Code.Unimplemented, `method ${method} is not allowed on ${path}; use ${allowed}`, 405, {
    allow: allowed,
  });
}

/** 415 → invalid_argument: the request is malformed in a way the client must fix. */
export function unsupportedMediaType(): HttpError {
  return new HttpError(Code.InvalidArgument, "Content-Type: must be application/json", 415);
}

/** 413 → resource_exhausted: what Connect and gRPC answer for a message over the read limit. */
function payloadTooLarge(limit: number): HttpError {
  return new HttpError(Code.ResourceExhausted, `request body: must be at most ${limit} bytes`, 413);
}

/** application/json, optionally with a UTF-8 charset parameter. */
const JSON_CONTENT_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

export function isJsonContentType(value: string | undefined): boolean {
  return value !== undefined && JSON_CONTENT_TYPE.test(value.trim());
}

/**
 * Reads the whole body, stopping as soon as it passes `limit` bytes (a declared
 * Content-Length over the limit is refused before reading anything). The stream is
 * paused, not destroyed, so the 413 can still be written on the same connection.
 */
export function readBody(req: NodeServerRequest, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(payloadTooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const cleanup = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    const onData = (chunk: Buffer | string) => {
      const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      total += buffer.length;
      if (total > limit) {
        cleanup();
        req.pause();
        reject(payloadTooLarge(limit));
        return;
      }
      chunks.push(buffer);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      cleanup();
      // A client that closes or resets its connection mid-body shows up as an 'aborted' error.
      reject(req.destroyed || (error as NodeJS.ErrnoException).code === "ECONNRESET" ? new ClientGoneError() : error);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

/**
 * Most bytes of an unwanted body read and thrown away after an early answer: the largest body
 * limit BODY_LIMIT_BYTES accepts, so that any body under the limit is read to its end.
 */
export const DISCARD_LIMIT_BYTES = 1024 * 1024;

/**
 * Longest time an unwanted body is read and thrown away after an early answer. A body under the
 * limit takes far less from a client that is sending it; nginx lingers up to 30 s (lingering_time),
 * but waits 5 s at most for each read (lingering_timeout).
 */
export const LINGER_MS = 3_000;

/**
 * After an early answer (sent before the body was read: a refused key, a throttled address, an
 * oversize body), reads and drops the rest of an HTTP/1.1 body, as nginx does before it reuses or
 * closes a connection. Closing the connection at once, with the body still coming, breaks the
 * client: the kernel answers its bytes with a reset, so a client still writing its body fails
 * the write (connect-node: `internal: write EPIPE`) instead of reading the answer, and the reset
 * can destroy the answer before the client has read it.
 *
 * A body that ends within DISCARD_LIMIT_BYTES and LINGER_MS leaves the connection open for the
 * next request, as any answered request does, or closes it once read when the client asked for
 * that (`Connection: close`: Node's HTTP server would destroy the socket as soon as the answer is
 * written, so its `destroySoon` is put off until then, a lingering close). The socket is not even
 * half-closed before: Node's own HTTP client destroys its socket at the server's FIN, and would
 * then fail writing the rest of its body. Past either bound, the connection is closed.
 */
export function discardRest(req: NodeServerRequest): void {
  if (req.httpVersionMajor !== 1 || req.complete || req.destroyed || !hasBody(req)) return;
  const { socket } = req;
  // Node's HTTP server calls socket.destroySoon() once the answer to a request that closes its
  // connection is written: put off until the body is read.
  const lingering = socket as typeof socket & { destroySoon(): void };
  let closeAsked = false;
  lingering.destroySoon = () => {
    closeAsked = true;
  };
  let dropped = 0;
  const stop = () => {
    clearTimeout(timer);
    req.off("data", onData);
    req.off("end", stop);
    req.off("close", stop);
    // The socket's own destroySoon again (net.Socket's), now if the server asked for it.
    delete (lingering as { destroySoon?: () => void }).destroySoon;
    if (closeAsked) lingering.destroySoon();
  };
  const close = () => {
    stop();
    socket.destroy();
  };
  const onData = (chunk: Buffer | string) => {
    dropped += chunk.length;
    if (dropped > DISCARD_LIMIT_BYTES) close();
  };
  const timer = setTimeout(close, LINGER_MS);
  timer.unref();
  req.on("data", onData);
  req.once("end", stop);
  req.once("close", stop);
  req.on("error", () => {});
  req.resume();
}

/**
 * Whether an HTTP/1.1 request has a body (RFC 9112, section 6.3): a Transfer-Encoding, or a
 * Content-Length other than 0. An answer sent while the parser is still on the headers (a cached
 * price answered at once) sees `req.complete` false even when nothing follows them.
 */
function hasBody(req: NodeServerRequest): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Parses a JSON body; any syntax or encoding problem is a 400 naming the body. */
export function parseJson(bytes: Buffer): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new HttpError(Code.InvalidArgument, "request body: is not valid UTF-8");
  }
  if (text.trim() === "") throw new HttpError(Code.InvalidArgument, "request body: is empty; expected a JSON object");
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpError(Code.InvalidArgument, `request body: is not valid JSON (${(error as Error).message})`);
  }
}

/**
 * Answers with a JSON document (or another `contentType`: the trade history's CSV). The headers
 * go to writeHead as one list (with the request id), which Node writes out directly, rather
 * than being set one by one first (the cost is in docs/decisions/0005-json-routes-outside-connect.md).
 */
export function send(
  req: NodeServerRequest,
  res: NodeServerResponse,
  id: string,
  status: number,
  json: string,
  headers?: Record<string, string>,
  contentType = "application/json",
): void {
  if (res.headersSent || res.writableEnded) return;
  const list = ["x-request-id", id, "content-type", contentType, "content-length", String(Buffer.byteLength(json))];
  if (headers !== undefined) for (const name in headers) list.push(name, headers[name]!);
  // Node's HTTP/2 compatibility layer takes the same flat list, though its types say otherwise.
  (res as ServerResponse).writeHead(status, list);
  res.end(json);
  discardRest(req);
}

export async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
