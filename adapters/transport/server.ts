import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";

import type { NodeHandlerFn, NodeServerRequest, NodeServerResponse } from "./node-types.js";
import type { Logger } from "pino";

/** The first bytes of every HTTP/2 connection (RFC 9113, section 3.4). */
const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export interface TlsOptions {
  cert: string | Buffer;
  key: string | Buffer;
}

/**
 * A request handler, and what it wants told when a response it was given has closed (answered,
 * or its connection gone): one listener per response, the server's, serves both.
 */
export type ServedHandler = NodeHandlerFn & { answered?: (res: NodeServerResponse) => void };

export interface ServerOptions {
  handler: ServedHandler;
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 picks a free port. Default 0. */
  port?: number;
  /** With a certificate: TLS with ALPN (h2, http/1.1); without: cleartext HTTP/1.1 and h2c. */
  tls?: TlsOptions;
  log: Logger;
  /** On close, the longest wait for in-flight requests before connections are cut. Default 30 s. */
  shutdownTimeoutMs?: number;
  /** A connection that has not sent its first bytes within this time is dropped. Default 10 s. */
  sniffTimeoutMs?: number;
  /** Limits on what one client can hold; see DEFAULT_LIMITS. */
  limits?: Partial<ServerLimits>;
  /**
   * TRUSTED_PROXIES (client-address.ts): their connections are not limited per address, since
   * each carries many clients' requests; absent = none.
   */
  trustedProxies?: { has(address: string): boolean };
}

/**
 * What one client, with or without a key, may hold of the server. Each bounds an attack:
 * idle HTTP/2 connections exhausting file descriptors, half-closed sockets, pipelining and
 * HEADERS+RST_STREAM floods, and streams whose body never comes.
 */
export interface ServerLimits {
  /**
   * Open connections from one client address: the TCP peer's. A connection is counted when it is
   * accepted, before a byte of it is read, so X-Forwarded-For cannot name its client; and a proxy
   * reuses its connections for many clients. A trusted proxy's connections are therefore not
   * limited per address (only by `connections`); each client behind it is limited, per request,
   * by the refused-key throttle under its forwarded address.
   */
  connectionsPerAddress: number;
  /** Open connections in all. */
  connections: number;
  /** An HTTP/2 connection without a frame for this long is closed. */
  http2IdleMs: number;
  /** Streams one HTTP/2 connection may have open at once (advertised in its SETTINGS). */
  streamsPerConnection: number;
  /** Requests one HTTP/1.1 connection may have in flight (pipelined); more are refused (503) unstarted, and the connection closed. */
  pipelinedPerConnection: number;
  /** Requests in flight in all; more are refused (503) before anything runs. */
  requestsInFlight: number;
  /** A request body (HTTP/2) that has not fully arrived within this time: its stream is reset. */
  bodyMs: number;
  /** After the server ends a connection (a refused request, the shutdown), how long the client has to close its side before the socket is destroyed. */
  closeGraceMs: number;
}

export const DEFAULT_LIMITS: ServerLimits = {
  connectionsPerAddress: 256,
  connections: 8_192,
  http2IdleMs: 60_000,
  streamsPerConnection: 100,
  pipelinedPerConnection: 16,
  requestsInFlight: 4_096,
  bodyMs: 10_000,
  closeGraceMs: 2_000,
};

export interface ApiServer {
  readonly host: string;
  readonly port: number;
  /** e.g. "http://127.0.0.1:8080" (https with TLS). */
  readonly url: string;
  /** Requests being answered right now. */
  inFlight(): number;
  /** Connections open right now. */
  connections(): number;
  /**
   * Graceful stop: no new connections or requests; requests in flight finish and
   * are answered (HTTP/1.1 with `Connection: close`, HTTP/2 after a GOAWAY); then
   * connections close. After `shutdownTimeoutMs` the rest are cut. Idempotent.
   */
  close(): Promise<void>;
}

/** Protection against slow or stalled HTTP/1.1 clients. */
const HTTP1_OPTIONS: http.ServerOptions = {
  headersTimeout: 20_000,
  requestTimeout: 60_000,
  keepAliveTimeout: 5_000,
};

/**
 * Starts the API on one port.
 *
 * Cleartext: a net.Server accepts each connection and looks at its first bytes.
 * When they are the HTTP/2 connection preface, the socket goes to an
 * http2.createServer (h2c: gRPC, Connect); otherwise to an http.createServer
 * (HTTP/1.1: JSON routes, Connect, gRPC-Web). A cleartext HTTP/2 server cannot
 * accept HTTP/1.1 itself (`allowHTTP1` works only with TLS, where ALPN chooses), hence the sniffing.
 *
 * TLS: one http2.createSecureServer with allowHTTP1 and ALPN picks the protocol.
 *
 * Both servers call the same handler.
 */
