/**
 * The server's connections: every accepted socket (limited per client address and in all), the
 * HTTP/1.1 ones with the requests each is answering, the HTTP/2 sessions, the sockets still
 * deciding their protocol, and whether the shutdown has begun, which all of them look at.
 */
import type * as http2 from "node:http2";
import type * as net from "node:net";

import type { ServerLimits } from "./server-limits.js";

export class Connections {
  /** Set when the shutdown begins. */
  closing = false;
  /** Every accepted TCP socket, cut at the end of the shutdown grace. */
  readonly sockets = new Set<net.Socket>();
  /** Sockets still deciding their protocol. */
  readonly sniffing = new Set<net.Socket>();
  /** HTTP/1.1 sockets and the number of requests each is answering. */
  readonly http1Active = new Map<net.Socket, number>();
  readonly sessions = new Set<http2.ServerHttp2Session>();
  /** Told when the last socket closes during the shutdown. */
  drained: (() => void) | undefined;
  /**
   * The socket whose HTTP/2 session is being set up: the HTTP/2 server creates the session, and
   * emits "session", within the "connection" (h2c) or "secureConnection" (TLS) it is handed.
   */
  arriving: net.Socket | undefined;
  /** Open connections per client address. */
  readonly #perAddress = new Map<string, number>();

  /**
   * @param trustedProxies - TRUSTED_PROXIES: their connections are not limited per address, since
   *   each carries many clients' requests
   */
  constructor(
    readonly limits: ServerLimits,
    readonly trustedProxies: { has(address: string): boolean } | undefined,
  ) {}

  /** Takes a new connection in, or drops it at once when its address (or everyone) holds too many. */
  track(socket: net.Socket): boolean {
    const address = socket.remoteAddress ?? "";
    const held = this.#perAddress.get(address) ?? 0;
    const overAddress = held >= this.limits.connectionsPerAddress && this.trustedProxies?.has(address) !== true;
    if (overAddress || this.sockets.size >= this.limits.connections) {
      socket.destroy();
      return false;
    }
    this.#perAddress.set(address, held + 1);
    this.sockets.add(socket);
    socket.once("close", () => {
      this.sockets.delete(socket);
      this.http1Active.delete(socket);
      const left = (this.#perAddress.get(address) ?? 1) - 1;
      if (left > 0) this.#perAddress.set(address, left);
      else this.#perAddress.delete(address);
      if (this.closing && this.sockets.size === 0) this.drained?.();
    });
    return true;
  }

  /** Ends a socket, and destroys it if the client does not close its side within the grace (no FIN-WAIT-2 sockets held). */
  endSoon(socket: net.Socket, data?: string): void {
    if (data === undefined) socket.end();
    else socket.end(data);
    setTimeout(() => socket.destroy(), this.limits.closeGraceMs).unref();
  }

  /** A new HTTP/2 session (the server's "session" listener): tracked, and closed when it goes quiet. */
  readonly trackSession = (session: http2.ServerHttp2Session): void => {
    const socket = this.arriving;
    this.sessions.add(session);
    session.once("close", () => this.sessions.delete(session));
    // A connection that goes quiet (or never says more than its preface) does not hold a
    // file descriptor forever: closed (GOAWAY), then its socket destroyed if it does not go.
    // The socket, not the session: a closed session's destroy() only ends the socket and waits
    // for the client's FIN, which a client that reads nothing never sends.
    session.setTimeout(this.limits.http2IdleMs, () => {
      session.close();
      setTimeout(() => (socket ?? session).destroy(), this.limits.closeGraceMs).unref();
    });
    if (this.closing) session.close();
  };
}
