/**
 * The JSON routes' table: each route of docs/SPEC.md, and the probes, as a method, whether it
 * takes a key and a JSON body, and what it does with the use cases; the routes by path, the
 * route of a parameterised path (three are), and the label the request metrics give a path.
 * json-routes.ts answers with it.
 */
import { Code } from "@connectrpc/connect";

import {
  type CancelTradeUseCase,
  type DecideTradeUseCase,
  TradeHeldError,
  type TradeUseCase,
  type UseCases,
} from "../../../core/index.js";
import { OPENAPI_JSON } from "../docs/index.js";
import {
  IDEMPOTENCY_KEY_HEADER,
  QUOTE_ID_HEADER,
  type AcceptedKey,
  callerOf,
  type NodeServerRequest,
  type RequestContext,
} from "../request/index.js";
import { codeName } from "../rpc/index.js";
import { HttpError } from "./json-http.js";
import type { Readiness } from "./readiness.js";
import { acceptsCsv, CSV_CONTENT_TYPE, tradesCsv } from "./trade-history-csv.js";
import { auditRoute } from "./audit-route.js";

/** Where a trade is looked up by its id or a transaction hash: GET /api/v1/trades/{transactionHash}. */
const TRADES_PREFIX = "/api/v1/trades/";
/** POST /api/v1/trades/{id}/approve and /reject: an approver's decision on a held trade. */
const DECISIONS = ["/approve", "/reject"] as const;
/** POST /api/v1/trades/{id}/cancel and /speed-up: the sender's (or an admin's) replacement of a trade's transaction. */
const REPLACEMENTS = ["/cancel", "/speed-up"] as const;
/** POST /api/v1/webhooks/deliveries/{id}/retry. */
const DELIVERIES_PREFIX = "/api/v1/webhooks/deliveries/";
const RETRY_SUFFIX = "/retry";
/** POST /api/v1/wallets/{address}/resume. */
const WALLETS_PREFIX = "/api/v1/wallets/";
const RESUME_SUFFIX = "/resume";

/**
 * A route's answer: `body` as JSON, or `json` when the handler has the text already, or `text`
 * of another content type (the trade history's CSV), with headers of its own.
 */
export type Answer =
  | { status: number; body: unknown; headers?: Record<string, string> }
  | { status: number; json: string }
  | { status: number; text: string; contentType: string; headers?: Record<string, string> };
/**
 * A route that takes a key (every /api/v1 route): its handler is given the key the pipeline
 * accepted, the verifier's answer as it is.
 * @param body - the parsed JSON body for a route with `jsonBody`, else undefined
 * @param param - the path parameter of a parameterised route, else ""
 */
interface AuthenticatedRoute {
  authenticated: true;
  handle(req: NodeServerRequest, body: unknown, key: AcceptedKey, param: string): Promise<Answer>;
}

/** A route without a key (the probes, the OpenAPI document): its handler is given the request's context. */
interface OpenRoute {
  authenticated: false;
  handle(req: NodeServerRequest, context: RequestContext): Promise<Answer>;
}

export type Route = (AuthenticatedRoute | OpenRoute) & {
  method: "GET" | "POST";
  /**
   * Whether the body is a JSON document (checked for Content-Type and size, read and parsed before
   * `handle`); "optional": none at all is taken too (the handler is given undefined).
   */
  jsonBody: boolean | "optional";
  /** The answer when it is at hand without waiting (a cached price), else undefined: `handle` then runs. */
  now?: () => Answer | undefined;
};

/** The routes, and how a path finds its own. */
export interface RouteTable {
  /** The routes of fixed paths, by path. */
  routes: ReadonlyMap<string, Route>;
  /** The route of a path none of `routes` has, and its path parameter: a parameterised route's, or undefined. */
  paramRoute(path: string): { route: Route; param: string } | undefined;
  /** A path's route as metrics label it: the route's own path ("{transactionHash}" for the trade's), or "other". */
  label(path: string): string;
}

