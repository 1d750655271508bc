import { randomUUID } from "node:crypto";

import { pino, type DestinationStream, type Level, type Logger } from "pino";

import type { NodeServerRequest } from "./node-types.js";
import { requestPath } from "./request-path.js";

/**
 * Paths pino blanks out wherever they appear in a log line. Request headers are
 * never logged as a whole, so these are a second line of defence: an `api_key`
 * (header or gRPC metadata), an authorization header or a private key that finds
 * its way into a logged object is written as "[redacted]".
 */
export const REDACT_PATHS = [
  "api_key",
  "apiKey",
  "apiKeys",
  "privateKey",
  "privateKeys",
  "authorization",
  "*.api_key",
  "*.apiKey",
  "*.apiKeys",
  "*.privateKey",
  "*.privateKeys",
  "*.authorization",
  "headers.*",
  "*.headers.*",
];

export interface LoggerOptions {
  level?: Level | "silent";
  /**
   * Where the JSON lines go. Default: stdout, buffered (see LOG_BUFFER_BYTES) and written
   * asynchronously; whatever is buffered is written synchronously when the process exits, on
   * process.exit, a signal's or a fatal error's (pino registers that). Tests pass a buffer.
   */
  destination?: DestinationStream;
}

/**
 * Lines are collected up to this many bytes (about 15 access lines), then written at once, off
 * the event loop. One write per line, even asynchronous, cost a thread-pool hand-off each: price
 * throughput with access lines was 0.47 to 0.55 of a bare node:http server, against 0.76 to 0.79
 * with logs silent (npm run bench, same runs).
 */
const LOG_BUFFER_BYTES = 4096;

/** A quiet service's lines wait at most this long, in ms. */
const LOG_FLUSH_MS = 200;

/**
 * pino's isoTime (`,"time":"2026-11-24T16:20:10.595Z"`), made once per millisecond: a busy
 * service writes several lines within one, and formatting the date was a quarter of an access
 * line's cost (CPU profile of the price under load).
 */
function isoTimeCached(): () => string {
  let ms = -1;
  let field = "";
  return () => {
    const now = Date.now();
    if (now !== ms) {
      ms = now;
      field = `,"time":"${new Date(now).toISOString()}"`;
    }
    return field;
  };
}

/** What every line carries, and how its time and level are written. */
const FORMAT = {
  base: { service: "token-trading-service" },
  timestamp: isoTimeCached(),
  formatters: { level: (label: string) => ({ level: label }) },
} as const;

/** The service's structured JSON logger. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    { ...FORMAT, level: options.level ?? "info", redact: { paths: REDACT_PATHS, censor: "[redacted]" } },
    options.destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BUFFER_BYTES, periodicFlush: LOG_FLUSH_MS }),
  );
}

/**
 * The logger for access lines ("request completed"): `log`'s destination and format, without
 * redaction. An access line holds only fields the handler writes (method, path without the
 * query, protocol, status, timing, request id), none of them a secret, and redaction's walk of
 * every line cost more than the rest of a cached price answer (bench: price with access lines
 * 0.44 of a bare node:http server, against 0.87 with logs silent). Callers check `log`'s level
 * first: this one always writes.
 */
export function accessLogger(log: Logger): Logger {
  const destination = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
  return pino({ ...FORMAT, level: "info" }, destination);
}

/** What every layer of a request can reach: its id, its path, and a logger that carries the id. */
export interface RequestContext {
  readonly id: string;
  /** The request target's path, without the query (requestPath). */
  readonly path: string;
  readonly log: Logger;
}

/**
 * A request's context whose logger is made on first use: most requests log nothing
 * but their "request completed" line, and a pino child costs more than the rest of
 * a cached price answer.
 */
class LazyRequestContext implements RequestContext {
  #log: Logger | undefined;

  constructor(
    readonly id: string,
    readonly path: string,
    readonly parent: Logger,
  ) {}

  get log(): Logger {
    return (this.#log ??= this.parent.child({ reqId: this.id }));
  }
}

/** Where a request keeps its context (a property, cheaper per request than a WeakMap entry). */
const kContext = Symbol("request context");
type WithContext = NodeServerRequest & { [kContext]?: RequestContext };

/** A client-chosen x-request-id is kept when it is short and plain; anything else is replaced. */
const ACCEPTABLE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request id: the incoming `x-request-id` when it is 1 to 128 characters of
 * letters, digits and `._:-` (so it cannot forge log lines), else a new UUID.
 */
export function requestIdFrom(req: NodeServerRequest): string {
  const incoming = req.headers["x-request-id"];
  const value = Array.isArray(incoming) ? incoming[0] : incoming;
  return value !== undefined && ACCEPTABLE_REQUEST_ID.test(value) ? value : randomUUID();
}

/**
 * Gives the request its context (id from requestIdFrom, path from requestPath, logger made
 * on first use); done once, by the outermost handler.
 */
export function bindRequestContext(req: NodeServerRequest, parent: Logger): RequestContext {
  const context = new LazyRequestContext(requestIdFrom(req), requestPath(req.url), parent);
  (req as WithContext)[kContext] = context;
  return context;
}

/**
 * The context bound by the outermost handler. A request that did not pass through
 * it (a handler mounted on its own, as in some tests) gets a fresh one.
 */
export function requestContext(req: NodeServerRequest, fallback: Logger): RequestContext {
  return (req as WithContext)[kContext] ?? bindRequestContext(req, fallback);
}
