/** What one client may hold of the server, and the defaults: the bounds startServer (server.ts) enforces. */

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
