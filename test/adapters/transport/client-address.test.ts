/**
 * Whose address a request comes from, and what the refused-key throttle refuses: clients on two
 * source addresses of 127.0.0.0/8 (a client binds 127.0.0.2 while the server listens on
 * 127.0.0.1), with and without a trusted proxy (TRUSTED_PROXIES) in front, whose X-Forwarded-For
 * then names the client. A valid key and the probes are never throttled.
 */
import * as http from "node:http";
import * as net from "node:net";

import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";

import { loadConfig } from "../../../adapters/config/env.js";
import { TrustedProxies } from "../../../adapters/transport/index.js";
import { API_KEY, grpcCall, grpcClient, startTestServer, type TestServer } from "./helpers.js";

const ATTACKER = "127.0.0.1";
const INNOCENT = "127.0.0.2";

interface Answer {
  status: number;
  body: string;
}

/** One HTTP/1.1 request on a connection of its own from `from`. */
function request(
  t: TestServer,
  path: string,
  options: { from: string; apiKey?: string; forwardedFor?: string; method?: string; body?: string },
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.apiKey !== undefined) headers.api_key = options.apiKey;
  if (options.forwardedFor !== undefined) headers["x-forwarded-for"] = options.forwardedFor;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port: t.server.port,
        path,
        method: options.method ?? (options.body === undefined ? "GET" : "POST"),
        localAddress: options.from,
        headers,
        agent: false,
      },
      (res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

const price = (t: TestServer, from: string, apiKey: string, forwardedFor?: string) =>
  request(t, "/api/v1/token/price", { from, apiKey, ...(forwardedFor === undefined ? {} : { forwardedFor }) });

/** A Connect unary call (JSON) on TokenService or gRPC health. */
const connectCall = (t: TestServer, path: string, from: string, apiKey?: string) =>
  request(t, path, { from, body: "{}", ...(apiKey === undefined ? {} : { apiKey }) });

/** Wrong keys from `from` (through `forwardedFor`) until the throttle answers 429; how many it took. */
async function throttle(t: TestServer, from: string, forwardedFor?: string): Promise<number> {
  for (let i = 1; i <= 200; i++) {
    const { status } = await price(t, from, `wrong-key-guess-number-${i}`, forwardedFor);
    if (status === 429) return i;
    expect(status).to.equal(401);
  }
  throw new Error("200 wrong keys and still not throttled");
}

/**
 * The default throttle's burst (AUTH_FAILURES_PER_MINUTE=60: 60 refused keys, then 429) with its
 * refill slowed from one a second: a test makes up to 130 requests while it expects the throttle
 * closed, which at the default's refill would all have to fit in one second of a loaded machine.
 * The default's reading is tested in rate-limit.test.ts; the burst, the part under test, is the
 * default's.
 */
const THROTTLE = { authFailures: { ...loadConfig({}).rateLimits.authFailures!, rate: 0.01 } };

describe("the client's address and the refused-key throttle", function () {
  let t: TestServer | undefined;
  afterEach(async function () {
    await t?.close();
    t = undefined;
  });

  describe("without a proxy, as `npm start` runs by default", function () {
    it("refuses wrong keys from a throttled address, never its valid key, its probes, or another address", async function () {
      t = await startTestServer({ rateLimits: THROTTLE });
      const tries = await throttle(t, ATTACKER);
      expect(tries).to.equal(61); // AUTH_FAILURES_PER_MINUTE's burst: 60 refused, then throttled

      // The attacker's address: wrong keys are throttled, over JSON, Connect and gRPC.
      expect((await price(t, ATTACKER, "another-wrong-key-0000")).status).to.equal(429);
      expect((await request(t, "/api/v1/token/price", { from: ATTACKER })).status).to.equal(429); // no key
      expect(
        (await connectCall(t, "/tokentrade.v1.TokenService/GetPrice", ATTACKER, "wrong-key-0000000000")).status,
      ).to.equal(429);
      // A valid key from the same address is answered, on every protocol.
      const valid = await price(t, ATTACKER, API_KEY);
      expect(valid.status, valid.body).to.equal(200);
      expect((await connectCall(t, "/tokentrade.v1.TokenService/GetPrice", ATTACKER, API_KEY)).status).to.equal(200);
      const client = grpcClient(t.url); // grpc-js connects from 127.0.0.1
      expect((await grpcCall(client, "GetPrice", {}, API_KEY)).error).to.equal(undefined);
      expect((await grpcCall(client, "GetPrice", {}, "wrong-key-0000000000")).error?.code).to.equal(
        grpc.status.RESOURCE_EXHAUSTED,
      );
      client.close();
      // The probes, HTTP and gRPC, without a key.
      expect((await request(t, "/healthz", { from: ATTACKER })).status).to.equal(200);
      expect((await request(t, "/readyz", { from: ATTACKER })).status).to.equal(200);
      const health = await connectCall(t, "/grpc.health.v1.Health/Check", ATTACKER);
      expect(health.status, health.body).to.equal(200);
      expect(JSON.parse(health.body)).to.deep.equal({ status: "SERVING" });

      // Another address is not affected: its wrong key is refused as wrong (401), not throttled.
      expect((await price(t, INNOCENT, "wrong-key-of-an-innocent-0")).status).to.equal(401);
      expect((await price(t, INNOCENT, API_KEY)).status).to.equal(200);
      expect((await request(t, "/api/v1/openapi.json", { from: INNOCENT })).status).to.equal(200);
      expect((await request(t, "/healthz", { from: INNOCENT })).status).to.equal(200);
    });

    it("ignores X-Forwarded-For: a client cannot pick its own address", async function () {
      t = await startTestServer({ rateLimits: THROTTLE });
      for (let i = 1; i <= 60; i++)
        expect((await price(t, ATTACKER, `wrong-key-guess-number-${i}`, `198.51.100.${i}`)).status).to.equal(401);
      expect((await price(t, ATTACKER, "wrong-key-guess-again-00", "198.51.100.200")).status).to.equal(429);
    });

    it("limits connections per source address", async function () {
      t = await startTestServer({ limits: { connectionsPerAddress: 5 } });
      expect(await openConnections(t, ATTACKER, 8)).to.equal(5);
      expect(await openConnections(t, INNOCENT, 8)).to.equal(5);
    });
  });

  describe("behind a trusted proxy (TRUSTED_PROXIES=127.0.0.1)", function () {
    const PROXY = ATTACKER;

    it("throttles each forwarded client on its own, by the rightmost address the proxy did not add itself", async function () {
      t = await startTestServer({ trustedProxies: [PROXY], rateLimits: THROTTLE });
      expect(await throttle(t, PROXY, "203.0.113.7")).to.equal(61);
      expect((await price(t, PROXY, "wrong-key-0000000000", "203.0.113.7")).status).to.equal(429);
      // Other clients behind the same proxy: each its own bucket, throttled on its own.
      expect((await price(t, PROXY, "wrong-key-0000000000", "2001:db8::8")).status).to.equal(401);
      expect(await throttle(t, PROXY, "203.0.113.8")).to.equal(61);
      expect((await price(t, PROXY, "wrong-key-0000000000", "203.0.113.8")).status).to.equal(429);
      // What the client wrote itself, left of what the proxy added, changes nothing.
      expect((await price(t, PROXY, "wrong-key-0000000000", "198.51.100.1, 203.0.113.7")).status).to.equal(429);
      expect((await price(t, PROXY, "wrong-key-0000000000", "not-an-address, 203.0.113.7")).status).to.equal(429);
      // A chain of trusted proxies: the rightmost address that is not one of them.
      expect((await price(t, PROXY, "wrong-key-0000000000", "203.0.113.7, 127.0.0.1")).status).to.equal(429);
      // The throttled client's valid key and the probes still get through.
      expect((await price(t, PROXY, API_KEY, "203.0.113.7")).status).to.equal(200);
      expect((await request(t, "/healthz", { from: PROXY, forwardedFor: "203.0.113.7" })).status).to.equal(200);
      expect((await request(t, "/readyz", { from: PROXY, forwardedFor: "203.0.113.7" })).status).to.equal(200);
      // The proxy's own requests (no X-Forwarded-For: its health checks) are its own.
      expect((await price(t, PROXY, "wrong-key-0000000000")).status).to.equal(401);
    });

    it("ignores X-Forwarded-For from a peer that is not trusted", async function () {
      t = await startTestServer({ trustedProxies: [PROXY], rateLimits: THROTTLE });
      expect(await throttle(t, PROXY, "203.0.113.7")).to.equal(61);
      // 127.0.0.2 claims to forward for the throttled client: it is itself, and not throttled.
      expect((await price(t, INNOCENT, "wrong-key-0000000000", "203.0.113.7")).status).to.equal(401);
      // And changing what it claims does not spread its own refusals over many addresses.
      for (let i = 2; i <= 60; i++)
        expect((await price(t, INNOCENT, `wrong-key-guess-number-${i}`, `198.51.100.${i}`)).status).to.equal(401);
      expect((await price(t, INNOCENT, "wrong-key-guess-again-00", "198.51.100.200")).status).to.equal(429);
    });

    it("does not limit a trusted proxy's connections per address, which carry many clients", async function () {
      t = await startTestServer({ trustedProxies: [PROXY], limits: { connectionsPerAddress: 5 } });
      expect(await openConnections(t, PROXY, 8)).to.equal(8);
      expect(await openConnections(t, INNOCENT, 8)).to.equal(5);
    });
  });

  describe("the rule (TrustedProxies)", function () {
    it("takes the rightmost address of X-Forwarded-For that is not a trusted proxy", function () {
      const proxies = new TrustedProxies(["10.0.0.0/8", "fd00::/8", "192.0.2.1"]);
      const from = (peer: string, forwardedFor?: string | string[]) => proxies.clientAddress(peer, forwardedFor);
      expect(from("10.1.2.3")).to.equal("10.1.2.3"); // the proxy's own request
      expect(from("10.1.2.3", "203.0.113.7")).to.equal("203.0.113.7");
      expect(from("10.1.2.3", "198.51.100.1, 203.0.113.7")).to.equal("203.0.113.7");
      expect(from("10.1.2.3", "203.0.113.7, 10.9.9.9,192.0.2.1")).to.equal("203.0.113.7");
      expect(from("10.1.2.3", ["198.51.100.1", "203.0.113.7, 10.9.9.9"])).to.equal("203.0.113.7");
      expect(from("::ffff:10.1.2.3", "203.0.113.7")).to.equal("203.0.113.7"); // IPv4 on a dual-stack socket
      expect(from("fd12::1", "2001:DB8:0:0::7")).to.equal("2001:db8::7");
      expect(from("10.1.2.3", "[2001:db8::7]:4711")).to.equal("2001:db8::7");
      expect(from("10.1.2.3", "203.0.113.7:4711")).to.equal("203.0.113.7");
      // Every address trusted: the farthest one.
      expect(from("10.1.2.3", "10.0.0.9, 10.0.0.8")).to.equal("10.0.0.9");
      // Something that is not an address: the chain ends at the last trusted hop before it.
      expect(from("10.1.2.3", "203.0.113.7, unknown")).to.equal("10.1.2.3");
      expect(from("10.1.2.3", "203.0.113.7, unknown, 10.0.0.8")).to.equal("10.0.0.8");
      expect(from("10.1.2.3", "")).to.equal("10.1.2.3");
      // A peer that is not trusted is the client, whatever it says.
      expect(from("198.51.100.9", "203.0.113.7")).to.equal("198.51.100.9");
      expect(from("::ffff:198.51.100.9")).to.equal("198.51.100.9");
      expect(new TrustedProxies([]).clientAddress("10.1.2.3", "203.0.113.7")).to.equal("10.1.2.3");
    });
  });
});

/** Opens `count` connections from `from` and says how many the server kept open after a moment. */
async function openConnections(t: TestServer, from: string, count: number): Promise<number> {
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Socket>((resolve) => {
          const socket = net.connect({ port: t.server.port, host: "127.0.0.1", localAddress: from });
          socket.on("error", () => {});
          socket.once("connect", () => resolve(socket));
        }),
    ),
  );
  await new Promise((resolve) => setTimeout(resolve, 300));
  const open = sockets.filter((socket) => !socket.destroyed && socket.readyState === "open").length;
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => setTimeout(resolve, 100));
  return open;
}
