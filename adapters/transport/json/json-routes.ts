/**
 * The JSON routes' handler: finds a request's route (route-table.ts), checks its key, reads its
 * body when it has one, runs it, and answers, or refuses it with `{"code", "message"}`.
 */
import { Code } from "@connectrpc/connect";
import type { Logger } from "pino";

import type { Caller, UseCases } from "../../../core/index.js";
import {
  API_KEY_HEADER,
  requestContext,
  type ApiKeyCheck,
  type ApiKeyVerifier,
  type NodeHandlerFn,
  type NodeServerRequest,
  type NodeServerResponse,
  type RequestContext,
} from "../request/index.js";
import { codeName, toConnectError } from "../rpc/index.js";
import {
  ClientGoneError,
  HttpError,
  isJsonContentType,
  methodNotAllowed,
  notFound,
  parseJson,
  readBody,
  send,
  unsupportedMediaType,
} from "./json-http.js";
import { cachedReadiness, type Readiness } from "./readiness.js";
import { routeTable, type Answer, type Route } from "./route-table.js";

/** Largest accepted JSON body by default: a trade request is under 300 bytes. */
export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024;

export interface JsonRoutesOptions {
  useCases: UseCases;
  verifier: ApiKeyVerifier;
  /** Backs GET /readyz (chain reachable, wallet funded). */
  readiness: () => Promise<Readiness>;
  /** Bodies larger than this are refused with 413 without being read to the end. */
  bodyLimitBytes?: number;
  /** /readyz answers 503 when the check takes longer than this. Default 5000 ms. */
  readinessTimeoutMs?: number;
  /**
   * How long a readiness answer is reused, in ms. Default 1000: probes and anyone else calling
   * /readyz (it needs no key) cost the node a check a second at most, shared by concurrent callers.
   */
  readinessCacheMs?: number;
  log: Logger;
  /** Told of each request whose key an authenticated route refused (the rate limit on refused keys). */
  onRefusedKey?: (req: NodeServerRequest) => void;
  /** The api_key check the outer handler (http/steps/api-key.ts) made of a request already, if it did: not made again. */
  checkedKey?: (req: NodeServerRequest) => ApiKeyCheck | undefined;
}

/**
 * The JSON routes of docs/SPEC.md plus the probes: http/http-handler.ts sends here every path that
 * is not an RPC, /docs or an unknown RPC:
 *
 * | Method | Path                  | Key | Answer                          |
 * |--------|-----------------------|-----|---------------------------------|
 * | POST   | /api/v1/token/sell    | yes | receipt (5 logs)                |
 * | POST   | /api/v1/token/buy     | yes | receipt (3 logs)                |
 * | POST   | /api/v1/remmitance    | yes | receipt (3 logs); SPEC spelling |
 * | POST   | /api/v1/remittance    | yes | alias of the above              |
 * | POST   | /api/v1/token/quote   | yes | a quote for a trade (Quote-Id)  |
 * | GET    | /api/v1/token/price   | yes | price record                    |
 * | GET    | /api/v1/trades        | yes | a page of the caller's trades   |
 * | GET    | /api/v1/trades/summary| yes | the caller's totals             |
 * | GET    | /api/v1/trades/{hash} | yes | the trade as the journal has it |
 * | GET    | /api/v1/webhooks/deliveries | yes | the caller's webhook deliveries |
 * | POST   | /api/v1/webhooks/deliveries/{id}/retry | yes | a failed one sent again |
 * | GET    | /healthz              | no  | {"status":"ok"}                 |
 * | GET    | /readyz               | no  | {"status":"ready"} or 503       |
 *
 * Checks run in this order, the first failure answering: path (404), method (405),
 * api_key (401), Content-Type (415), size (413), JSON syntax (400), then the use
 * case's validation (400 naming the field) and the chain's refusals.
 */
