/**
 * The API's one port: startServer listens (listeners.ts), lets requests in within the limits
 * (requests.ts, connections.ts, server-limits.ts) and hands them to the handler (http-handler.ts);
 * close() drains it.
 */
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type * as net from "node:net";

import type { Logger } from "pino";

import { Connections } from "./connections.js";
import { cleartextListener, secureListener } from "./listeners.js";
import { requestGate, type RequestGate, type ServedHandler } from "./requests.js";
import { DEFAULT_LIMITS, type ServerLimits } from "./server-limits.js";

export type { ServedHandler } from "./requests.js";

export interface TlsOptions {
  cert: string | Buffer;
  key: string | Buffer;
}

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

/**
 * Starts the API on one port: cleartext HTTP/1.1 and h2c on one listener, or with a certificate
 * TLS with ALPN (listeners.ts). Both servers call the same handler.
 */
export async function startServer(options: ServerOptions): Promise<ApiServer> {
  const { log } = options;
  const limits: ServerLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const host = options.host ?? "127.0.0.1";
  const connections = new Connections(limits, options.trustedProxies);
  const gate = requestGate(options.handler, connections);
  const settings: http2.Settings = { maxConcurrentStreams: limits.streamsPerConnection };
  const { listener, http1 } =
    options.tls !== undefined
      ? { listener: secureListener(options.tls, settings, gate.onRequest, connections, log), http1: undefined }
      : cleartextListener(settings, gate.onRequest, connections, log, options.sniffTimeoutMs ?? 10_000);

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
  const close = closer(listener, http1, connections, gate, options.shutdownTimeoutMs ?? 30_000, log);
  log.info({ url: `${scheme}://${urlHost}:${address.port}`, tls: options.tls !== undefined }, "api listening");
  return {
    host: address.address,
    port: address.port,
    url: `${scheme}://${urlHost}:${address.port}`,
    inFlight: gate.inFlight,
    connections: () => connections.sockets.size,
    close,
  };
}

/**
 * The graceful stop (ApiServer.close): no new connections or requests; idle connections ended,
 * busy ones once answered (requests.ts), HTTP/2 sessions sent a GOAWAY; after `shutdownTimeoutMs`
 * what is left is cut. Idempotent.
 */
function closer(
  listener: net.Server,
  http1: http.Server | undefined,
  connections: Connections,
  gate: RequestGate,
  shutdownTimeoutMs: number,
  log: Logger,
): () => Promise<void> {
  const { sockets, sessions } = connections;
  let closed: Promise<void> | undefined;
  return (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      connections.closing = true;
      log.info({ inFlight: gate.inFlight() }, "server closing: no new connections, finishing requests in flight");
      listener.close();
      if (http1 !== undefined) {
        http1.closeIdleConnections();
        http1.close();
      }
      for (const socket of connections.sniffing) socket.destroy();
      for (const [socket, active] of connections.http1Active) if (active === 0) connections.endSoon(socket);
      for (const session of sessions) session.close();

      const timer = setTimeout(() => {
        log.warn(
          { inFlight: gate.inFlight(), connections: sockets.size },
          "shutdown grace over: cutting the remaining connections",
        );
        for (const socket of sockets) socket.destroy();
        for (const session of sessions) session.destroy();
        finish();
      }, shutdownTimeoutMs);
      timer.unref();
      const finish = () => {
        clearTimeout(timer);
        gate.stop();
        connections.drained = undefined;
        log.info("server closed");
        resolve();
      };
      connections.drained = finish;
      if (sockets.size === 0) finish();
    });
    return closed;
  };
}