/** The table over `useCases`; `checkReadiness` backs /readyz. */
export function routeTable(useCases: UseCases, checkReadiness: () => Promise<Readiness>): RouteTable {
  const routes = new Map<string, Route>([
    ["/api/v1/token/sell", tradeRoute(useCases.sell)],
    ["/api/v1/token/buy", tradeRoute(useCases.buy)],
    ["/api/v1/remmitance", tradeRoute(useCases.remittance)],
    ["/api/v1/remittance", tradeRoute(useCases.remittance)],
    ["/api/v1/token/quote", quoteRoute(useCases)],
    ["/api/v1/token/price", priceRoute(useCases)],
    ["/api/v1/trades", tradesRoute(useCases)],
    ["/api/v1/trades/summary", authenticatedGet((req, caller) => useCases.tradeSummary(queryOf(req), caller))],
    [
      "/api/v1/webhooks/deliveries",
      authenticatedGet((req, caller) => useCases.webhookDeliveries(queryOf(req), caller)),
    ],
    ["/api/v1/audit", auditRoute(useCases, queryOf)],
    ["/api/v1/approvals", authenticatedGet((req, caller) => useCases.approvals(queryOf(req), caller))],
    ["/healthz", openGet(async () => ({ status: 200, body: { status: "ok" } }))],
    ["/api/v1/openapi.json", openGet(async () => ({ status: 200, json: OPENAPI_JSON }))],
    ["/readyz", openGet((_req, context) => readyAnswer(context, checkReadiness))],
  ]);
  /** GET /api/v1/trades/{transactionHash}: any hash the trade broadcast; only the caller's own trades. */
  const tradeStatus = authenticatedGet((_req, caller, hash) => useCases.trade(hash, caller));
  /** POST /api/v1/webhooks/deliveries/{id}/retry: a failed delivery of the caller's, sent again. */
  const retryDelivery: Route = {
    method: "POST",
    authenticated: true,
    jsonBody: false,
    handle: async (_req, _body, key, id) => ({
      status: 200,
      body: await useCases.retryWebhookDelivery(id, callerOf(key)),
    }),
  };

  /** POST /api/v1/wallets/{address}/resume: a paused exchange wallet trades again, for an admin. */
  const resumeWallet: Route = {
    method: "POST",
    authenticated: true,
    jsonBody: false,
    handle: async (_req, _body, key, address) => ({
      status: 200,
      body: await useCases.resumeWallet(address, callerOf(key)),
    }),
  };

  const actions = tradeActions(useCases);
  const paramRoute = (path: string): { route: Route; param: string } | undefined => {
    for (const [suffix, route] of actions)
      if (path.startsWith(TRADES_PREFIX) && path.endsWith(suffix) && path.length > TRADES_PREFIX.length + suffix.length)
        return { route, param: path.slice(TRADES_PREFIX.length, -suffix.length) };
    if (
      path.startsWith(WALLETS_PREFIX) &&
      path.endsWith(RESUME_SUFFIX) &&
      path.length > WALLETS_PREFIX.length + RESUME_SUFFIX.length
    )
      return { route: resumeWallet, param: path.slice(WALLETS_PREFIX.length, -RESUME_SUFFIX.length) };
    if (
      path.startsWith(DELIVERIES_PREFIX) &&
      path.endsWith(RETRY_SUFFIX) &&
      path.length > DELIVERIES_PREFIX.length + RETRY_SUFFIX.length
    )
      return { route: retryDelivery, param: path.slice(DELIVERIES_PREFIX.length, -RETRY_SUFFIX.length) };
    if (path.startsWith(TRADES_PREFIX) && path.length > TRADES_PREFIX.length)
      return { route: tradeStatus, param: path.slice(TRADES_PREFIX.length) };
    return undefined;
  };
  const labels = new Map([...routes.keys()].map((path) => [path, path]));
  const label = (path: string): string => {
    // The route's own string rather than the request's copy of it: the same object every time.
    const own = labels.get(path);
    if (own !== undefined) return own;
    const route = paramRoute(path)?.route;
    if (route === retryDelivery) return `${DELIVERIES_PREFIX}{id}${RETRY_SUFFIX}`;
    for (const [suffix, action] of actions) if (route === action) return `${TRADES_PREFIX}{id}${suffix}`;
    if (route === resumeWallet) return `${WALLETS_PREFIX}{address}${RESUME_SUFFIX}`;
    return route !== undefined ? `${TRADES_PREFIX}{transactionHash}` : "other";
  };
  return { routes, paramRoute, label };
}

