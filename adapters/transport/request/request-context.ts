/**
 * The request context: a request id (the client's x-request-id when it is plain, else a new
 * UUID), the path, a logger carrying the id, the client's address, the api_key check and an RPC's
 * outcome, bound once per request by http/http-handler.ts and handed to the request's handler.
 */
import { randomFillSync } from "node:crypto";

import type { Logger } from "pino";

import type { ApiKeyCheck } from "./api-key.js";
import type { NodeServerRequest, NodeServerResponse } from "./node-types.js";
import { requestPath } from "./request-path.js";

/**
 * What every layer of a request can reach, handed to its handler as an argument (as Connect hands
 * its handlers their context values): its id, its path, a logger that carries the id, the client's
 * address, the api_key check, and an RPC's outcome.
 */
export interface RequestContext {
  readonly id: string;
  /** The request target's path, without the query (requestPath). */
  readonly path: string;
  readonly log: Logger;
  /** When the handler took the request (performance.now()), for its latency. */
  readonly started: number;
  /** The client's address, by TRUSTED_PROXIES' rule (http/client-address.ts), found on first use. */
  readonly clientAddress: string;
  /**
   * The api_key check, made once for every request by the pipeline's api_key step (http/steps/api-key.ts),
   * whether or not the request carries a key; undefined only for a request that did not pass through it.
   */
  key: ApiKeyCheck | undefined;
  /** An RPC's outcome, for the request metrics: "ok", or its error code's name; written by whoever answered it. */
  rpcCode: string | undefined;
}

/** A path's handler in the router (http/router.ts): the request, its response, and its context. */
export type RouteHandler = (req: NodeServerRequest, res: NodeServerResponse, context: RequestContext) => void;

/** How the client's address is found: http/client-address.ts's rule, given by the pipeline. */
export type ClientAddressOf = (req: NodeServerRequest) => string;

/** The peer's address, for a context made without the pipeline's rule. */
const peerAddress: ClientAddressOf = (req) => req.socket?.remoteAddress ?? "";

/**
 * A request's context whose logger and client address are found on first use: most requests log
 * nothing but their "request completed" line, so most never pay for a pino child.
 */
class LazyRequestContext implements RequestContext {
  #log: Logger | undefined;
  #clientAddress: string | undefined;
  readonly #req: NodeServerRequest;
  readonly #addressOf: ClientAddressOf;
  readonly started = performance.now();
  key: ApiKeyCheck | undefined = undefined;
  rpcCode: string | undefined = undefined;

  constructor(
    readonly id: string,
    readonly path: string,
    readonly parent: Logger,
    req: NodeServerRequest,
    addressOf: ClientAddressOf,
  ) {
    this.#req = req;
    this.#addressOf = addressOf;
  }

  get log(): Logger {
    this.#log ??= this.parent.child({ reqId: this.id });
    return this.#log;
  }

  get clientAddress(): string {
    this.#clientAddress ??= this.#addressOf(this.#req);
    return this.#clientAddress;
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
 * Gives the request its context (id from requestIdFrom, path from requestPath, logger and client
 * address found on first use); done once, by the outermost handler, which hands it to the
 * request's handler. The request keeps it too, for the end of its answer (http/steps/observe.ts).
 */
export function bindRequestContext(
  req: NodeServerRequest,
  parent: Logger,
  addressOf: ClientAddressOf = peerAddress,
): RequestContext {
  const context = new LazyRequestContext(requestIdFrom(req), requestPath(req.url), parent, req, addressOf);
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
