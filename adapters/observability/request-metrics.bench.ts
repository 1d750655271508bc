/**
 * Decision 0009 (docs/decisions/0009-request-metrics.md): one answered request's observation,
 * the counter and the histogram together, by `RequestMetrics.observe` against prom-client's
 * `Counter.inc` and `Histogram.observe` through children `labels()` returned once (prom-client's
 * fastest way), with metrics.ts's buckets and a cached price answer's labels. Remove
 * `RequestMetrics` when prom-client's observation costs under 100 ns (or when its report format
 * changes: test/adapters/observability/request-metrics.test.ts). `npm run bench:micro -- request-metrics`.
 */
import { Counter, Histogram, Registry } from "prom-client";

import { compare, costUnder } from "../shared/micro-bench.js";
import { RequestMetrics } from "./request-metrics.js";

/** metrics.ts's REQUEST_BUCKETS. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const COUNTER = { name: "bench_requests_total", help: "Requests answered, by route, protocol and code." };
const HISTOGRAM = {
  name: "bench_request_duration_seconds",
  help: "Time from a request's arrival to the end of its answer.",
};
const [ROUTE, PROTOCOL, CODE] = ["/api/v1/token/price", "http", "200"];
/** Latencies across the low buckets, as cached answers' are. */
const SECONDS = Array.from({ length: 256 }, (_, i) => 0.0002 + (i % 64) * 0.00005);
let next = 0;
const seconds = () => SECONDS[next++ & 255]!;

const registry = new Registry();
const counter = new Counter({ ...COUNTER, labelNames: ["route", "protocol", "code"], registers: [registry] });
const histogram = new Histogram({
  ...HISTOGRAM,
  labelNames: ["route", "protocol"],
  buckets: BUCKETS,
  registers: [registry],
});
const counted = counter.labels(ROUTE, PROTOCOL, CODE);
const timed = histogram.labels(ROUTE, PROTOCOL);
const metrics = new RequestMetrics(new Registry(), { counter: COUNTER, histogram: HISTOGRAM, buckets: BUCKETS });

await compare({
  record: "0009",
  subject: "adapters/observability/request-metrics.ts",
  loop: 1000,
  cases: {
    promClient: {
      label: "prom-client Counter + Histogram",
      run: () => {
        counted.inc();
        timed.observe(seconds());
      },
    },
    ours: { label: "RequestMetrics.observe", run: () => metrics.observe(ROUTE, PROTOCOL, CODE, seconds()) },
  },
  verdict: ({ promClient }) => costUnder("prom-client", promClient, 100),
});
