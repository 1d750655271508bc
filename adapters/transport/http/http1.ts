/**
 * HTTP/1.1's guards: Node's server options against slow clients, the 503 of a request refused
 * before it started, the parser stopped on a connection that pipelines too deep, and the answer
 * to a request Node's parser refuses itself.
 */
import type * as http from "node:http";
import type * as net from "node:net";

import type { NodeServerResponse } from "../request/index.js";
import type { Connections } from "./connections.js";

/**
 * Protection against slow or stalled HTTP/1.1 clients; and a request without a body (no
 * Content-Length, no Transfer-Encoding: a price, a probe) starts with its body stream already
 * ended, so Node runs none of a stream's events for it (Node 24's optimizeEmptyRequests; earlier
 * versions ignore the option).
 */
export const HTTP1_OPTIONS: http.ServerOptions = {
  headersTimeout: 20_000,
  requestTimeout: 60_000,
  keepAliveTimeout: 5_000,
  optimizeEmptyRequests: true,
};

/** Answers 503 without running anything: the request may be sent again as it is. */
export function refuseUnstarted(res: NodeServerResponse, message: string, close: boolean): void {
  const body = JSON.stringify({ code: "unavailable", message });
  const headers: Record<string, string | number> = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "retry-after": "1",
  };
  if (close) headers.connection = "close";
  res.writeHead(503, headers);
  res.end(body);
}

/**
 * Node's parser takes a whole read (64 KiB: some 1,900 small pipelined requests) at once, and
 * each request it parses is a request object, a refusal, and an abort with a stack trace when
 * the connection closes: seconds of the only thread for a flood of such connections, while
 * every new client waits. For a connection over the pipelining limit, the parser is stopped at
 * the next request head: told it is an upgrade (2, llhttp's on_headers_complete), it returns
 * with the rest of the read unparsed; that request is not marked as one, so Node does not hand
 * the socket over, and the paused socket is read no further.
 */
export function stopParsing(socket: net.Socket): void {
  type Incoming = http.IncomingMessage & { upgrade: boolean };
  const parser = (socket as net.Socket & { parser?: { onIncoming: (req: Incoming) => number } }).parser;
  if (parser === undefined) return;
  parser.onIncoming = (req) => {
    req.upgrade = false;
    return 2;
  };
}

/**
 * The "clientError" listener: requests Node's HTTP parser refuses (an unknown method, a malformed
 * header, oversized headers) never reach the handler; they are answered with the same
 * {code, message} body, and the connection ended.
 */
export function answerClientError(connections: Connections) {
  return (error: NodeJS.ErrnoException, socket: net.Socket): void => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const tooLarge = error.code === "HPE_HEADER_OVERFLOW";
    const body = JSON.stringify(
      tooLarge
        ? { code: "resource_exhausted", message: "request headers: too large" }
        : { code: "invalid_argument", message: "request: not a valid HTTP/1.1 request" },
    );
    connections.endSoon(
      socket,
      `HTTP/1.1 ${tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request"}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  };
}
