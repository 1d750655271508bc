/**
 * Decision 0007 (docs/decisions/0007-lean-grpc-unary-path.md): the server's CPU per unary gRPC
 * call, the lean path (`grpcUnary`) against connect-node (the service's Connect adapter,
 * `rpcAdapter` with `tokenRoutes`, as http/routes.ts builds both), for `GetPrice`
 * (a cached price) and `Sell` (a receipt of five logs), the two the record measured. Remove the
 * lean path when connect-node costs at most 1.1 times it for both.
 *
 * Two h2c servers on 127.0.0.1, one with the lean path and one without (`grpcFastPath: false`),
 * over the real use cases and fake ports (the price port holds a fresh record; the trade port
 * answers a receipt at once). Before its protocol's handler each call takes the steps of the
 * service's handler that run on both (http/http-handler.ts): the request context, the api_key
 * check, the router's lookup of the path, the x-request-id header, and for Connect the
 * grpc-message wrapper. The client is
 * `node:http2` in a worker thread, one session per server, 50 calls in flight as in the record's
 * harness, so the clock, the main thread's CPU time, counts the server alone (on Node 22, which
 * lacks threadCpuUsage, the process's, the client's too: ratios then read nearer 1). It moves in
 * steps of a few ms on some virtual machines, so each sample is 500 calls. The cases are async
 * functions, which tinybench does not call once beforehand to find out (a batch of its own).
 * `npm run bench:micro -- grpc-unary`.
 */
import { createServer, type Http2Server } from "node:http2";
import type { AddressInfo } from "node:net";
import { Worker } from "node:worker_threads";

import { create, toBinary } from "@bufbuild/protobuf";

import {
  createUseCases,
  web3LogId,
  type EventLog,
  type PriceRecord,
  type StableCoin,
  type TradeConfig,
  type TradePort,
  type TransactionReceipt,
} from "../../../core/index.js";
import { TradeRequestSchema } from "../../../gen/tokentrade/v1/token_pb.js";
import { createLogger } from "../../shared/logger.js";
import { compare, formatNs } from "../../shared/micro-bench.js";
import { API_KEY_HEADER, bindRequestContext, createApiKeyVerifier, type NodeHandlerFn } from "../request/index.js";
import { errorInterceptor } from "./error.interceptor.js";
import { minimalGrpcMessageEncoding } from "./grpc-message.js";
import { grpcUnary, type GrpcUnaryHandler } from "./grpc-unary.js";
import { rpcAdapter } from "./rpc-adapter.js";
import { tokenRoutes } from "./rpc-routes.js";
import { tokenCalls } from "./token.service.js";

/** Calls per sample; the record's harness kept 50 in flight. */
const CALLS = 500;
const IN_FLIGHT = 50;
const KEY = "bench-key-0123456789abcdef";
const READ_MAX_BYTES = 16 * 1024;

const USDT: StableCoin = { symbol: "USDT", address: "0xdAC17F958D2ee523a2206206994597C13D831ec7", decimals: 6 };
const WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
const CONFIG: TradeConfig = { stableCoins: [USDT], limits: { maxSellTokens: 10n ** 21n, maxUsd: "10000" } };
const PRICE: PriceRecord = {
  cryptoCurrency: "TTK",
  rateForCashCurrency: { CHF: 1.116071, EUR: 1.157407, USD: 1.25 },
  rateWithDiscountForCashCurrency: {},
};

