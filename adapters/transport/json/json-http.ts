/**
 * The small HTTP layer under the JSON routes (json-routes.ts): errors that carry their HTTP
 * status and Connect code, reading a bounded JSON body, and writing a JSON answer (the rest of an
 * unread body is request/early-answer.ts's).
 */
import type { ServerResponse } from "node:http";

import { Code } from "@connectrpc/connect";

import { discardRest, type NodeServerRequest, type NodeServerResponse } from "../request/index.js";
import { httpStatusFor } from "../rpc/index.js";

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