/** The routes of POST /api/v1/trades/{id}/<action>, by their suffix: the decisions, the cancel and the speed-up. */
function tradeActions(useCases: UseCases): ReadonlyMap<string, Route> {
  return new Map([
    ...DECISIONS.map(
      (suffix) =>
        [suffix, decisionRoute(suffix === "/approve" ? useCases.approveTrade : useCases.rejectTrade)] as const,
    ),
    ...REPLACEMENTS.map(
      (suffix) =>
        [suffix, replacementRoute(suffix === "/cancel" ? useCases.cancelTrade : useCases.speedUpTrade)] as const,
    ),
  ]);
}

/** POST of a trade (sell, buy, remittance): the body, with the Idempotency-Key and the Quote-Id headers. */
function tradeRoute(run: TradeUseCase): Route {
  return {
    method: "POST",
    authenticated: true,
    jsonBody: true,
    handle: async (req, body, key) => {
      const idempotency = req.headers[IDEMPOTENCY_KEY_HEADER];
      const idempotencyKey = Array.isArray(idempotency) ? idempotency.join(",") : idempotency;
      const quote = req.headers[QUOTE_ID_HEADER];
      const quoteId = Array.isArray(quote) ? quote.join(",") : quote;
      try {
        return { status: 200, body: await run(body, { ...callerOf(key), idempotencyKey, quoteId }) };
      } catch (error) {
        // Held for an approval: 202 with the trade as its GET shows it, and where that is.
        if (!(error instanceof TradeHeldError)) throw error;
        return { status: 202, body: error.trade, headers: { location: `${TRADES_PREFIX}${error.tradeId}` } };
      }
    },
  };
}

/** POST /api/v1/trades/{id}/approve | reject, with an optional {"reason"}: the trade as it is after the decision. */
function decisionRoute(decide: DecideTradeUseCase): Route {
  return {
    method: "POST",
    authenticated: true,
    jsonBody: "optional",
    handle: async (_req, body, key, id) => ({ status: 200, body: await decide(id, body, callerOf(key)) }),
  };
}

/**
 * POST /api/v1/trades/{id}/cancel | speed-up, with an optional body (none, {}, or a speed-up's
 * {"maxFeePerGasGwei"}): 202, the trade as GET shows it, at once; its outcome follows on the chain.
 */
function replacementRoute(replace: CancelTradeUseCase): Route {
  return {
    method: "POST",
    authenticated: true,
    jsonBody: "optional",
    handle: async (_req, body, key, id) => ({
      status: 202,
      body: await replace(id, body, callerOf(key)),
      headers: { location: `${TRADES_PREFIX}${id.toLowerCase()}` },
    }),
  };
}

/** POST /api/v1/token/quote. */
function quoteRoute(useCases: UseCases): Route {
  return {
    method: "POST",
    authenticated: true,
    jsonBody: true,
    handle: async (_req, body, key) => ({ status: 200, body: await useCases.quote(body, callerOf(key)) }),
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
    handle: async (req, _body, key) => {
      const query = queryOf(req);
      const list = await useCases.trades(query, callerOf(key));
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

/** A GET that takes a key and answers 200 with what `read` gives, for the caller's scope. */
function authenticatedGet(
  read: (req: NodeServerRequest, caller: ReturnType<typeof callerOf>, param: string) => Promise<unknown>,
): Route {
  return {
    method: "GET",
    authenticated: true,
    jsonBody: false,
    handle: async (req, _body, key, param) => ({ status: 200, body: await read(req, callerOf(key), param) }),
  };
}

/** A GET without a key (the probes, the OpenAPI document). */
function openGet(handle: OpenRoute["handle"]): Route {
  return { method: "GET", authenticated: false, jsonBody: false, handle };
}

/** /readyz: 200 while ready, else 503 with the reason; a check that fails is logged and answered 503. */
async function readyAnswer(context: RequestContext, checkReadiness: () => Promise<Readiness>): Promise<Answer> {
  try {
    const result = await checkReadiness();
    if (result.ready) return { status: 200, body: { status: "ready", detail: result.detail } };
    return { status: 503, body: { code: codeName(Code.Unavailable), message: result.detail } };
  } catch (error) {
    context.log.warn({ err: error }, "readiness check failed");
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
