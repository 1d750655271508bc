/**
 * The listening servers, both calling the same request listener:
 *
 * TLS: one http2.createSecureServer with allowHTTP1, where ALPN picks the protocol.
 *
 * Cleartext: a net.Server accepts each connection and looks at its first bytes. When they are
 * the HTTP/2 connection preface, the socket goes to an http2.createServer (h2c: gRPC, Connect);
 * otherwise to an http.createServer (HTTP/1.1: JSON routes, Connect, gRPC-Web). A cleartext
 * HTTP/2 server cannot accept HTTP/1.1 itself (`allowHTTP1` works only with TLS, where ALPN
 * chooses), hence the sniffing.
 */
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";

import type { Logger } from "pino";

import type { NodeServerRequest, NodeServerResponse } from "../request/index.js";
import type { Connections } from "./connections.js";
import { HTTP1_OPTIONS, answerClientError } from "./http1.js";

/** The first bytes of every HTTP/2 connection (RFC 9113, section 3.4). */
const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

type OnRequest = (req: NodeServerRequest, res: NodeServerResponse) => void;
type Http2OnRequest = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;

/** The TLS server: HTTP/2 or HTTP/1.1 by ALPN. */
export function secureListener(
  tls: { cert: string | Buffer; key: string | Buffer },
  settings: http2.Settings,
  onRequest: OnRequest,
  connections: Connections,
  log: Logger,
): net.Server {
  const secure = http2.createSecureServer(
    { cert: tls.cert, key: tls.key, allowHTTP1: true, ALPNProtocols: ["h2", "http/1.1"], settings },
    onRequest as Http2OnRequest,
  );
  secure.on("connection", (socket: net.Socket) => void connections.track(socket));
  secure.on("session", connections.trackSession);
  secure.prependListener("secureConnection", (socket: net.Socket) => {
    connections.arriving = socket;
  });
  secure.on("secureConnection", (socket: net.Socket) => {
    connections.arriving = undefined;
    if ((socket as { alpnProtocol?: string | false }).alpnProtocol !== "h2") {
      connections.http1Active.set(socket, 0);
    }
  });
  secure.on("tlsClientError", (error) => log.debug({ err: error }, "TLS handshake failed"));
  return secure;
}

/** The cleartext listener, and the HTTP/1.1 server it hands sockets to (closed with it). */
export function cleartextListener(
  settings: http2.Settings,
  onRequest: OnRequest,
  connections: Connections,
  log: Logger,
  sniffTimeoutMs: number,
): { listener: net.Server; http1: http.Server } {
  const h1 = http.createServer(HTTP1_OPTIONS, onRequest as http.RequestListener);
  // The server never listens itself (sockets arrive through "connection"), so start
  // the connection tracking that enforces headersTimeout/requestTimeout by hand.
  h1.emit("listening");
  h1.on("clientError", answerClientError(connections));
  const h2 = http2.createServer({ settings }, onRequest as Http2OnRequest);
  h2.on("session", connections.trackSession);
  const listener = net.createServer((socket) => {
    if (!connections.track(socket)) return;
    connections.sniffing.add(socket);
    socket.setTimeout(sniffTimeoutMs, () => socket.destroy());
    socket.on("error", (error) => log.debug({ err: error }, "socket error before the protocol was known"));
    sniff(socket, h1, h2, connections);
  });
  return { listener, http1: h1 };
}

/** Reads a new socket's first bytes, then hands it to HTTP/2 (the preface) or HTTP/1.1 (anything else). */
function sniff(socket: net.Socket, h1: http.Server, h2: http2.Http2Server, connections: Connections): void {
  let seen: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, HTTP2_PREFACE.length);
    const looksHttp2 = seen.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n));
    if (looksHttp2 && seen.length < HTTP2_PREFACE.length) return; // wait for the whole preface
    socket.off("data", onData);
    socket.removeAllListeners("timeout");
    socket.setTimeout(0);
    connections.sniffing.delete(socket);
    socket.pause();
    socket.unshift(seen);
    if (looksHttp2) {
      // The HTTP/2 session reads what is already buffered, then takes over the socket.
      connections.arriving = socket;
      h2.emit("connection", socket);
      connections.arriving = undefined;
    } else {
      connections.http1Active.set(socket, 0);
      h1.emit("connection", socket);
      socket.resume();
    }
  };
  socket.on("data", onData);
}