/** A sell's receipt as the chain adapter gives it: five logs (test/adapters/transport/helpers.ts's fakeReceipt). */
function receipt(): TransactionReceipt {
  const blockHash = `0x${"a".repeat(64)}`;
  const transactionHash = `0x${"b".repeat(64)}`;
  const events: Record<string, EventLog> = {};
  for (let i = 0; i < 5; i++) {
    events[String(i)] = {
      address: i % 2 === 0 ? USDT.address : "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      blockHash,
      blockNumber: 101,
      logIndex: i,
      removed: false,
      transactionHash,
      transactionIndex: 0,
      id: web3LogId(blockHash, transactionHash, i),
      returnValues: {},
      signature: null,
      raw: {
        data: `0x${i.toString(16).padStart(64, "0")}`,
        topics: [`0x${"dd".repeat(32)}`, `0x${"00".repeat(12)}${WALLET.slice(2).toLowerCase()}`],
      },
    };
  }
  return {
    blockHash,
    blockNumber: 101,
    contractAddress: null,
    cumulativeGasUsed: 123_456,
    effectiveGasPrice: 1_875_000_000,
    from: WALLET.toLowerCase(),
    gasUsed: 98_765,
    logsBloom: `0x${"00".repeat(256)}`,
    status: true,
    to: "0x000000000000000000000000000000000000c0de",
    transactionHash,
    transactionIndex: 0,
    type: "0x2",
    events,
  };
}
const RECEIPT = receipt();
const sold = async () => RECEIPT;
/** A trade port whose every trade is mined at once: the same receipt (the use case runs its steps over it). */
const SIGNED = {
  wallet: "0x00",
  nonce: 0,
  txHash: RECEIPT.transactionHash,
  rawTx: "0x02",
  maxFeePerGas: 2n,
  maxPriorityFeePerGas: 1n,
  deadline: 0,
};
const TRADES: TradePort = {
  prove: async (order) => ({ order, output: 0n }),
  reserve: async (proven) => ({ proven }),
  sign: async () => ({ tx: SIGNED }),
  send: async () => ({ tx: SIGNED, submitted: false }),
  abandon: () => {},
  settle: sold,
  release: () => {},
  resolve: async () => ({ state: "dropped" }),
  blockTimeMs: () => undefined,
};
const useCases = createUseCases({
  trade: TRADES,
  price: { getPrice: async () => PRICE, current: () => PRICE },
  config: CONFIG,
});

const log = createLogger({ level: "silent" });
const verifier = createApiKeyVerifier([KEY]);
const calls = tokenCalls(useCases);
const connect = rpcAdapter({
  routes: tokenRoutes(useCases, calls),
  interceptors: [errorInterceptor(log)],
  readMaxBytes: READ_MAX_BYTES,
  jsonOptions: { ignoreUnknownFields: false },
  compressMinBytes: Number.MAX_SAFE_INTEGER,
});
const lean = grpcUnary({
  calls,
  readMaxBytes: READ_MAX_BYTES,
  connect: (req, res, context, body) => {
    minimalGrpcMessageEncoding(req, res);
    connect.get(context.path)?.(req, res, context, body);
  },
});

/** What the service's handler does with a TokenService call, with the lean path or without it. */
const handler =
  (path: GrpcUnaryHandler | undefined): NodeHandlerFn =>
  (req, res) => {
    const context = bindRequestContext(req, log);
    context.key = verifier.check(req.headers[API_KEY_HEADER] as string | undefined, context);
    const procedure = connect.get(context.path)!;
    res.setHeader("x-request-id", context.id);
    if (path?.(req, res, context)) return;
    minimalGrpcMessageEncoding(req, res);
    procedure(req, res, context);
  };

const listen = (server: Http2Server) =>
  new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)),
  );
const servers = { lean: createServer(handler(lean)), connect: createServer(handler(undefined)) };
const ports = { lean: await listen(servers.lean), connect: await listen(servers.connect) };

/** A gRPC message's frame: no compression, its length, its bytes. */
const frame = (bytes: Uint8Array) => Buffer.concat([Buffer.from([0, 0, 0, 0, bytes.length]), bytes]);
const BODIES = {
  GetPrice: frame(new Uint8Array()),
  Sell: frame(
    toBinary(
      TradeRequestSchema,
      create(TradeRequestSchema, {
        userAddress: WALLET,
        destinatary: "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        amount: "1.5",
        usdAddress: USDT.address,
      }),
    ),
  ),
};
type Method = keyof typeof BODIES;