export async function startServer(options: ServerOptions): Promise<ApiServer> {
  const { log } = options;
  const limits: ServerLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const host = options.host ?? "127.0.0.1";
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 30_000;
  const sniffTimeoutMs = options.sniffTimeoutMs ?? 10_000;

  let closing = false;
  let inFlight = 0;
  /** Every accepted TCP socket, cut at the end of the shutdown grace. */
  const sockets = new Set<net.Socket>();
  /** Sockets still deciding their protocol. */
  const sniffing = new Set<net.Socket>();
  /** HTTP/1.1 sockets and the number of requests each is answering. */
  const http1Active = new Map<net.Socket, number>();
  const sessions = new Set<http2.ServerHttp2Session>();
  let drained: (() => void) | undefined;

  /** Open connections per client address. */
  const perAddress = new Map<string, number>();
  /** Takes a new connection in, or drops it at once when its address (or everyone) holds too many. */
  const track = (socket: net.Socket): boolean => {
    const address = socket.remoteAddress ?? "";
    const held = perAddress.get(address) ?? 0;
    const overAddress = held >= limits.connectionsPerAddress && options.trustedProxies?.has(address) !== true;
    if (overAddress || sockets.size >= limits.connections) {
      socket.destroy();
      return false;
    }
    perAddress.set(address, held + 1);
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      http1Active.delete(socket);
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
      if (closing && sockets.size === 0) drained?.();
    });
    return true;
  };
  /** Ends a socket, and destroys it if the client does not close its side within the grace (no FIN-WAIT-2 sockets held). */
  const endSoon = (socket: net.Socket, data?: string) => {
    if (data === undefined) socket.end();
    else socket.end(data);
    setTimeout(() => socket.destroy(), limits.closeGraceMs).unref();
  };

  /**
   * Node's parser takes a whole read (64 KiB: some 1,900 small pipelined requests) at once, and
   * each request it parses is a request object, a refusal, and an abort with a stack trace when
   * the connection closes: seconds of the only thread for a flood of such connections, while
   * every new client waits. For a connection over the pipelining limit, the parser is stopped at
   * the next request head: told it is an upgrade (2, llhttp's on_headers_complete), it returns
   * with the rest of the read unparsed; that request is not marked as one, so Node does not hand
   * the socket over, and the paused socket is read no further.
   */
  const stopParsing = (socket: net.Socket) => {
    type Incoming = http.IncomingMessage & { upgrade: boolean };
    const parser = (socket as net.Socket & { parser?: { onIncoming: (req: Incoming) => number } }).parser;
    if (parser === undefined) return;
    parser.onIncoming = (req) => {
      req.upgrade = false;
      return 2;
    };
  };
  /** HTTP/1.1 connections read no further for pipelining too deep: closed once answered. */
  const overPipelined = new WeakSet<net.Socket>();
  /** Answers 503 without running anything: the request may be sent again as it is. */
  const refuseUnstarted = (res: NodeServerResponse, message: string, close: boolean) => {
    const body = JSON.stringify({ code: "unavailable", message });
    const headers: Record<string, string | number> = {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "retry-after": "1",
    };
    if (close) headers.connection = "close";
    res.writeHead(503, headers);
    res.end(body);
  };

  /** Where a response keeps its HTTP/1.1 socket for onResponseClose. */
  const kSocket = Symbol("http1 socket");
  const { answered } = options.handler;
  /**
   * A response's end, one listener for every response (`this` is the response): what it held is
   * let go, and the handler is told.
   */
  function onResponseClose(this: NodeServerResponse & { [kSocket]?: net.Socket }) {
    inFlight--;
    const http1Socket = this[kSocket];
    if (http1Socket !== undefined) {
      const left = (http1Active.get(http1Socket) ?? 1) - 1;
      http1Active.set(http1Socket, left);
      // A response that started before the shutdown had no "Connection: close".
      if ((closing || overPipelined.has(http1Socket)) && left === 0) endSoon(http1Socket);
    }
    answered?.(this);
  }
  /**
   * HTTP/2 streams whose request body is still coming, with the time it must have arrived by:
   * swept a few times per bodyMs by one timer for all, so a frame costs no timer refresh.
   */
  const bodyDeadlines = new Map<http2.ServerHttp2Stream, number>();
  function onBodyEnd(this: http2.Http2ServerRequest) {
    bodyDeadlines.delete(this.stream);
  }
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [stream, deadline] of bodyDeadlines) {
        if (stream.destroyed || stream.closed) bodyDeadlines.delete(stream);
        else if (now >= deadline) {
          bodyDeadlines.delete(stream);
          stream.close(http2.constants.NGHTTP2_CANCEL);
        }
      }
    },
    Math.max(10, Math.min(1_000, limits.bodyMs / 4)),
  ).unref();
  /**
   * An HTTP/2 answer at its end (`this` is its stream). Every Http2ServerResponse ends with
   * trailers (or an empty end) on "wantTrailers", which Node sends from a setImmediate: resetting
   * the stream before would lose them (gRPC's grpc-status). Checked on the turn after.
   */
  function onAnswerEnding(this: http2.ServerHttp2Stream) {
    if (!this.readableEnded) setImmediate(stopRequestBody, this);
  }
  /**
   * An answer sent in full while the client still sends the request's body: RST_STREAM NO_ERROR
   * asks it to stop (RFC 9113, section 8.1), rather than let it send a body nobody reads. Node does
   * this itself only for a stream whose body was never read.
   */
  const stopRequestBody = (stream: http2.ServerHttp2Stream) => {
    if (!stream.closed && !stream.destroyed && stream.state.remoteClose === 0) {
      stream.close(http2.constants.NGHTTP2_NO_ERROR);
    }
  };
  /** An HTTP/2 request whose handler was put off a turn: run unless the client reset the stream meanwhile. */
  const runDeferred = (req: NodeServerRequest, res: NodeServerResponse) => {
    const stream = (req as http2.Http2ServerRequest).stream;
    if (stream.destroyed || stream.closed || res.writableEnded) return;
    options.handler(req, res);
  };

  const onRequest = (req: NodeServerRequest, res: NodeServerResponse) => {
    inFlight++;
    const http1Socket = req.httpVersionMajor === 1 ? req.socket : undefined;
    const pipelined = http1Socket === undefined ? 0 : (http1Active.get(http1Socket) ?? 0) + 1;
    if (http1Socket !== undefined) {
      http1Active.set(http1Socket, pipelined);
      (res as NodeServerResponse & { [kSocket]?: net.Socket })[kSocket] = http1Socket;
    }
    res.on("close", onResponseClose);
    if (closing && http1Socket !== undefined) {
      // A request that reaches a closing keep-alive connection (pipelined, or sent as the
      // server decided to close) is not started: its connection may end before an answer could
      // be written, and a trade executed but never answered might be paid twice by a retry.
      // Refused before anything runs, it is safe to send again. (HTTP/2 refuses new streams
      // itself once the GOAWAY is out.)
      refuseUnstarted(res, "the service is shutting down: the request was not started; send it again", true);
      return;
    }
    if (http1Socket !== undefined && pipelined > limits.pipelinedPerConnection) {
      // A client that pipelines this deep is not reading its answers: it is read no further,
      // and what it sent beyond the limit is refused unstarted; the connection then closes.
      http1Socket.pause();
      if (!overPipelined.has(http1Socket)) {
        stopParsing(http1Socket);
      }
      overPipelined.add(http1Socket);
      refuseUnstarted(
        res,
        `more than ${limits.pipelinedPerConnection} requests in flight on one connection: this one was not started`,
        true,
      );
      return;
    }
    if (inFlight > limits.requestsInFlight) {
      refuseUnstarted(
        res,
        "the service is overloaded: the request was not started; retry shortly",
        http1Socket !== undefined,
      );
      return;
    }
    if (http1Socket === undefined) {
      // HTTP/2: a stream the client reset at once (HEADERS then RST_STREAM, the rapid-reset
      // flood) is seen before the reset is: the handler starts on the next turn, if the stream
      // still stands. And a body that does not arrive in time resets its stream.
      // A request whose HEADERS ended the stream has no body to wait for.
      const { stream } = req as http2.Http2ServerRequest;
      if (!req.complete && !stream.endAfterHeaders) {
        bodyDeadlines.set(stream, Date.now() + limits.bodyMs);
        req.on("end", onBodyEnd);
        stream.once("wantTrailers", onAnswerEnding);
      }
      setImmediate(runDeferred, req, res);
      return;
    }
    options.handler(req, res);
  };

  /**
   * The socket whose HTTP/2 session is being set up: the HTTP/2 server creates the session, and
   * emits "session", within the "connection" (h2c) or "secureConnection" (TLS) it is handed.
   */
  let arriving: net.Socket | undefined;
  const trackSession = (session: http2.ServerHttp2Session) => {
    const socket = arriving;
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    // A connection that goes quiet (or never says more than its preface) does not hold a
    // file descriptor forever: closed (GOAWAY), then its socket destroyed if it does not go.
    // The socket, not the session: a closed session's destroy() only ends the socket and waits
    // for the client's FIN, which a client that reads nothing never sends.
    session.setTimeout(limits.http2IdleMs, () => {
      session.close();
      setTimeout(() => (socket ?? session).destroy(), limits.closeGraceMs).unref();
    });
    if (closing) session.close();
  };
  const http2Settings: http2.Settings = { maxConcurrentStreams: limits.streamsPerConnection };

  let listener: net.Server;
  let http1: http.Server | undefined;
  if (options.tls !== undefined) {
    const secure = http2.createSecureServer(
      {
        cert: options.tls.cert,
        key: options.tls.key,
        allowHTTP1: true,
        ALPNProtocols: ["h2", "http/1.1"],
        settings: http2Settings,
      },
      onRequest as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    secure.on("connection", (socket: net.Socket) => void track(socket));
    secure.on("session", trackSession);
    secure.prependListener("secureConnection", (socket: net.Socket) => {
      arriving = socket;
    });
    secure.on("secureConnection", (socket: net.Socket) => {
      arriving = undefined;
      if ((socket as { alpnProtocol?: string | false }).alpnProtocol !== "h2") {
        http1Active.set(socket, 0);
      }
    });
    secure.on("tlsClientError", (error) => log.debug({ err: error }, "TLS handshake failed"));
    listener = secure;
  } else {
    const h1 = http.createServer(HTTP1_OPTIONS, onRequest as http.RequestListener);
    // The server never listens itself (sockets arrive through "connection"), so start
    // the connection tracking that enforces headersTimeout/requestTimeout by hand.
    h1.emit("listening");
    // Requests Node's HTTP parser refuses (an unknown method, a malformed header, oversized
    // headers) never reach the handler: answer them with the same {code, message} body.
    h1.on("clientError", (error: NodeJS.ErrnoException, socket: net.Socket) => {
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
      endSoon(
        socket,
        `HTTP/1.1 ${tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request"}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
    const h2 = http2.createServer(
      { settings: http2Settings },
      onRequest as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    h2.on("session", trackSession);
    http1 = h1;

    listener = net.createServer((socket) => {
      if (!track(socket)) return;
      sniffing.add(socket);
      socket.setTimeout(sniffTimeoutMs, () => socket.destroy());
      socket.on("error", (error) => log.debug({ err: error }, "socket error before the protocol was known"));
      let seen: Buffer = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
        const n = Math.min(seen.length, HTTP2_PREFACE.length);
        const looksHttp2 = seen.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n));
        if (looksHttp2 && seen.length < HTTP2_PREFACE.length) return; // wait for the whole preface
        socket.off("data", onData);
        socket.removeAllListeners("timeout");
        socket.setTimeout(0);
        sniffing.delete(socket);
        socket.pause();
        socket.unshift(seen);
        if (looksHttp2) {
          // The HTTP/2 session reads what is already buffered, then takes over the socket.
          arriving = socket;
          h2.emit("connection", socket);
          arriving = undefined;
        } else {
          http1Active.set(socket, 0);
          h1.emit("connection", socket);
          socket.resume();
        }
      };
      socket.on("data", onData);
    });
  }

  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(options.port ?? 0, host, () => {
      listener.off("error", reject);
      resolve();
    });
  });
  listener.on("error", (error) => log.error({ err: error }, "server error"));

  const address = listener.address() as net.AddressInfo;
  const scheme = options.tls !== undefined ? "https" : "http";
  const urlHost = address.family === "IPv6" ? `[${address.address}]` : address.address;

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      closing = true;
      log.info({ inFlight }, "server closing: no new connections, finishing requests in flight");
      listener.close();
      if (http1 !== undefined) {
        http1.closeIdleConnections();
        http1.close();
      }
      for (const socket of sniffing) socket.destroy();
      for (const [socket, active] of http1Active) if (active === 0) endSoon(socket);
      for (const session of sessions) session.close();

      const timer = setTimeout(() => {
        log.warn({ inFlight, connections: sockets.size }, "shutdown grace over: cutting the remaining connections");
        for (const socket of sockets) socket.destroy();
        for (const session of sessions) session.destroy();
        finish();
      }, shutdownTimeoutMs);
      timer.unref();
      const finish = () => {
        clearTimeout(timer);
        clearInterval(sweep);
        drained = undefined;
        log.info("server closed");
        resolve();
      };
      drained = finish;
      if (sockets.size === 0) finish();
    });
    return closed;
  };

  log.info({ url: `${scheme}://${urlHost}:${address.port}`, tls: options.tls !== undefined }, "api listening");
  return {
    host: address.address,
    port: address.port,
    url: `${scheme}://${urlHost}:${address.port}`,
    inFlight: () => inFlight,
    connections: () => sockets.size,
    close,
  };
}
