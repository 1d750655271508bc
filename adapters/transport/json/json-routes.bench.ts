/**
 * Decision 0005 (docs/decisions/0005-json-routes-outside-connect.md): the CPU of one cached price
 * answer, `GET /api/v1/token/price` through the JSON routes (`jsonRoutes`), against the same price
 * through connect-node's router: `POST /tokentrade.v1.TokenService/GetPrice` in Connect's JSON
 * protocol, served by the service's Connect adapter (`rpcAdapter` with `tokenRoutes`, built as
 * http/routes.ts builds it). connect-es cannot serve the SPEC's path and bodies (no
 * `google.api.http` transcoding), so its own path and proto3 JSON stand in for them: the record's
 * threshold is that such an answer costs within 10 % of this route's.
 *
 * Each is a real `node:http` server (Node's HTTP/1.1 parser and `ServerResponse`) fed through an
 * in-memory stream pair (`duplexPair`), one keep-alive connection each, requests one after the
 * other: no socket, no kernel. Nothing waits, so the clock on the wall is this thread's CPU (its
 * CPU clock moves in steps of a few ms on some virtual machines); the client's part, writing a
 * request and finding the end of its answer, is small and the same for both. Before its
 * protocol's handler, each request takes the steps of the service's handler that run on both
 * paths (http/http-handler.ts): the request context, the api_key check, the router's lookup of the
 * path, and for the RPC the x-request-id header and the grpc-message wrapper (a no-op for JSON). CORS, the limits and the
 * access line are left out (off, or the same for both, as in the record's silent figures), and so
 * is the kernel: the ratio here is above the service's, where those costs are shared, so one near
 * 1.10 should be checked in docs/benchmarks.md's harness. `npm run bench:micro -- json-routes`.
 */
import { createServer, type RequestListener } from "node:http";
import { duplexPair } from "node:stream";

import { createUseCases, type PriceRecord, type TradeConfig, type TradePort } from "../../../core/index.js";
import { createLogger } from "../../shared/logger.js";
import { compare, formatNs, ratioAtMost } from "../../shared/micro-bench.js";
import {
  API_KEY_HEADER,
  bindRequestContext,
  createApiKeyVerifier,
  type NodeHandlerFn,
  type NodeServerRequest,
  type RequestContext,
} from "../request/index.js";
import { errorInterceptor, minimalGrpcMessageEncoding, rpcAdapter, tokenRoutes } from "../rpc/index.js";
import { DEFAULT_BODY_LIMIT_BYTES, jsonRoutes } from "./json-routes.js";

/**
 * Requests per sample, one after the other. The cases are async functions, which tinybench does
 * not call once beforehand to find out (requests of its own on the same connection).
 */
const REQUESTS = 20;
const KEY = "bench-key-0123456789abcdef";

const PRICE: PriceRecord = {
  cryptoCurrency: "TTK",
  rateForCashCurrency: { CHF: 1.116071, EUR: 1.157407, USD: 1.25 },
  rateWithDiscountForCashCurrency: {},
};
const CONFIG: TradeConfig = {
  stableCoins: [{ symbol: "DAI", address: "0x6B175474E89094C44Da98b954EedeAC495271d0F", decimals: 18 }],
  limits: { maxSellTokens: 10n ** 21n, maxUsd: "10000" },
};
const noTrades = () => Promise.reject(new Error("the bench trades nothing"));
const TRADES: TradePort = {
  prove: noTrades,
  reserve: noTrades,
  sign: noTrades,
  send: noTrades,
  abandon: () => {},
  settle: noTrades,
  release: () => {},
  resolve: noTrades,
  blockTimeMs: () => undefined,
};
/** The real use cases over a price port that holds a fresh record, as the cache does between refreshes. */
const useCases = createUseCases({
  trade: TRADES,
  price: { getPrice: async () => PRICE, current: () => PRICE },
  config: CONFIG,
});
const log = createLogger({ level: "silent" });
const verifier = createApiKeyVerifier([KEY]);
/** The api_key step's check, into the request's context as the service's pipeline makes it (http/steps/api-key.ts). */
const checkKey = (req: NodeServerRequest, context: RequestContext) => {
  context.key = verifier.check(req.headers[API_KEY_HEADER] as string | undefined, context);
};

