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
  /** Where the JSON lines go; stdout when omitted. Tests pass a buffer. */
  destination?: DestinationStream;
}

/** The service's structured JSON logger. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? "info",
      base: { service: "token-trading-service" },
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination,
  );
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
