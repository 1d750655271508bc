/**
 * The JSON routes' handlers, one per path in the service's router (http/router.ts): each checks
 * its request (method, key, body), runs it, and answers, or refuses it with `{"code", "message"}`.
 */
import { Code } from "@connectrpc/connect";

import type { UseCases } from "../../../core/index.js";
import {
  MISSING_KEY_MESSAGE,
  type AcceptedKey,
  type NodeServerRequest,
  type NodeServerResponse,
  type RequestContext,
  type RouteHandler,
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
import type { Readiness } from "./readiness.js";
import { routeTable, type Answer, type Route } from "./route-table.js";

/** Largest accepted JSON body by default: a trade request is under 300 bytes. */
export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024;

export interface JsonRoutesOptions {
  useCases: UseCases;
  /** Backs GET /readyz (chain reachable, wallet funded): the service's one cached check (readiness.ts). */
  readiness: () => Promise<Readiness>;
  /** Bodies larger than this are refused with 413 without being read to the end. */
  bodyLimitBytes?: number;
  /** Told of each request whose key an authenticated route refused (the rate limit on refused keys). */
  onRefusedKey?: (context: RequestContext) => void;
}

/** The JSON routes, for the service's router. */
export interface JsonRoutes {
  /** The handler of each route with a fixed path, by path. */
  paths: ReadonlyMap<string, RouteHandler>;
  /** Any other path: the route of a parameterised one (a trade by its hash, a delivery's retry), else 404. */
  other: RouteHandler;
  /** The label the request metrics give a path. */
  label(path: string): string;
}

/**
 * The JSON routes of docs/SPEC.md plus the probes:
 *
 * | Method | Path                  | Key | Answer                          |
 * |--------|-----------------------|-----|---------------------------------|
 * | POST   | /api/v1/token/sell    | yes | receipt (5 logs); 202 when held |
 * | POST   | /api/v1/token/buy     | yes | receipt (3 logs)                |
 * | POST   | /api/v1/remmitance    | yes | receipt (3 logs); SPEC spelling |
 * | POST   | /api/v1/remittance    | yes | alias of the above              |
 * | POST   | /api/v1/token/quote   | yes | a quote for a trade (Quote-Id)  |
 * | GET    | /api/v1/token/price   | yes | price record                    |
 * | GET    | /api/v1/trades        | yes | a page of the caller's trades   |
 * | GET    | /api/v1/trades/summary| yes | the caller's totals             |
 * | GET    | /api/v1/trades/{id or hash} | yes | the trade as the journal has it |
 * | GET    | /api/v1/approvals     | yes | held trades the caller may approve |
 * | POST   | /api/v1/trades/{id}/approve, /reject | yes | an approver's decision |
 * | GET    | /api/v1/webhooks/deliveries | yes | the caller's webhook deliveries |
 * | POST   | /api/v1/webhooks/deliveries/{id}/retry | yes | a failed one sent again |
 * | GET    | /healthz              | no  | {"status":"ok"}                 |
 * | GET    | /readyz               | no  | {"status":"ready"} or 503       |
 *
 * Checks run in this order, the first failure answering: path (404), method (405),
 * api_key (401: the pipeline's check, in the request's context), Content-Type (415), size (413),
 * JSON syntax (400), then the use case's validation (400 naming the field) and the chain's refusals.
 */
export function jsonRoutes(options: JsonRoutesOptions): JsonRoutes {
  const limit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const table = routeTable(options.useCases, options.readiness);

  /**
   * Answers one request: at once when its answer is at hand (a cached price), else through the
   * promise returned. Every refusal is thrown, or rejects that promise, and `refuse` answers it.
   */
  const answer = (
    req: NodeServerRequest,
    res: NodeServerResponse,
    context: RequestContext,
    route: Route,
    param: string,
  ): Promise<void> | undefined => {
    const method = req.method ?? "GET";
    if (method !== route.method) throw methodNotAllowed(method, context.path, route.method);
    let key: AcceptedKey | undefined;
    if (route.authenticated) {
      const check = context.key;
      if (check?.ok !== true) {
        options.onRefusedKey?.(context);
        throw new HttpError(Code.Unauthenticated, check?.message ?? MISSING_KEY_MESSAGE);
      }
      key = check;
    }
    const now = route.jsonBody ? undefined : route.now?.();
    if (now === undefined) return answerLater(req, res, context, route, key, param, limit);
    sendAnswer(req, res, context.id, now);
    return undefined;
  };

  /** Answers one request for `route`, or refuses it. */
  const serve = (
    req: NodeServerRequest,
    res: NodeServerResponse,
    context: RequestContext,
    route: Route | undefined,
    param: string,
  ): void => {
    try {
      if (route === undefined) throw notFound(req.method ?? "GET", context.path);
      answer(req, res, context, route, param)?.catch((thrown: unknown) => refuse(req, res, context, thrown));
    } catch (thrown) {
      refuse(req, res, context, thrown);
    }
  };

  const paths = new Map<string, RouteHandler>();
  for (const [path, route] of table.routes) paths.set(path, (req, res, context) => serve(req, res, context, route, ""));
  const other: RouteHandler = (req, res, context) => {
    const found = table.paramRoute(context.path);
    serve(req, res, context, found?.route, found?.param ?? "");
  };
  return { paths, other, label: table.label };
}

/** The rest of `answer` for a route that reads a body (of at most `limit` bytes) or waits for its handler. */
async function answerLater(
  req: NodeServerRequest,
  res: NodeServerResponse,
  context: RequestContext,
  route: Route,
  key: AcceptedKey | undefined,
  param: string,
  limit: number,
): Promise<void> {
  let body: unknown;
  if (route.jsonBody === "optional") {
    // No body at all is taken as none; any other must be JSON.
    const bytes = await readBody(req, limit);
    if (bytes.length > 0) {
      if (!isJsonContentType(req.headers["content-type"])) throw unsupportedMediaType();
      body = parseJson(bytes);
    }
  } else if (route.jsonBody) {
    if (!isJsonContentType(req.headers["content-type"])) throw unsupportedMediaType();
    body = parseJson(await readBody(req, limit));
  }
  // An authenticated route has its key: `answer` refused the request otherwise.
  const answered = route.authenticated ? route.handle(req, body, key!, param) : route.handle(req, context);
  sendAnswer(req, res, context.id, await answered);
}

function sendAnswer(req: NodeServerRequest, res: NodeServerResponse, id: string, result: Answer): void {
  if ("text" in result) send(req, res, id, result.status, result.text, result.headers, result.contentType);
  else if ("json" in result) send(req, res, id, result.status, result.json);
  else send(req, res, id, result.status, JSON.stringify(result.body), result.headers);
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
