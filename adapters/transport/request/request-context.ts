/**
 * The request context: a request id (the client's x-request-id when it is plain, else a new
 * UUID), the path, and a logger carrying the id, bound once per request by http/http-handler.ts.
 */
import { randomFillSync } from "node:crypto";

import type { Logger } from "pino";

import type { NodeServerRequest } from "./node-types.js";
import { requestPath } from "./request-path.js";

/** What every layer of a request can reach: its id, its path, and a logger that carries the id. */
export interface RequestContext {
  readonly id: string;
  /** The request target's path, without the query (requestPath). */
  readonly path: string;
  readonly log: Logger;
  /** When the handler took the request (performance.now()), for its latency. */
  readonly started: number;
  /** The access file's name of the request's key once the api_key step accepted it (for the access line). */
  keyName?: string | undefined;
}

/**
 * A request's context whose logger is made on first use: most requests log nothing
 * but their "request completed" line, so most never pay for a pino child.
 */
class LazyRequestContext implements RequestContext {
  #log: Logger | undefined;
  readonly started = performance.now();
  keyName: string | undefined = undefined;

  constructor(
    readonly id: string,
    readonly path: string,
    readonly parent: Logger,
  ) {}

  get log(): Logger {
    this.#log ??= this.parent.child({ reqId: this.id });
    return this.#log;
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
  return value !== undefined && ACCEPTABLE_REQUEST_ID.test(value) ? value : newRequestId();
}

/** Random bytes for 256 request ids, filled again when used up (crypto.randomUUID keeps a store the same way). */
const entropy = Buffer.allocUnsafeSlow(16 * 256);
let entropyUsed = entropy.length;
const HEX_DIGITS = Buffer.from("0123456789abcdef", "latin1");
const idBytes = Buffer.allocUnsafeSlow(36);

/**
 * A new random (version 4) UUID, as crypto.randomUUID makes it from the same source, written out
 * as one flat string: randomUUID's is joined from 20 pieces, which every later reader (the
 * x-request-id header, the access line) flattens again (docs/decisions/0008-log-buffer-access-lines.md).
 */
export function newRequestId(): string {
  if (entropyUsed === entropy.length) {
    randomFillSync(entropy);
    entropyUsed = 0;
  }
  let at = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) idBytes[at++] = DASH;
    let byte = entropy[entropyUsed + i]!;
    if (i === 6)
      byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // variant 10 (RFC 9562)
    idBytes[at++] = HEX_DIGITS[byte >> 4]!;
    idBytes[at++] = HEX_DIGITS[byte & 0x0f]!;
  }
  entropyUsed += 16;
  return idBytes.toString("latin1", 0, 36);
}
const DASH = 0x2d;

/**
 * Gives the request its context (id from requestIdFrom, path from requestPath, logger made
 * on first use); done once, by the outermost handler.
 */
export function bindRequestContext(req: NodeServerRequest, parent: Logger): RequestContext {
  const context = new LazyRequestContext(requestIdFrom(req), requestPath(req.url), parent);
  (req as WithContext)[kContext] = context;
  return context;
}

/** The context the outermost handler bound, if it did. */
export function boundRequestContext(req: NodeServerRequest): RequestContext | undefined {
  return (req as WithContext)[kContext];
}

/**
 * The context bound by the outermost handler. A request that did not pass through
 * it (a handler mounted on its own, as in some tests) gets a fresh one.
 */
export function requestContext(req: NodeServerRequest, fallback: Logger): RequestContext {
  return (req as WithContext)[kContext] ?? bindRequestContext(req, fallback);
}
