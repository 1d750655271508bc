import { request as httpRequest } from "node:http";

import { expect } from "chai";

import {
  API_KEY,
  CUSTOMER,
  ChainUnavailableError,
  DAI,
  LOG_COUNT,
  OTHER_KEY,
  PRICE,
  PriceUnavailableError,
  STRANGER,
  SWAP,
  USDC,
  USDT,
  WALLET,
  getJson,
  type JsonBody,
  postJson,
  startTestServer,
  tradeBody,
  type TestServer,
} from "./helpers.js";
import { RECEIPT_KEYS } from "../../helpers/web3-receipt-shape.js";

const TRADE_ROUTES = [
  { path: "/api/v1/token/sell", kind: "sell" },
  { path: "/api/v1/token/buy", kind: "buy" },
  { path: "/api/v1/remmitance", kind: "remittance" },
] as const;

/** Asserts an error body of exactly {code, message}, the code, the status, and that the message names `field`. */
function expectError(
  res: { status: number; body: JsonBody; text: string },
  status: number,
  code: string,
  field?: string,
) {
  expect(res.status, res.text).to.equal(status);
  expect(res.body, res.text).to.be.an("object");
  expect(Object.keys(res.body)).to.have.members(["code", "message"]);
  expect(res.body.code).to.equal(code);
  expect(res.body.message).to.be.a("string").and.not.equal("");
  if (field !== undefined) expect(res.body.message).to.include(field);
  expect(res.text).not.to.match(/\n\s+at /); // no stack trace
}

