import { Code } from "@connectrpc/connect";
import type { Logger } from "pino";

import type { TradeUseCase, UseCases } from "../../core/index.js";
import type { ApiKeyCheck, ApiKeyVerifier } from "./api-key.js";
import { API_KEY_HEADER, IDEMPOTENCY_KEY_HEADER, QUOTE_ID_HEADER } from "./headers.js";
import { codeName, toConnectError } from "./error-map.js";
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
  withTimeout,
} from "./json-http.js";
import { requestContext, type RequestContext } from "./request-context.js";
import { OPENAPI_JSON } from "./openapi.js";
import { acceptsCsv, CSV_CONTENT_TYPE, tradesCsv } from "./trade-history-csv.js";
import type { NodeHandlerFn, NodeServerRequest, NodeServerResponse } from "./node-types.js";

/** Where a trade is looked up by a transaction hash: GET /api/v1/trades/{transactionHash}. */
const TRADES_PREFIX = "/api/v1/trades/";
/** POST /api/v1/webhooks/deliveries/{id}/retry. */
const DELIVERIES_PREFIX = "/api/v1/webhooks/deliveries/";
const RETRY_SUFFIX = "/retry";

/** Largest accepted JSON body by default: a trade request is under 300 bytes. */
export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024;

/** What /readyz reports. */
export interface Readiness {
  ready: boolean;
  detail: string;
}

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
  /** The api_key check the outer handler (http-handler.ts) made of a request already, if it did: not made again. */
  checkedKey?: (req: NodeServerRequest) => ApiKeyCheck | undefined;
}

/**
 * `readiness`, one check at a time, reused for `cacheMs` from when it started (failures too),
 * and failing after `timeoutMs` (default 5000). `cacheMs` 0 checks every time.
 */
export function cachedReadiness(
  readiness: () => Promise<Readiness>,
  { timeoutMs = 5_000, cacheMs }: { timeoutMs?: number; cacheMs: number },
): () => Promise<Readiness> {
  let last: { at: number; result: Promise<Readiness> } | undefined;
  return () => {
    const now = Date.now();
    if (last === undefined || now - last.at >= cacheMs) {
      last = { at: now, result: withTimeout(readiness(), timeoutMs, `readiness check took over ${timeoutMs} ms`) };
    }
    return last.result;
  };
}

/**
 * A route's answer: `body` as JSON, or `json` when the handler has the text already, or `text`
 * of another content type (the trade history's CSV), with headers of its own.
 */
type Answer =
  | { status: number; body: unknown }
  | { status: number; json: string }
  | { status: number; text: string; contentType: string; headers?: Record<string, string> };
/**
 * @param body - the parsed JSON body for a route with `jsonBody`, else undefined
 * @param scope - the caller's scope for an authenticated route, else ""
 */
type Handler = (req: NodeServerRequest, body: unknown, scope: string, param: string) => Promise<Answer>;

interface Route {
  method: "GET" | "POST";
  /** Whether the api_key header is required (every /api/v1 route; not the probes). */
  authenticated: boolean;
  /** Whether the body is a JSON document (checked for Content-Type and size, read and parsed before `handle`). */
  jsonBody: boolean;
  handle: Handler;
  /** The answer when it is at hand without waiting (a cached price), else undefined: `handle` then runs. */
  now?: () => Answer | undefined;
}