/**
 * The client (CommonJS, for an eval'd worker): on each message, `calls` calls of `method` to
 * `port`, `inFlight` at a time on one session per server; every answer must be grpc-status 0.
 */
const CLIENT = `
const http2 = require("node:http2");
const { parentPort, workerData } = require("node:worker_threads");
const { bodies, key, inFlight } = workerData;
const sessions = new Map();
const session = (port) => {
  if (!sessions.has(port)) sessions.set(port, http2.connect("http://127.0.0.1:" + port));
  return sessions.get(port);
};
const call = (s, method) => new Promise((resolve, reject) => {
  const stream = s.request({
    ":method": "POST", ":path": "/tokentrade.v1.TokenService/" + method,
    "content-type": "application/grpc", te: "trailers", api_key: key,
  });
  let status;
  stream.on("response", (headers) => { status = headers["grpc-status"]; });
  stream.on("trailers", (trailers) => { status = trailers["grpc-status"]; });
  stream.on("data", () => {});
  stream.on("end", () => (status === "0" ? resolve() : reject(new Error(method + ": grpc-status " + status))));
  stream.on("error", reject);
  stream.end(bodies[method]);
});
parentPort.on("message", async ({ port, method, calls }) => {
  let started = 0;
  const lane = async (s) => { while (started < calls) { started++; await call(s, method); } };
  try {
    const s = session(port);
    await Promise.all(Array.from({ length: inFlight }, () => lane(s)));
    parentPort.postMessage({});
  } catch (error) {
    parentPort.postMessage({ error: String(error && error.stack || error) });
  }
});
`;
const client = new Worker(CLIENT, { eval: true, workerData: { bodies: BODIES, key: KEY, inFlight: IN_FLIGHT } });
let pending: { resolve: () => void; reject: (error: Error) => void } | undefined;
client.on("message", ({ error }: { error?: string }) => {
  const waiting = pending;
  pending = undefined;
  if (error === undefined) waiting?.resolve();
  else waiting?.reject(new Error(error));
});
/** CALLS calls of `method` to `server`, made by the client; resolves when every one is answered. */
const batch = (server: keyof typeof ports, method: Method) =>
  new Promise<void>((resolve, reject) => {
    pending = { resolve, reject };
    client.postMessage({ port: ports[server], method, calls: CALLS });
  });

const perCall = (ns: number) => formatNs(ns / CALLS);

try {
  await compare({
    record: "0007",
    subject: "adapters/transport/rpc/grpc-unary.ts",
    clock: "cpu",
    cases: {
      connectPrice: { label: "Connect GetPrice", run: async () => batch("connect", "GetPrice") },
      leanPrice: { label: "lean GetPrice", run: async () => batch("lean", "GetPrice") },
      connectSell: { label: "Connect Sell", run: async () => batch("connect", "Sell") },
      leanSell: { label: "lean Sell", run: async () => batch("lean", "Sell") },
    },
    verdict: ({ connectPrice, leanPrice, connectSell, leanSell }) => {
      const price = connectPrice / leanPrice;
      const sell = connectSell / leanSell;
      return {
        figure: `connect-node ÷ ours = ${price.toFixed(2)} GetPrice, ${sell.toFixed(2)} Sell`,
        threshold: "remove at ≤ 1.10 for both",
        remove: price <= 1.1 && sell <= 1.1,
        detail:
          `a call: GetPrice Connect ${perCall(connectPrice)}, lean ${perCall(leanPrice)}; ` +
          `Sell Connect ${perCall(connectSell)}, lean ${perCall(leanSell)} (server CPU)`,
      };
    },
  });
} finally {
  await client.terminate();
  await Promise.all(Object.values(servers).map((server) => new Promise((resolve) => server.close(resolve))));
}
