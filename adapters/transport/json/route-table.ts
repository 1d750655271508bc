/**
 * The JSON routes' table: each route of docs/SPEC.md, and the probes, as a method, whether it
 * takes a key and a JSON body, and what it does with the use cases; the route of a path (two are
 * parameterised), and the label the request metrics give it. json-routes.ts answers with it.
 */
import { Code } from "@connectrpc/connect";
import type { Logger } from "pino";

import type { Caller, TradeUseCase, UseCases } from "../../../core/index.js";
import { OPENAPI_JSON } from "../docs/index.js";
import { IDEMPOTENCY_KEY_HEADER, QUOTE_ID_HEADER, requestContext, type NodeServerRequest } from "../request/index.js";
import { codeName } from "../rpc/index.js";
import { HttpError } from "./json-http.js";
import type { Readiness } from "./readiness.js";
import { acceptsCsv, CSV_CONTENT_TYPE, tradesCsv } from "./trade-history-csv.js";
import { auditRoute } from "./audit-route.js";

/** Where a trade is looked up by a transaction hash: GET /api/v1/trades/{transactionHash}. */
const TRADES_PREFIX = "/api/v1/trades/";
/** POST /api/v1/webhooks/deliveries/{id}/retry. */
const DELIVERIES_PREFIX = "/api/v1/webhooks/deliveries/";
const RETRY_SUFFIX = "/retry";

/**
 * A route's answer: `body` as JSON, or `json` when the handler has the text already, or `text`
 * of another content type (the trade history's CSV), with headers of its own.
 */
export type Answer =
  | { status: number; body: unknown }
  | { status: number; json: string }
  | { status: number; text: string; contentType: string; headers?: Record<string, string> };
/**
 * @param body - the parsed JSON body for a route with `jsonBody`, else undefined
 * @param caller - who calls an authenticated route (its key's id, and its access-file entry), else { id: "" }
 */
type Handler = (req: NodeServerRequest, body: unknown, caller: Caller, param: string) => Promise<Answer>;

/** A use case's context for `caller`: its id scopes idempotency keys and quotes; its entry is the authorize step's subject. */
const as = (caller: Caller) => ({ scope: caller.id, caller });

export interface Route {
  method: "GET" | "POST";
  /** Whether the api_key header is required (every /api/v1 route; not the probes). */
  authenticated: boolean;
  /** Whether the body is a JSON document (checked for Content-Type and size, read and parsed before `handle`). */
  jsonBody: boolean;
  handle: Handler;
  /** The answer when it is at hand without waiting (a cached price), else undefined: `handle` then runs. */
  now?: () => Answer | undefined;
}

/** The routes, and how a path finds its own. */
export interface RouteTable {
  /** The route of a path, and the path parameter of a parameterised one. */
  routeOf(path: string): { route?: Route; param: string };
  /** A path's route as metrics label it: the route's own path ("{transactionHash}" for the trade's), or "other". */
  label(path: string): string;
}

/** The table over `useCases`; `checkReadiness` backs /readyz, `log` logs a failed readiness check. */
export function routeTable(useCases: UseCases, checkReadiness: () => Promise<Readiness>, log: Logger): RouteTable {
  const routes = new Map<string, Route>([
    ["/api/v1/token/sell", tradeRoute(useCases.sell)],
    ["/api/v1/token/buy", tradeRoute(useCases.buy)],
    ["/api/v1/remmitance", tradeRoute(useCases.remittance)],
    ["/api/v1/remittance", tradeRoute(useCases.remittance)],
    ["/api/v1/token/quote", quoteRoute(useCases)],
    ["/api/v1/token/price", priceRoute(useCases)],
    ["/api/v1/trades", tradesRoute(useCases)],
    ["/api/v1/trades/summary", authenticatedGet((req, caller) => useCases.tradeSummary(queryOf(req), as(caller)))],
    [
      "/api/v1/webhooks/deliveries",
      authenticatedGet((req, caller) => useCases.webhookDeliveries(queryOf(req), as(caller))),
    ],
    ["/api/v1/audit", auditRoute(useCases, queryOf)],
    ["/healthz", openGet(async () => ({ status: 200, body: { status: "ok" } }))],
    ["/api/v1/openapi.json", openGet(async () => ({ status: 200, json: OPENAPI_JSON }))],
    ["/readyz", openGet((req) => readyAnswer(req, checkReadiness, log))],
  ]);
  /** GET /api/v1/trades/{transactionHash}: any hash the trade broadcast; only the caller's own trades. */
  const tradeStatus = authenticatedGet((_req, caller, hash) => useCases.trade(hash, as(caller)));
  /** POST /api/v1/webhooks/deliveries/{id}/retry: a failed delivery of the caller's, sent again. */
  const retryDelivery: Route = {
    method: "POST",
    authenticated: true,
    jsonBody: false,
    handle: async (_req, _body, caller, id) => ({
      status: 200,
      body: await useCases.retryWebhookDelivery(id, as(caller)),
    }),
  };

  const routeOf = (path: string): { route?: Route; param: string } => {
    const route = routes.get(path);
    if (route !== undefined) return { route, param: "" };
    if (
      path.startsWith(DELIVERIES_PREFIX) &&
      path.endsWith(RETRY_SUFFIX) &&
      path.length > DELIVERIES_PREFIX.length + RETRY_SUFFIX.length
    )
      return { route: retryDelivery, param: path.slice(DELIVERIES_PREFIX.length, -RETRY_SUFFIX.length) };
    if (path.startsWith(TRADES_PREFIX) && path.length > TRADES_PREFIX.length)
      return { route: tradeStatus, param: path.slice(TRADES_PREFIX.length) };
    return { param: "" };
  };
  const labels = new Map([...routes.keys()].map((path) => [path, path]));
  const label = (path: string): string => {
    // The route's own string rather than the request's copy of it: the same object every time.
    const own = labels.get(path);
    if (own !== undefined) return own;
    const { route } = routeOf(path);
    if (route === retryDelivery) return `${DELIVERIES_PREFIX}{id}${RETRY_SUFFIX}`;
    return route !== undefined ? `${TRADES_PREFIX}{transactionHash}` : "other";
  };
  return { routeOf, label };
}

