/**
 * Run by test/scripts/bench-records.test.ts as the records bench runs its service process
 * (`--import tsx --import scripts/bench-records/register.ts`): the transport records' switches
 * (0007, 0008, 0009) each off and on, and what came back. Its stdout is the service's logger's
 * (createLogger's default destination) and one JSON line of results, the one with `counted`.
 */
import * as http2 from "node:http2";

import { pino, type Logger } from "pino";
import { Registry } from "prom-client";

import { RequestMetrics } from "../../adapters/observability/request-metrics.js";
import { accessLog, createLogger } from "../../adapters/shared/logger.js";
import { tallied, useLibraryFor } from "../../adapters/shared/records.ab.js";
import { API_KEY, startTestServer } from "../adapters/transport/helpers.js";

/** 0007: GetPrice over h2c as a gRPC client sends it; the answer without its date and request id. */
async function getPrice(url: string) {
  const session = http2.connect(url);
  try {
    return await new Promise<{ headers: object; data: string; trailers: object }>((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": "/tokentrade.v1.TokenService/GetPrice",
        "content-type": "application/grpc",
        te: "trailers",
        api_key: API_KEY,
      });
      const plain = (headers: http2.IncomingHttpHeaders) =>
        Object.fromEntries(
          Object.entries(headers)
            .filter(([name]) => name !== "date" && name !== "x-request-id")
            .map(([name, value]) => [name, String(value)]),
        );
      const out = { headers: {}, data: "", trailers: {} };
      const chunks: Buffer[] = [];
      stream.on("response", (headers) => (out.headers = plain(headers)));
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("trailers", (trailers) => (out.trailers = plain(trailers)));
      stream.on("error", reject);
      stream.on("close", () => resolve({ ...out, data: Buffer.concat(chunks).toString("hex") }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
  } finally {
    session.close();
  }
}

const server = await startTestServer();
const grpc = { off: await getPrice(server.url), on: { headers: {}, data: "", trailers: {} } };
useLibraryFor(["0007"]);
grpc.on = await getPrice(server.url);
useLibraryFor([]);
await server.close();

/** 0009: the same observations each way, into one RequestMetrics and its registry. */
const OBSERVATIONS: Array<[string, string, string, number]> = [
  ["/api/v1/token/price", "http", "200", 0.0004],
  ["/api/v1/token/sell", "http", "400", 0.02],
  ["/tokentrade.v1.TokenService/GetPrice", "grpc", "ok", 0.001],
  ["/api/v1/token/price", "http", "200", 2],
];
const registry = new Registry();
const metrics = new RequestMetrics(registry, {
  counter: { name: "t_requests_total", help: "Requests answered." },
  histogram: { name: "t_request_duration_seconds", help: "Time to answer." },
  buckets: [0.001, 0.01, 0.1, 1],
});
for (const observation of OBSERVATIONS) metrics.observe(...observation);
useLibraryFor(["0009"]);
for (const observation of OBSERVATIONS) metrics.observe(...observation);
useLibraryFor([]);
const library = (metrics as unknown as Record<symbol, Registry | undefined>)[Symbol.for("records.ab 0009 registry")];
const scrapes = { ours: await registry.metrics(), library: library === undefined ? null : await library.metrics() };

/** 0008: the service's logger on stdout, an access line and another line each way; pino's destination's writes counted. */
const log: Logger = createLogger();
const stdout = (log as unknown as Record<symbol, { library?: { write(line: string): boolean } }>)[
  pino.symbols.streamSym
]!;
let pinoLines = 0;
const sonic = stdout.library;
if (sonic !== undefined) {
  const write = sonic.write.bind(sonic);
  sonic.write = (line) => {
    pinoLines += 1;
    return write(line);
  };
}
const access = accessLog(log);
const RECORD = {
  reqId: "0f0e0d0c-0b0a-4908-8706-050403020100",
  method: "GET",
  path: "/api/v1/token/price",
  httpVersion: "1.1",
  status: 200,
  completed: true,
  ms: 0.25,
};
access(RECORD);
log.info({ side: "off" }, "another line");
useLibraryFor(["0008"]);
access(RECORD);
log.info({ side: "on" }, "another line");
useLibraryFor([]);

const counted = Object.fromEntries(Object.entries(tallied()).map(([name, { calls }]) => [name, calls]));
process.stdout.write(`${JSON.stringify({ grpc, scrapes, pinoLines, counted })}\n`);
