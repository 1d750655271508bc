/**
 * RequestMetrics against prom-client's own Counter and Histogram: the same observations give the
 * same scrape, byte for byte, in the text format, in OpenMetrics and as JSON.
 */
import { expect } from "chai";
import fc from "fast-check";
import { Counter, Histogram, Registry } from "prom-client";

import { RequestMetrics } from "../../../adapters/observability/request-metrics.js";

const COUNTER = { name: "svc_requests_total", help: "Requests answered, by route, protocol and code." };
const HISTOGRAM = {
  name: "svc_request_duration_seconds",
  help: "Time from a request's arrival to the end of its answer.",
};
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

type Observation = [route: string, protocol: string, code: string, seconds: number];

function both(observations: readonly Observation[], contentType?: string) {
  const theirs = new Registry();
  const ours = new Registry();
  if (contentType !== undefined) {
    theirs.setContentType(contentType as never);
    ours.setContentType(contentType as never);
  }
  const counter = new Counter({ ...COUNTER, labelNames: ["route", "protocol", "code"], registers: [theirs] });
  const histogram = new Histogram({
    ...HISTOGRAM,
    labelNames: ["route", "protocol"],
    buckets: BUCKETS,
    registers: [theirs],
  });
  const metrics = new RequestMetrics(ours, { counter: COUNTER, histogram: HISTOGRAM, buckets: BUCKETS });
  const observe = ([route, protocol, code, seconds]: Observation) => {
    counter.inc({ route, protocol, code });
    histogram.observe({ route, protocol }, seconds);
    metrics.observe(route, protocol, code, seconds);
  };
  for (const observation of observations) observe(observation);
  return { theirs, ours, observe };
}

const observation = fc.tuple(
  fc.constantFrom("/api/v1/token/price", "/api/v1/token/sell", "/tokentrade.v1.TokenService/Sell", "other"),
  fc.constantFrom("http", "grpc", "grpc-web", "connect"),
  fc.constantFrom("200", "400", "401", "ok", "invalid_argument", "unavailable"),
  fc.oneof(
    fc.double({ min: 0, max: 200, noNaN: true }),
    fc.constantFrom(...BUCKETS), // on a bound: counted in that bucket (le is "less than or equal")
  ),
);

describe("RequestMetrics (the per-request counter and histogram)", function () {
  it("scrapes exactly as prom-client's Counter and Histogram, in the text format", async function () {
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 60 }), async (observations) => {
        const { theirs, ours } = both(observations);
        expect(await ours.metrics()).to.equal(await theirs.metrics());
      }),
      { numRuns: 200 },
    );
  });

  it("and in OpenMetrics", async function () {
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 30 }), async (observations) => {
        const { theirs, ours } = both(observations, Registry.OPENMETRICS_CONTENT_TYPE);
        expect(await ours.metrics()).to.equal(await theirs.metrics());
      }),
      { numRuns: 50 },
    );
  });

  it("and as JSON", async function () {
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 30 }), async (observations) => {
        const { theirs, ours } = both(observations);
        expect(JSON.stringify(await ours.getMetricsAsJSON())).to.equal(JSON.stringify(await theirs.getMetricsAsJSON()));
      }),
      { numRuns: 50 },
    );
  });

  it("drops a latency that is not a finite number, where prom-client would throw", async function () {
    const { theirs } = both([["/api/v1/token/price", "http", "200", 0.002]]);
    const ours = new Registry();
    const metrics = new RequestMetrics(ours, { counter: COUNTER, histogram: HISTOGRAM, buckets: BUCKETS });
    metrics.observe("/api/v1/token/price", "http", "200", 0.002);
    for (const seconds of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(() => metrics.observe("/api/v1/token/price", "http", "200", seconds)).not.to.throw();
    }
    expect(await ours.metrics()).to.equal(await theirs.metrics());
  });

  it("reports nothing before the first request, and nothing after a reset", async function () {
    const { theirs, ours } = both([]);
    expect(await ours.metrics()).to.equal(await theirs.metrics());
    const after = both([["other", "http", "404", 0.01]]);
    after.theirs.resetMetrics();
    after.ours.resetMetrics();
    expect(await after.ours.metrics()).to.equal(await after.theirs.metrics());
    expect(await after.ours.metrics()).not.to.include("route=");
    // The same series again after the reset: counted from zero in a series of its own.
    after.observe(["other", "http", "404", 0.02]);
    expect(await after.ours.metrics()).to.equal(await after.theirs.metrics());
    expect(await after.ours.metrics()).to.include('svc_requests_total{route="other",protocol="http",code="404"} 1');
  });
});