/** POST of a trade (sell, buy, remittance): the body, with the Idempotency-Key and the Quote-Id headers. */
function tradeRoute(run: TradeUseCase): Route {
  return {
    method: "POST",
    authenticated: true,
    jsonBody: true,
    handle: async (req, body, caller) => {
      const key = req.headers[IDEMPOTENCY_KEY_HEADER];
      const idempotencyKey = Array.isArray(key) ? key.join(",") : key;
      const quote = req.headers[QUOTE_ID_HEADER];
      const quoteId = Array.isArray(quote) ? quote.join(",") : quote;
      return { status: 200, body: await run(body, { ...as(caller), idempotencyKey, quoteId }) };
    },
  };
}

/** POST /api/v1/token/quote. */
function quoteRoute(useCases: UseCases): Route {
  return {
    method: "POST",
    authenticated: true,
    jsonBody: true,
    handle: async (_req, body, caller) => ({ status: 200, body: await useCases.quote(body, as(caller)) }),
  };
}

/** GET /api/v1/token/price, answered at once while the port has a record at hand. */
function priceRoute(useCases: UseCases): Route {
  /** The port serves one record object for as long as it caches it: written out once. */
  let lastPrice: { record: unknown; answer: Answer } | undefined;
  const priceAnswer = (record: unknown): Answer => {
    if (lastPrice === undefined || lastPrice.record !== record)
      lastPrice = { record, answer: { status: 200, json: JSON.stringify(record) } };
    return lastPrice.answer;
  };
  return {
    method: "GET",
    authenticated: true,
    jsonBody: false,
    handle: async () => priceAnswer(await useCases.price()),
    now: () => {
      const record = useCases.price.now();
      return record === undefined ? undefined : priceAnswer(record);
    },
  };
}

/** GET /api/v1/trades: a page as JSON, or as CSV (with the next page in a Link header) when Accept asks for it. */
function tradesRoute(useCases: UseCases): Route {
  return {
    method: "GET",
    authenticated: true,
    jsonBody: false,
    handle: async (req, _body, caller) => {
      const query = queryOf(req);
      const list = await useCases.trades(query, as(caller));
      if (!acceptsCsv(req.headers.accept))
        return { status: 200, body: { trades: list.trades, nextCursor: list.nextCursor } };
      const headers: Record<string, string> = {};
      // The next page as RFC 8288 has it: the same query, with the cursor.
      if (list.nextCursor !== null) {
        const next = new URLSearchParams({ ...query, cursor: list.nextCursor });
        headers.link = `</api/v1/trades?${next}>; rel="next"`;
      }
      return { status: 200, text: tradesCsv(list), contentType: CSV_CONTENT_TYPE, headers };
    },
  };
}

/** A GET that takes a key and answers 200 with what `read` gives. */
function authenticatedGet(read: (req: NodeServerRequest, caller: Caller, param: string) => Promise<unknown>): Route {
  return {
    method: "GET",
    authenticated: true,
    jsonBody: false,
    handle: async (req, _body, caller, param) => ({ status: 200, body: await read(req, caller, param) }),
  };
}

/** A GET without a key (the probes, the OpenAPI document). */
function openGet(handle: (req: NodeServerRequest) => Promise<Answer>): Route {
  return { method: "GET", authenticated: false, jsonBody: false, handle };
}

/** /readyz: 200 while ready, else 503 with the reason; a check that fails is logged and answered 503. */
async function readyAnswer(
  req: NodeServerRequest,
  checkReadiness: () => Promise<Readiness>,
  log: Logger,
): Promise<Answer> {
  try {
    const result = await checkReadiness();
    if (result.ready) return { status: 200, body: { status: "ready", detail: result.detail } };
    return { status: 503, body: { code: codeName(Code.Unavailable), message: result.detail } };
  } catch (error) {
    requestContext(req, log).log.warn({ err: error }, "readiness check failed");
    return { status: 503, body: { code: codeName(Code.Unavailable), message: "readiness check failed" } };
  }
}

/** The query string's parameters by name; one given twice is refused, naming it. */
function queryOf(req: NodeServerRequest): Record<string, string> {
  const target = req.url ?? "";
  const at = target.indexOf("?");
  const entries = [...new URLSearchParams(at === -1 ? "" : target.slice(at + 1))];
  const query = Object.fromEntries(entries);
  if (Object.keys(query).length !== entries.length) {
    const seen = new Set<string>();
    const twice = entries.find(([name]) => seen.size === seen.add(name).size)![0];
    const field = /^[\w.-]{1,64}$/.test(twice) ? twice : "query";
    throw new HttpError(
      Code.InvalidArgument,
      `${field}: ${field === twice ? "is" : "a parameter is"} given more than once`,
    );
  }
  return query;
}