/**
 * The JSON routes of docs/SPEC.md plus the probes: http-handler.ts sends here every path that
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
  const { useCases, verifier, readiness, log } = options;
  const limit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const checkReadiness = cachedReadiness(readiness, {
    timeoutMs: options.readinessTimeoutMs ?? 5_000,
    cacheMs: options.readinessCacheMs ?? 1_000,
  });

  /** The port serves one record object for as long as it caches it: written out once. */
  let lastPrice: { record: unknown; answer: Answer } | undefined;
  const priceAnswer = (record: unknown): Answer => {
    if (lastPrice === undefined || lastPrice.record !== record)
      lastPrice = { record, answer: { status: 200, json: JSON.stringify(record) } };
    return lastPrice.answer;
  };

  const trade = (run: TradeUseCase): Route => ({
    method: "POST",
    authenticated: true,
    jsonBody: true,
    handle: async (req, body, scope) => {
      const key = req.headers[IDEMPOTENCY_KEY_HEADER];
      const idempotencyKey = Array.isArray(key) ? key.join(",") : key;
      const quote = req.headers[QUOTE_ID_HEADER];
      const quoteId = Array.isArray(quote) ? quote.join(",") : quote;
      return { status: 200, body: await run(body, { scope, idempotencyKey, quoteId }) };
    },
  });

  const routes = new Map<string, Route>([
    ["/api/v1/token/sell", trade(useCases.sell)],
    ["/api/v1/token/buy", trade(useCases.buy)],
    ["/api/v1/remmitance", trade(useCases.remittance)],
    ["/api/v1/remittance", trade(useCases.remittance)],
    [
      "/api/v1/token/quote",
      {
        method: "POST",
        authenticated: true,
        jsonBody: true,
        handle: async (_req, body, scope) => ({ status: 200, body: await useCases.quote(body, { scope }) }),
      },
    ],
    [
      "/api/v1/token/price",
      {
        method: "GET",
        authenticated: true,
        jsonBody: false,
        handle: async () => priceAnswer(await useCases.price()),
        now: () => {
          const record = useCases.price.now();
          return record === undefined ? undefined : priceAnswer(record);
        },
      },
    ],
    [
      "/api/v1/trades",
      {
        method: "GET",
        authenticated: true,
        jsonBody: false,
        handle: async (req, _body, scope) => {
          const query = queryOf(req);
          const list = await useCases.trades(query, { scope });
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
      },
    ],
    [
      "/api/v1/trades/summary",
      {
        method: "GET",
        authenticated: true,
        jsonBody: false,
        handle: async (req, _body, scope) => ({
          status: 200,
          body: await useCases.tradeSummary(queryOf(req), { scope }),
        }),
      },
    ],
    [
      "/api/v1/webhooks/deliveries",
      {
        method: "GET",
        authenticated: true,
        jsonBody: false,
        handle: async (req, _body, scope) => ({
          status: 200,
          body: await useCases.webhookDeliveries(queryOf(req), { scope }),
        }),
      },
    ],
    [
      "/healthz",
      {
        method: "GET",
        authenticated: false,
        jsonBody: false,
        handle: async () => ({ status: 200, body: { status: "ok" } }),
      },
    ],
    [
      "/api/v1/openapi.json",
      {
        method: "GET",
        authenticated: false,
        jsonBody: false,
        handle: async () => ({ status: 200, json: OPENAPI_JSON }),
      },
    ],
    [
      "/readyz",
      {
        method: "GET",
        authenticated: false,
        jsonBody: false,
        handle: async (req) => {
          try {
            const result = await checkReadiness();
            if (result.ready) return { status: 200, body: { status: "ready", detail: result.detail } };
            return { status: 503, body: { code: codeName(Code.Unavailable), message: result.detail } };
          } catch (error) {
            requestContext(req, log).log.warn({ err: error }, "readiness check failed");
            return { status: 503, body: { code: codeName(Code.Unavailable), message: "readiness check failed" } };
          }
        },
      },
    ],
  ]);

  /** GET /api/v1/trades/{transactionHash}: any hash the trade broadcast; only the caller's own trades. */
  const tradeStatus: Route = {
    method: "GET",
    authenticated: true,
    jsonBody: false,
    handle: async (_req, _body, scope, hash) => ({ status: 200, body: await useCases.trade(hash, { scope }) }),
  };

  /** POST /api/v1/webhooks/deliveries/{id}/retry: a failed delivery of the caller's, sent again. */
  const retryDelivery: Route = {
    method: "POST",
    authenticated: true,
    jsonBody: false,
    handle: async (_req, _body, scope, id) => ({
      status: 200,
      body: await useCases.retryWebhookDelivery(id, { scope }),
    }),
  };

  /** The route of a path, and the path parameter of a parameterised one. */
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
    const { route, param } = routeOf(path);
    if (route === undefined) throw notFound(method, path);
    if (method !== route.method) throw methodNotAllowed(method, path, route.method);
    let scope = "";
    if (route.authenticated) {
      const raw = req.headers[API_KEY_HEADER];
      const result = options.checkedKey?.(req) ?? verifier.check(Array.isArray(raw) ? raw.join(",") : raw);
      if (!result.ok) {
        options.onRefusedKey?.(req);
        throw new HttpError(Code.Unauthenticated, result.message);
      }
      scope = result.scope;
    }
    const now = route.jsonBody ? undefined : route.now?.();
    if (now === undefined) return answerLater(req, res, id, route, scope, param);
    sendAnswer(req, res, id, now);
    return undefined;
  };

  /** The rest of `answer` for a route that reads a body or waits for its handler. */
  const answerLater = async (
    req: NodeServerRequest,
    res: NodeServerResponse,
    id: string,
    route: Route,
    scope: string,
    param: string,
  ): Promise<void> => {
    let body: unknown;
    if (route.jsonBody) {
      if (!isJsonContentType(req.headers["content-type"])) throw unsupportedMediaType();
      body = parseJson(await readBody(req, limit));
    }
    sendAnswer(req, res, id, await route.handle(req, body, scope, param));
  };

  const sendAnswer = (req: NodeServerRequest, res: NodeServerResponse, id: string, result: Answer): void => {
    if ("text" in result) send(req, res, id, result.status, result.text, result.headers, result.contentType);
    else send(req, res, id, result.status, "json" in result ? result.json : JSON.stringify(result.body));
  };

  const refuse = (req: NodeServerRequest, res: NodeServerResponse, context: RequestContext, thrown: unknown): void => {
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
    send(req, res, id, status, JSON.stringify({ code: codeName(error.code), message: error.rawMessage }));
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
  /** A path's route as metrics label it: the route's own path ("{transactionHash}" for the trade's), or "other". */
  const labels = new Map([...routes.keys()].map((path) => [path, path]));
  const label = (path: string): string => {
    // The route's own string rather than the request's copy of it: the same object every time.
    const own = labels.get(path);
    if (own !== undefined) return own;
    const { route } = routeOf(path);
    if (route === retryDelivery) return `${DELIVERIES_PREFIX}{id}${RETRY_SUFFIX}`;
    return route !== undefined ? `${TRADES_PREFIX}{transactionHash}` : "other";
  };
  return Object.assign(handler, { routeOf: label });
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