export function jsonRoutes(options: JsonRoutesOptions): NodeHandlerFn & { routeOf(path: string): string } {
  const { verifier, log } = options;
  const limit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const checkReadiness = cachedReadiness(options.readiness, {
    timeoutMs: options.readinessTimeoutMs ?? 5_000,
    cacheMs: options.readinessCacheMs ?? 1_000,
  });
  const table = routeTable(options.useCases, checkReadiness, log);

  /**
   * Answers one request: at once when its answer is at hand (a cached price), else through the
   * promise returned. Every refusal is thrown, or rejects that promise, and `refuse` answers it.
   */
  const answer = (
    req: NodeServerRequest,
    res: NodeServerResponse,
    path: string,
    id: string,
  ): Promise<void> | undefined => {
    const method = req.method ?? "GET";
    const { route, param } = table.routeOf(path);
    if (route === undefined) throw notFound(method, path);
    if (method !== route.method) throw methodNotAllowed(method, path, route.method);
    let caller: Caller = { id: "" };
    if (route.authenticated) {
      const raw = req.headers[API_KEY_HEADER];
      const result = options.checkedKey?.(req) ?? verifier.check(Array.isArray(raw) ? raw.join(",") : raw);
      if (!result.ok) {
        options.onRefusedKey?.(req);
        throw new HttpError(Code.Unauthenticated, result.message);
      }
      caller = result.caller ?? { id: result.scope };
    }
    const now = route.jsonBody ? undefined : route.now?.();
    if (now === undefined) return answerLater(req, res, id, route, caller, param, limit);
    sendAnswer(req, res, id, now);
    return undefined;
  };

  /** Answers one request, or refuses it. */
  const handler: NodeHandlerFn = (req, res) => {
    // The outermost handler has bound the context (and parsed the path) already.
    const context = requestContext(req, log);
    try {
      answer(req, res, context.path, context.id)?.catch((thrown: unknown) => refuse(req, res, context, thrown));
    } catch (thrown) {
      refuse(req, res, context, thrown);
    }
  };
  return Object.assign(handler, { routeOf: table.label });
}

/** The rest of `answer` for a route that reads a body (of at most `limit` bytes) or waits for its handler. */
async function answerLater(
  req: NodeServerRequest,
  res: NodeServerResponse,
  id: string,
  route: Route,
  caller: Caller,
  param: string,
  limit: number,
): Promise<void> {
  let body: unknown;
  if (route.jsonBody) {
    if (!isJsonContentType(req.headers["content-type"])) throw unsupportedMediaType();
    body = parseJson(await readBody(req, limit));
  }
  sendAnswer(req, res, id, await route.handle(req, body, caller, param));
}

function sendAnswer(req: NodeServerRequest, res: NodeServerResponse, id: string, result: Answer): void {
  if ("text" in result) send(req, res, id, result.status, result.text, result.headers, result.contentType);
  else send(req, res, id, result.status, "json" in result ? result.json : JSON.stringify(result.body));
}

/** A refusal, answered and logged: the client's own error as it is, anything else through the error map. */
function refuse(req: NodeServerRequest, res: NodeServerResponse, context: RequestContext, thrown: unknown): void {
  const { id, path, log: reqLog } = context;
  if (thrown instanceof ClientGoneError) {
    reqLog.info({ path }, "client went away before its request body arrived; nothing was done");
    return;
  }
  if (thrown instanceof HttpError) {
    reqLog.info({ code: codeName(thrown.code), reason: thrown.message, path }, "request refused");
    send(
      req,
      res,
      id,
      thrown.status,
      JSON.stringify({ code: codeName(thrown.code), message: thrown.message }),
      thrown.headers,
    );
    return;
  }
  const { error, internal, status } = toConnectError(thrown);
  if (internal) reqLog.error({ err: thrown, path }, "request failed with an unexpected error");
  else reqLog.info({ code: codeName(error.code), reason: error.rawMessage, path }, "request refused");
  const retryAfter = error.metadata.get("retry-after");
  send(
    req,
    res,
    id,
    status,
    JSON.stringify({ code: codeName(error.code), message: error.rawMessage }),
    retryAfter === null ? undefined : { "retry-after": retryAfter },
  );
}