const json = jsonRoutes({ useCases, readiness: async () => ({ ready: true, detail: "bench" }) });
const connect = rpcAdapter({
  routes: tokenRoutes(useCases),
  interceptors: [errorInterceptor(log)],
  readMaxBytes: DEFAULT_BODY_LIMIT_BYTES,
  jsonOptions: { ignoreUnknownFields: false },
  compressMinBytes: Number.MAX_SAFE_INTEGER,
});

/** The JSON route, after the steps both paths take (the context, the key, the router's lookup). */
const viaJson: NodeHandlerFn = (req, res) => {
  const context = bindRequestContext(req, log);
  checkKey(req, context);
  (json.paths.get(context.path) ?? json.other)(req, res, context);
};
/** Connect, after the same steps and what the router's procedure route does for an RPC. */
const viaConnect: NodeHandlerFn = (req, res) => {
  const context = bindRequestContext(req, log);
  checkKey(req, context);
  const procedure = connect.get(context.path)!;
  res.setHeader("x-request-id", context.id);
  minimalGrpcMessageEncoding(req, res);
  procedure(req, res, context);
};

/** A keep-alive connection to a node:http server running `handler`, over an in-memory stream pair. */
function connection(handler: NodeHandlerFn) {
  const [serverSide, clientSide] = duplexPair();
  createServer(handler as RequestListener).emit("connection", serverSide);
  let received: Buffer = Buffer.alloc(0);
  /** Who waits for each answer, in the order of the requests. */
  const waiting: Array<(response: string) => void> = [];
  clientSide.on("data", (chunk: Buffer) => {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
    // Both answers carry a content-length: the answer is whole once its body is in.
    const head = received.indexOf("\r\n\r\n");
    const length = head === -1 ? null : /\r\ncontent-length: *(\d+)/i.exec(received.toString("latin1", 0, head));
    if (length === null || received.length < head + 4 + Number(length[1])) return;
    const response = received.toString("utf8");
    received = Buffer.alloc(0);
    waiting.shift()?.(response);
  });
  return (request: Buffer) =>
    new Promise<string>((resolve) => {
      waiting.push(resolve);
      clientSide.write(request);
    });
}

const ask = (lines: string[], body = "") =>
  Buffer.from(`${lines.join("\r\n")}\r\ncontent-length: ${body.length}\r\n\r\n${body}`, "latin1");
const JSON_PRICE = ask(["GET /api/v1/token/price HTTP/1.1", "host: bench", `${API_KEY_HEADER}: ${KEY}`]);
const CONNECT_PRICE = ask(
  [
    "POST /tokentrade.v1.TokenService/GetPrice HTTP/1.1",
    "host: bench",
    `${API_KEY_HEADER}: ${KEY}`,
    "content-type: application/json",
    "connect-protocol-version: 1",
  ],
  "{}",
);

const sendJson = connection(viaJson);
const sendConnect = connection(viaConnect);

/** Both answer 200 with the price: the bench compares two ways of giving the same data. */
async function check(send: (request: Buffer) => Promise<string>, request: Buffer, name: string): Promise<void> {
  const response = await send(request);
  const body = JSON.parse(response.slice(response.indexOf("\r\n\r\n") + 4)) as Partial<PriceRecord>;
  const same = JSON.stringify(body.rateForCashCurrency) === JSON.stringify(PRICE.rateForCashCurrency);
  if (!response.startsWith("HTTP/1.1 200 ") || body.cryptoCurrency !== PRICE.cryptoCurrency || !same)
    throw new Error(`${name} did not answer the price: ${response}`);
}
await check(sendJson, JSON_PRICE, "the JSON route");
await check(sendConnect, CONNECT_PRICE, "Connect");

const requests = async (send: (request: Buffer) => Promise<string>, request: Buffer) => {
  for (let i = 0; i < REQUESTS; i++) await send(request);
};

await compare({
  record: "0005",
  subject: "adapters/transport/json/json-routes.ts",
  rounds: 5,
  cases: {
    connect: { label: "Connect JSON GetPrice", run: async () => requests(sendConnect, CONNECT_PRICE) },
    ours: { label: "GET /api/v1/token/price", run: async () => requests(sendJson, JSON_PRICE) },
  },
  verdict: ({ connect: theirs, ours }) => ({
    ...ratioAtMost("Connect", theirs, ours, 1.1),
    detail: `a price answer: Connect ${formatNs(theirs / REQUESTS)}, ours ${formatNs(ours / REQUESTS)}`,
  }),
});
