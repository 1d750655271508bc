/**
 * Rate limits (adapters/transport/http/rate-limit.ts): the token bucket itself with a fake clock,
 * then through the real handler, over JSON, gRPC (grpc-js) and gRPC-Web: a key over its rate
 * gets 429 with Retry-After or RESOURCE_EXHAUSTED, and nothing is traded; an address that keeps
 * presenting wrong keys is refused, but for a valid key (client-address.test.ts: two addresses,
 * and trusted proxies).
 */
import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";

import { loadConfig } from "../../../adapters/config/env.js";
import { TokenBuckets } from "../../../adapters/transport/http/index.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  API_KEY,
  OTHER_KEY,
  getJson,
  grpcCall,
  grpcClient,
  postJson,
  startTestServer,
  tradeBody,
  type TestServer,
} from "./helpers.js";

describe("rate limits", function () {
  describe("the token bucket", function () {
    it("allows the burst, then the rate, and says when the next token comes", function () {
      let now = 0;
      const buckets = new TokenBuckets({ rate: 2, burst: 3 }, () => now);
      for (let i = 0; i < 3; i++) expect(buckets.take("k").ok).to.equal(true);
      expect(buckets.take("k")).to.deep.equal({ ok: false, retryAfterS: 1 });
      expect(buckets.take("other").ok).to.equal(true); // keys are independent
      now += 500; // half a second: one token at 2/s
      expect(buckets.take("k").ok).to.equal(true);
      expect(buckets.take("k").ok).to.equal(false);
      now += 10_000; // refills to the burst, never beyond
      for (let i = 0; i < 3; i++) expect(buckets.take("k").ok).to.equal(true);
      expect(buckets.take("k").ok).to.equal(false);
      expect(new TokenBuckets({ rate: 1 / 60, burst: 1 }, () => now).peek("x")).to.deep.equal({ ok: true });
    });

    it("rounds Retry-After up, and forgets full buckets", function () {
      let now = 0;
      const buckets = new TokenBuckets({ rate: 1 / 60, burst: 1 }, () => now); // one a minute
      buckets.take("a");
      expect(buckets.take("a")).to.deep.equal({ ok: false, retryAfterS: 60 });
      expect(buckets.peek("a")).to.deep.equal({ ok: false, retryAfterS: 60 });
      now += 30_000;
      expect(buckets.peek("a")).to.deep.equal({ ok: false, retryAfterS: 30 });
      now += 61_000;
      buckets.take("b");
      expect(buckets.size).to.equal(1); // "a" refilled and was forgotten
    });
  });

  describe("through the handler", function () {
    let t: TestServer;
    afterEach(async function () {
      await t?.close();
    });

    it("answers a key over its rate with 429, Retry-After and resource_exhausted on JSON; other keys go on; nothing is traded", async function () {
      t = await startTestServer({ rateLimits: { ...loadConfig({}).rateLimits, perKey: { rate: 0.01, burst: 3 } } });
      for (let i = 0; i < 3; i++) expect((await getJson(`${t.url}/api/v1/token/price`)).status).to.equal(200);
      const over = await postJson(`${t.url}/api/v1/token/sell`, tradeBody());
      expect(over.status).to.equal(429);
      expect(over.headers.get("retry-after")).to.match(/^\d+$/);
      expect(Number(over.headers.get("retry-after"))).to.be.greaterThan(0);
      expect(over.body).to.deep.include({ code: "resource_exhausted" });
      expect((over.body as { message: string }).message).to.include("api_key");
      expect(t.trade.calls).to.have.length(0);
      expect((await getJson(`${t.url}/api/v1/token/price`, { apiKey: OTHER_KEY })).status).to.equal(200);
    });

    it("answers RESOURCE_EXHAUSTED over gRPC and gRPC-Web", async function () {
      t = await startTestServer({ rateLimits: { ...loadConfig({}).rateLimits, perKey: { rate: 0.01, burst: 1 } } });
      const client = grpcClient(t.url);
      expect((await grpcCall(client, "GetPrice", {}, API_KEY)).response).to.not.equal(undefined);
      const refused = await grpcCall(client, "GetPrice", {}, API_KEY);
      expect(refused.error?.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
      expect(refused.error?.details).to.include("rate limit");
      client.close();
      const web = await fetch(`${t.url}/${TokenService.typeName}/GetPrice`, {
        method: "POST",
        headers: { "content-type": "application/grpc-web+proto", api_key: API_KEY },
        body: new Uint8Array(5),
      });
      expect(web.headers.get("grpc-status")).to.equal("8");
    });

    it("refuses an address after its burst of wrong keys, unless its key is valid, then lets it in again", async function () {
      // A token a second: the refusals below must all come within a second of the first wrong key.
      t = await startTestServer({ rateLimits: { authFailures: { rate: 1, burst: 4 } } });
      for (let i = 0; i < 4; i++)
        expect(
          (await getJson(`${t.url}/api/v1/token/price`, { apiKey: `wrong-key-guess-number-${i}` })).status,
        ).to.equal(401);
      const blocked = await getJson(`${t.url}/api/v1/token/price`, { apiKey: "wrong-key-guess-number-4" });
      expect(blocked.status).to.equal(429);
      expect(blocked.body).to.deep.include({ code: "resource_exhausted" });
      expect((await getJson(`${t.url}/api/v1/token/price`, { apiKey: null })).status).to.equal(429); // no key
      // The right key is never refused for the address's refused keys (client-address.test.ts).
      expect((await getJson(`${t.url}/api/v1/token/price`, { apiKey: API_KEY })).status).to.equal(200);
      const client = grpcClient(t.url);
      expect((await grpcCall(client, "GetPrice", {}, "wrong-key-guess-number-5")).error?.code).to.equal(
        grpc.status.RESOURCE_EXHAUSTED,
      );
      expect((await grpcCall(client, "GetPrice", {}, API_KEY)).error).to.equal(undefined);
      client.close();
      await new Promise((resolve) => setTimeout(resolve, 1_100)); // a token a second
      expect((await getJson(`${t.url}/api/v1/token/price`, { apiKey: "wrong-key-guess-number-6" })).status).to.equal(
        401,
      );
    });

    it("counts refused gRPC keys too", async function () {
      t = await startTestServer({ rateLimits: { authFailures: { rate: 0.01, burst: 2 } } });
      const client = grpcClient(t.url);
      for (let i = 0; i < 2; i++)
        expect((await grpcCall(client, "GetPrice", {}, "not-a-key-at-all-0000")).error?.code).to.equal(
          grpc.status.UNAUTHENTICATED,
        );
      expect((await grpcCall(client, "GetPrice", {}, "not-a-key-at-all-0002")).error?.code).to.equal(
        grpc.status.RESOURCE_EXHAUSTED,
      );
      client.close();
    });
  });

  it("reads RATE_LIMIT_RPS, RATE_LIMIT_BURST (3 × the rate by default) and AUTH_FAILURES_PER_MINUTE (60 by default)", function () {
    expect(loadConfig({}).rateLimits).to.deep.equal({ authFailures: { rate: 1, burst: 60 } });
    expect(loadConfig({ RATE_LIMIT_RPS: "100", AUTH_FAILURES_PER_MINUTE: "0" }).rateLimits).to.deep.equal({
      perKey: { rate: 100, burst: 300 },
    });
    expect(loadConfig({ RATE_LIMIT_RPS: "10", RATE_LIMIT_BURST: "15" }).rateLimits.perKey).to.deep.equal({
      rate: 10,
      burst: 15,
    });
    expect(() => loadConfig({ RATE_LIMIT_BURST: "15" })).to.throw(/RATE_LIMIT_BURST: is only used with RATE_LIMIT_RPS/);
    expect(() => loadConfig({ RATE_LIMIT_RPS: "-1" })).to.throw(/RATE_LIMIT_RPS/);
  });
});