describe("JSON routes over HTTP/1.1 (fetch)", function () {
  let t: TestServer;

  beforeEach(async function () {
    t = await startTestServer();
  });

  afterEach(async function () {
    await t.close();
  });

  describe("when the request is valid", function () {
    for (const { path, kind } of TRADE_ROUTES) {
      it(`POST ${path} answers 200 with the receipt of the core, unchanged, with ${LOG_COUNT[kind]} logs`, async function () {
        const res = await postJson(`${t.url}${path}`, tradeBody({ amount: "2.5", usdAddress: USDC.address }));
        expect(res.status, res.text).to.equal(200);
        expect(res.headers.get("content-type")).to.match(/^application\/json/);
        expect(Object.keys(res.body)).to.deep.equal(RECEIPT_KEYS);
        expect(res.body.contractAddress).to.equal(null);
        expect(res.body.status).to.equal(true);
        expect(res.body.to).to.equal(SWAP);
        expect(res.body.from).to.equal(WALLET.toLowerCase());
        expect(Object.keys(res.body.events)).to.deep.equal([...Array(LOG_COUNT[kind]).keys()].map(String));
        expect(res.body.events["0"].returnValues).to.deep.equal({});
        expect(res.body.events["0"].signature).to.equal(null);
        expect(t.trade.calls).to.have.length(1);
        expect(t.trade.calls[0]!.kind).to.equal(kind);
        expect(t.trade.calls[0]!.order.amount).to.equal(kind === "sell" ? 25n * 10n ** 17n : 2_500_000n);
        expect(t.trade.calls[0]!.order.stable.symbol).to.equal("USDC");
      });
    }

    it("POST /api/v1/remittance (the correctly spelled alias) does a remittance", async function () {
      const res = await postJson(`${t.url}/api/v1/remittance`, tradeBody());
      expect(res.status, res.text).to.equal(200);
      expect(Object.keys(res.body.events)).to.have.length(3);
      expect(t.trade.calls.map((c) => c.kind)).to.deep.equal(["remittance"]);
    });

    it("GET /api/v1/token/price answers the price record with CHF, EUR and USD", async function () {
      const res = await getJson(`${t.url}/api/v1/token/price`);
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.deep.equal(PRICE);
      expect(Object.keys(res.body.rateForCashCurrency).sort()).to.deep.equal(["CHF", "EUR", "USD"]);
    });

    it("GET /api/v1/token/price answers a price at hand (a cache's fresh, checked record) without asking the port, and only with a key", async function () {
      const first = await getJson(`${t.url}/api/v1/token/price`);
      expect(first.status, first.text).to.equal(200);
      expect(t.price.calls).to.equal(1);
      t.price.held = t.price.record; // the record that passed the checks, now held by the port
      const second = await getJson(`${t.url}/api/v1/token/price`);
      expect(second.status, second.text).to.equal(200);
      expect(second.text).to.equal(first.text);
      expect(t.price.calls, "the port was not asked again").to.equal(1);
      expectError(await getJson(`${t.url}/api/v1/token/price`, { apiKey: null }), 401, "unauthenticated");
      // A record nobody has checked yet goes through the checks: here a bad one is refused.
      const bad = { ...PRICE, rateForCashCurrency: { CHF: 0, EUR: 0.95, USD: 1.02 } };
      t.price.held = bad;
      t.price.record = bad;
      expectError(await getJson(`${t.url}/api/v1/token/price`), 503, "unavailable", "not positive numbers");
      expect(t.price.calls).to.equal(2);
    });

    it("accepts the second configured key and a Content-Type with charset=utf-8", async function () {
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody(), {
        apiKey: OTHER_KEY,
        contentType: "application/json; charset=UTF-8",
      });
      expect(res.status, res.text).to.equal(200);
    });

    it("accepts each of DAI, USDT and USDC", async function () {
      for (const coin of [DAI, USDT, USDC]) {
        const res = await postJson(`${t.url}/api/v1/token/buy`, tradeBody({ usdAddress: coin.address }));
        expect(res.status, `${coin.symbol}: ${res.text}`).to.equal(200);
      }
      expect(t.trade.calls.map((c) => c.order.stable.symbol)).to.deep.equal(["DAI", "USDT", "USDC"]);
    });
  });

  describe("when the api_key is missing or wrong", function () {
    const routes = [
      ...TRADE_ROUTES.map(({ path }) => ({ method: "POST", path })),
      { method: "POST", path: "/api/v1/remittance" },
      { method: "GET", path: "/api/v1/token/price" },
    ];
    for (const { method, path } of routes) {
      for (const [label, apiKey] of [
        ["missing", null],
        ["wrong", "not-the-key-0123456789"],
        ["empty", ""],
        ["one character short", API_KEY.slice(0, -1)],
      ] as const) {
        it(`${method} ${path} with the key ${label} answers 401 unauthenticated and trades nothing`, async function () {
          const res =
            method === "POST"
              ? await postJson(`${t.url}${path}`, tradeBody(), { apiKey })
              : await getJson(`${t.url}${path}`, { apiKey });
          expectError(res, 401, "unauthenticated", "api_key");
          expect(t.trade.nonce).to.equal(0);
          expect(t.trade.calls).to.have.length(0);
        });
      }
    }

    it("checks the key before the body, so an unauthenticated caller learns nothing about it", async function () {
      const res = await postJson(`${t.url}/api/v1/token/sell`, undefined, { apiKey: null, raw: "{not json" });
      expectError(res, 401, "unauthenticated");
    });
  });

  describe("when the input is bad, it answers 400 naming the field and sends nothing", function () {
    const cases: Array<{ name: string; body?: unknown; raw?: string; code?: string; status?: number; field: string }> =
      [
        { name: "malformed JSON", raw: '{"userAddress": ', field: "request body" },
        { name: "an empty body", raw: "", field: "request body" },
        { name: "a body that is not UTF-8", raw: "\xff\xfe", field: "request body" },
        { name: "a JSON array", body: [tradeBody()], field: "request" },
        { name: "a JSON string", body: "sell", field: "request" },
        { name: "JSON null", body: null, field: "request" },
        { name: "a JSON number", body: 42, field: "request" },
        {
          name: "a missing userAddress",
          body: { destinatary: CUSTOMER, amount: "1", usdAddress: DAI.address },
          field: "userAddress",
        },
        {
          name: "a missing amount",
          body: { userAddress: WALLET, destinatary: CUSTOMER, usdAddress: DAI.address },
          field: "amount",
        },
        { name: "an extra field", body: tradeBody({ memo: "hi" }), field: "memo" },
        {
          name: "a __proto__ field",
          raw: JSON.stringify(tradeBody()).replace("{", '{"__proto__":{"x":1},'),
          field: "__proto__",
        },
        { name: "a number amount", body: tradeBody({ amount: 1.5 }), field: "amount" },
        { name: "a null destinatary", body: tradeBody({ destinatary: null }), field: "destinatary" },
        {
          name: "an object usdAddress",
          body: tradeBody({ usdAddress: { address: DAI.address } }),
          field: "usdAddress",
        },
        { name: "a short address", body: tradeBody({ destinatary: "0x1234" }), field: "destinatary" },
        {
          name: "an address failing its checksum",
          body: tradeBody({ userAddress: WALLET.replace("a", "A") }),
          field: "userAddress",
        },
        {
          name: "the zero address as destinatary",
          body: tradeBody({ destinatary: `0x${"0".repeat(40)}` }),
          field: "destinatary",
        },
        { name: "a negative amount", body: tradeBody({ amount: "-1" }), field: "amount" },
        { name: "a zero amount", body: tradeBody({ amount: "0" }), field: "amount" },
        { name: "an exponent amount", body: tradeBody({ amount: "1e3" }), field: "amount" },
        { name: "an amount with spaces", body: tradeBody({ amount: " 1" }), field: "amount" },
        { name: "more decimals than USDT has", body: tradeBody({ amount: "0.0000001" }), field: "amount" },
        { name: "an amount over the limit", body: tradeBody({ amount: "10001" }), field: "amount" },
        {
          name: "an unsupported stable coin",
          body: tradeBody({ usdAddress: "0x4Fabb145d64652a948d72533023f6E7A623C7C53" }),
          field: "usdAddress",
        },
      ];
    for (const c of cases) {
      it(`${c.name}`, async function () {
        const raw = c.raw === "\xff\xfe" ? Buffer.from([0xff, 0xfe, 0x7b]) : c.raw;
        const res = await postJson(`${t.url}/api/v1/token/buy`, c.body, raw !== undefined ? { raw } : {});
        expectError(res, 400, "invalid_argument", c.field);
        expect(t.trade.nonce).to.equal(0);
        expect(t.trade.calls).to.have.length(0);
      });
    }

    it("a sell amount with more than 18 decimals names amount", async function () {
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody({ amount: `0.${"1".repeat(19)}` }));
      expectError(res, 400, "invalid_argument", "amount");
      expect(t.trade.calls).to.have.length(0);
    });
  });

  describe("when the chain refuses the trade", function () {
    it("an unknown exchange wallet answers 403 permission_denied naming userAddress", async function () {
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody({ userAddress: STRANGER }));
      expectError(res, 403, "permission_denied", "userAddress");
      expect(t.trade.nonce).to.equal(0);
    });

    it("insufficient funds answers 400 failed_precondition", async function () {
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody({ amount: "600" }));
      expectError(res, 400, "failed_precondition", "userAddress");
      expect(t.trade.nonce).to.equal(0);
    });

    it("a trade that would revert answers 400 failed_precondition with the contract's reason", async function () {
      const res = await postJson(`${t.url}/api/v1/token/buy`, tradeBody({ amount: "13" }));
      expectError(res, 400, "failed_precondition", "SwapPriceStale");
      expect(t.trade.nonce).to.equal(0);
    });

    it("an unreachable chain answers 503 unavailable", async function () {
      t.trade.failure = new ChainUnavailableError("connection refused");
      const res = await postJson(`${t.url}/api/v1/token/buy`, tradeBody());
      expectError(res, 503, "unavailable", "chain unavailable");
    });

    it("an unavailable price answers 503 unavailable", async function () {
      t.price.failure = new PriceUnavailableError("the token/USD feed is stale");
      const res = await getJson(`${t.url}/api/v1/token/price`);
      expectError(res, 503, "unavailable", "stale");
    });

    it("a bug answers 500 internal with a generic message, and logs the error with its stack", async function () {
      t.trade.failure = new TypeError("Cannot read properties of undefined (reading 'secretThing')");
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody(), { headers: { "x-request-id": "bug-1" } });
      expectError(res, 500, "internal");
      expect(res.body.message).to.equal("internal error");
      expect(res.text).not.to.include("secretThing");
      const logged = t.logs.records().find((r) => r.reqId === "bug-1" && r.level === 50);
      expect(logged, t.logs.text).to.not.equal(undefined);
      expect(JSON.stringify(logged)).to.include("secretThing");
      expect((logged!.err as { stack: string }).stack).to.include("TypeError");
    });
  });

  describe("HTTP-level refusals", function () {
    it("a wrong Content-Type answers 415 invalid_argument naming Content-Type", async function () {
      for (const contentType of [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json; charset=latin1",
        null,
      ]) {
        const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody(), { contentType });
        expectError(res, 415, "invalid_argument", "Content-Type");
      }
      expect(t.trade.calls).to.have.length(0);
    });

    it("an oversized body answers 413 resource_exhausted (declared Content-Length)", async function () {
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody({ amount: "1".padEnd(20_000, "0") }));
      expectError(res, 413, "resource_exhausted", "request body");
      expect(t.trade.calls).to.have.length(0);
    });

    it("an oversized chunked body answers 413 and stops reading early", async function () {
      const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(`${t.url}/api/v1/token/sell`, {
          method: "POST",
          headers: { "content-type": "application/json", api_key: API_KEY, "transfer-encoding": "chunked" },
        });
        req.on("response", (res) => {
          let text = "";
          res.on("data", (c: Buffer) => (text += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        });
        req.on("error", reject);
        req.write(`{"amount":"`);
        for (let i = 0; i < 40; i++) req.write("9".repeat(1024));
        req.end(`"}`);
      });
      expect(status).to.equal(413);
      expect(JSON.parse(body).code).to.equal("resource_exhausted");
      expect(t.trade.calls).to.have.length(0);
    });

    it("a body just under the limit is read (and judged on its content)", async function () {
      const res = await postJson(`${t.url}/api/v1/token/sell`, tradeBody({ memo: "x".repeat(15_000) }));
      expectError(res, 400, "invalid_argument", "memo");
    });

    it("a wrong method answers 405 unimplemented with an Allow header", async function () {
      for (const [method, path, allow] of [
        ["GET", "/api/v1/token/sell", "POST"],
        ["PUT", "/api/v1/token/buy", "POST"],
        ["DELETE", "/api/v1/remmitance", "POST"],
        ["POST", "/api/v1/token/price", "GET"],
        ["POST", "/healthz", "GET"],
      ] as const) {
        const res = await getJson(`${t.url}${path}`, { method });
        expectError(res, 405, "unimplemented", method);
        expect(res.headers.get("allow")).to.equal(allow);
      }
      expect(t.trade.calls).to.have.length(0);
    });

    it("an unknown path answers 404 not_found naming the path", async function () {
      for (const path of [
        "/api/v1/token/sel",
        "/api/v2/token/sell",
        "/api/v1/token/sell/",
        "/",
        "/tokentrade.v1.TokenService/Nope",
      ]) {
        const res = await postJson(`${t.url}${path}`, tradeBody());
        expectError(res, 404, "not_found", path === "/" ? undefined : path.split("/").pop());
      }
      expect(t.trade.calls).to.have.length(0);
    });

    it("ignores a query string when matching the path", async function () {
      const res = await getJson(`${t.url}/api/v1/token/price?currency=EUR`);
      expect(res.status).to.equal(200);
    });
  });

  describe("probes", function () {
    it("GET /healthz answers 200 without a key", async function () {
      const res = await getJson(`${t.url}/healthz`, { apiKey: null });
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ status: "ok" });
    });

    it("GET /readyz answers 200 when the chain adapter is ready", async function () {
      const res = await getJson(`${t.url}/readyz`, { apiKey: null });
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ status: "ready", detail: "chain reachable, wallets funded" });
    });

    it("GET /readyz answers 503 with the reason when it is not", async function () {
      t.readiness.result = { ready: false, detail: "no gas money in 0xabc" };
      const res = await getJson(`${t.url}/readyz`, { apiKey: null });
      expectError(res, 503, "unavailable", "no gas money");
    });

    it("GET /readyz shares one check among concurrent callers and reuses it for a second (the node is asked once)", async function () {
      // Three seconds, not the default's one: everything up to the second check must come within it.
      const cached = await startTestServer({ readinessCacheMs: 3_000 });
      try {
        const answers = await Promise.all(
          Array.from({ length: 100 }, () => getJson(`${cached.url}/readyz`, { apiKey: null })),
        );
        expect(answers.every((a) => a.status === 200)).to.equal(true);
        expect(cached.readiness.checks).to.equal(1);
        cached.readiness.result = { ready: false, detail: "no gas money in 0x1" };
        expect(
          (await getJson(`${cached.url}/readyz`, { apiKey: null })).status,
          "within the cache time: the same answer",
        ).to.equal(200);
        await new Promise((resolve) => setTimeout(resolve, 3_050));
        expect((await getJson(`${cached.url}/readyz`, { apiKey: null })).status).to.equal(503);
        expect(cached.readiness.checks).to.equal(2);
      } finally {
        await cached.close();
      }
    });

    it("GET /readyz answers 503 when the check itself fails", async function () {
      t.readiness.result = new Error("boom");
      const res = await getJson(`${t.url}/readyz`, { apiKey: null });
      expectError(res, 503, "unavailable", "readiness check failed");
    });
  });
});
