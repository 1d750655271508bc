/**
 * POST /api/v1/token/quote and trades that name a quote (Quote-Id), over the real handler and
 * server on fake ports with the in-memory journal: the answer's numbers, validation naming the
 * field, the issues, and a quote used at most once, by the trade quoted, before it expires, with
 * nothing sent otherwise. gRPC (grpc-js) calls Quote and names a quote in metadata.
 */
import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";

import { MemoryJournal } from "../../../adapters/journal/index.js";
import { QUOTE_MIN_LEFT_MS } from "../../../core/index.js";
import {
  API_KEY,
  CUSTOMER,
  DAI,
  OTHER_KEY,
  STRANGER,
  USDT,
  WALLET,
  grpcClient,
  postJson,
  startTestServer,
  type GrpcServiceClient,
  type JsonBody,
  type TestServer,
} from "./helpers.js";

const QUOTE = "/api/v1/token/quote";

function quoteBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { kind: "sell", amount: "1.5", usdAddress: USDT.address, destinatary: CUSTOMER, ...overrides };
}

function tradeBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { userAddress: WALLET, destinatary: CUSTOMER, amount: "1.5", usdAddress: USDT.address, ...overrides };
}

/** Asserts a refusal: the Connect code, the HTTP status, and that the message names `what`. */
function expectRefusal(res: { status: number; body: JsonBody }, status: number, code: string, what: string): void {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(Object.keys(res.body)).to.have.members(["code", "message"]);
  expect(res.body.code).to.equal(code);
  expect(res.body.message).to.include(what);
}

describe("quotes over JSON", function () {
  let api: TestServer;
  let journal: MemoryJournal;

  beforeEach(async function () {
    journal = new MemoryJournal();
    api = await startTestServer({ journal });
  });

  afterEach(async function () {
    await api.close();
  });

  const quote = (body: unknown, apiKey = API_KEY) => postJson(`${api.url}${QUOTE}`, body, { apiKey });
  const sell = (quoteId: string | undefined, body = tradeBody(), headers: Record<string, string> = {}) =>
    postJson(`${api.url}/api/v1/token/sell`, body, {
      headers: { ...headers, ...(quoteId === undefined ? {} : { "Quote-Id": quoteId }) },
    });

  describe("when a quote is asked for", function () {
    it("answers the amounts in decimals and base units, minOut rounded down, the price round, gas and fee", async function () {
      api.trade.priceAnswer = 130_000_000n; // 1.3 USD
      const before = Date.now();
      const res = await quote({ kind: "buy", amount: "1", usdAddress: USDT.address, slippageBps: 33 });
      expect(res.status, res.text).to.equal(200);
      const body = res.body;
      expect(body.quoteId).to.match(/^q_[0-9a-f]{32}$/);
      const expires = Date.parse(body.expiresAt);
      expect(expires).to.be.within(before + 30_000, Date.now() + 30_000);
      expect(body).to.deep.include({
        kind: "buy",
        userAddress: WALLET, // the only wallet, by default
        destinatary: null,
        usdAddress: USDT.address,
        slippageBps: 33,
        amountIn: { value: "1", baseUnits: "1000000" },
        // 1 USD / 1.3 = 0.769230769230769230 tokens, rounded down as the swap does
        expectedOut: { value: "0.76923076923076923", baseUnits: "769230769230769230" },
        // × (1 − 0.0033), rounded down
        minOut: { value: "0.766692307692307691", baseUnits: "766692307692307691" },
        price: { usd: "1.3", roundId: "18446744073709551617", updatedAt: new Date(1_800_000_000_000).toISOString() },
        gas: { units: "98765", estimated: true, priceWei: "1875000000" },
        networkFee: { wei: (98_765n * 1_875_000_000n).toString(), usd: null },
        issues: [],
      });
      expect(Object.keys(body)).to.have.length(14);
      expect(api.trade.nonce).to.equal(0);
    });

    it("prices the network fee in USD at the native coin's price, rounded up to a millionth of a dollar", async function () {
      api.trade.nativeUsd = 2_512_345_678_910_000_000_000n; // 2512.34567891 USD per coin
      try {
        const res = await quote(quoteBody());
        expect(res.status, res.text).to.equal(200);
        // 98,765 gas × 1.875 gwei = 0.000185184375 coin × 2512.34567891 = 0.46524716433289903125 USD
        expect(res.body.networkFee).to.deep.equal({ wei: "185184375000000", usd: "0.465248" });
      } finally {
        api.trade.nativeUsd = null;
      }
    });

    it("defaults the slippage to 50 bps, and takes 0 and 1000", async function () {
      const res = await quote(quoteBody());
      expect(res.body.slippageBps).to.equal(50);
      expect(res.body.expectedOut.baseUnits).to.equal("1875000"); // 1.5 tokens × 1.25 USD
      expect(res.body.minOut.baseUnits).to.equal("1865625");
      expect(res.body.destinatary).to.equal(CUSTOMER);
      expect((await quote(quoteBody({ slippageBps: 0 }))).body.minOut.baseUnits).to.equal("1875000");
      expect((await quote(quoteBody({ slippageBps: 1000 }))).body.minOut.baseUnits).to.equal("1687500");
    });

    it("gives every quote its own id", async function () {
      const ids = await Promise.all(Array.from({ length: 10 }, async () => (await quote(quoteBody())).body.quoteId));
      expect(new Set(ids).size).to.equal(10);
    });

    it("refuses a bad body with 400 naming the field, as a trade does", async function () {
      const cases: Array<[unknown, string]> = [
        [[], "request"],
        [quoteBody({ kind: undefined }), "kind"],
        [quoteBody({ kind: "swap" }), "kind"],
        [quoteBody({ kind: 1 }), "kind"],
        [quoteBody({ amount: undefined }), "amount"],
        [quoteBody({ amount: "1e3" }), "amount"],
        [quoteBody({ amount: "0" }), "amount"],
        [quoteBody({ kind: "buy", amount: "1.0000001" }), "amount"],
        [quoteBody({ amount: "1000000000001" }), "amount"],
        [quoteBody({ usdAddress: STRANGER }), "usdAddress"],
        [quoteBody({ userAddress: WALLET.toLowerCase().replace("a", "A") }), "userAddress"],
        [quoteBody({ userAddress: 7 }), "userAddress"],
        [quoteBody({ destinatary: "0x0000000000000000000000000000000000000000" }), "destinatary"],
        [quoteBody({ slippageBps: 1001 }), "slippageBps"],
        [quoteBody({ slippageBps: -1 }), "slippageBps"],
        [quoteBody({ slippageBps: 1.5 }), "slippageBps"],
        [quoteBody({ slippageBps: "50" }), "slippageBps"],
        [quoteBody({ extra: true }), "extra"],
      ];
      for (const [body, field] of cases) {
        const res = await quote(body);
        expectRefusal(res, 400, "invalid_argument", `${field}:`);
      }
    });

    it("refuses a wallet the service does not sign for with 403", async function () {
      expectRefusal(await quote(quoteBody({ userAddress: STRANGER })), 403, "permission_denied", STRANGER);
    });

    it("answers 200 with issues: the service's amount limits, with their numbers, and the chain's", async function () {
      const over = await quote(quoteBody({ amount: "1001" }));
      expect(over.status).to.equal(200);
      expect(over.body.issues).to.deep.equal([
        {
          type: "amount_above_maximum",
          message: "amount 1001 tokens is above the service's maximum of 1000 tokens",
          details: { amount: "1001", maximum: "1000" },
        },
      ]);
      api.trade.quoteIssues = [
        { type: "trading_paused", message: "the swap is paused: every trade reverts", details: {} },
      ];
      const paused = await quote(quoteBody());
      expect(paused.status).to.equal(200);
      expect(paused.body.issues.map((issue: { type: string }) => issue.type)).to.deep.equal(["trading_paused"]);
    });

    it("needs the api key", async function () {
      expectRefusal(await quote(quoteBody(), "wrong"), 401, "unauthenticated", "api_key");
    });
  });

  describe("when a trade names a quote", function () {
    it("executes with the quote's minOut and expiry as its terms", async function () {
      const q = (await quote(quoteBody())).body;
      const res = await sell(q.quoteId);
      expect(res.status, res.text).to.equal(200);
      expect(api.trade.nonce).to.equal(1);
      expect(api.trade.calls[0]!.order.quote).to.deep.equal({
        quoteId: q.quoteId,
        minOut: BigInt(q.minOut.baseUnits),
        expiresAt: Date.parse(q.expiresAt),
      });
    });

    it("takes a quote that named no destinatary for the trade's, and its id only as issued", async function () {
      const q = (await quote(quoteBody({ destinatary: undefined }))).body;
      expect((await sell(q.quoteId.toUpperCase())).status).to.equal(400);
      expect((await sell(q.quoteId)).status).to.equal(200);
    });

    it("uses a quote once: a second trade naming it is 409 and sends nothing", async function () {
      const q = (await quote(quoteBody())).body;
      expect((await sell(q.quoteId)).status).to.equal(200);
      expectRefusal(await sell(q.quoteId), 409, "already_exists", "(quote_used)");
      expect(api.trade.nonce).to.equal(1);
    });

    it("lets one of 8 concurrent trades naming one quote through", async function () {
      const q = (await quote(quoteBody())).body;
      const answers = await Promise.all(Array.from({ length: 8 }, () => sell(q.quoteId)));
      expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 409, 409, 409, 409, 409, 409, 409]);
      expect(api.trade.nonce).to.equal(1);
    });

    it("refuses a trade that is not the one quoted with 422, naming what differs, and sends nothing", async function () {
      const q = (await quote(quoteBody())).body;
      const cases: Array<[string, Record<string, unknown>, string]> = [
        ["/api/v1/token/buy", tradeBody(), "kind"],
        ["/api/v1/token/sell", tradeBody({ amount: "1.50000001" }), "amount"],
        ["/api/v1/token/sell", tradeBody({ usdAddress: DAI.address }), "usdAddress"],
        ["/api/v1/token/sell", tradeBody({ destinatary: STRANGER }), "destinatary"],
      ];
      for (const [path, body, field] of cases) {
        const res = await postJson(`${api.url}${path}`, body, { headers: { "Quote-Id": q.quoteId } });
        expectRefusal(res, 422, "failed_precondition", `for ${field}`);
        expect(res.body.message).to.include("(quote_mismatch)");
      }
      expect(api.trade.nonce).to.equal(0);
      // Refused trades left the quote unused.
      expect((await sell(q.quoteId)).status).to.equal(200);
    });

    it("refuses an unknown quote, another key's, or a malformed id, and sends nothing", async function () {
      const q = (await quote(quoteBody(), OTHER_KEY)).body;
      expectRefusal(await sell(q.quoteId), 404, "not_found", "(quote_not_found)");
      expectRefusal(await sell(`q_${"0".repeat(32)}`), 404, "not_found", "(quote_not_found)");
      expectRefusal(await sell("not-a-quote"), 400, "invalid_argument", "Quote-Id:");
      expect(api.trade.nonce).to.equal(0);
    });

    it("refuses an expired quote with 410 and sends nothing", async function () {
      await api.close();
      api = await startTestServer({ journal, quoteTtlMs: 50 });
      const q = (await quote(quoteBody())).body;
      await new Promise((resolve) => setTimeout(resolve, 80));
      expectRefusal(await sell(q.quoteId), 410, "failed_precondition", "(quote_expired)");
      expect(api.trade.nonce).to.equal(0);
    });

    it("refuses, as expired and sending nothing, a quote with too little left for its trade to be mined", async function () {
      await api.close();
      api = await startTestServer({ journal, quoteTtlMs: QUOTE_MIN_LEFT_MS - 500 });
      const q = (await quote(quoteBody())).body;
      expectRefusal(await sell(q.quoteId), 410, "failed_precondition", "(quote_expired)");
      expect(api.trade.nonce).to.equal(0);
    });

    it("refuses, as expired and sending nothing, a quote with less than two of the chain's blocks left", async function () {
      // 30 s left, and blocks of 20 s: its trade needs 40 s to be sure of being mined before it.
      api.trade.chainBlockTimeMs = 20_000;
      const q = (await quote(quoteBody())).body;
      const refused = await sell(q.quoteId);
      expectRefusal(refused, 410, "failed_precondition", "(quote_expired)");
      expect(refused.body.message).to.match(
        /expires at .*, \d+\.\d s from now: a trade needs at least 40\.0 s to be mined/,
      );
      expect(api.trade.nonce).to.equal(0);
      // Blocks of 12 s: 24 s suffice, and the same quote is used.
      api.trade.chainBlockTimeMs = 12_000;
      expect((await sell(q.quoteId)).status).to.equal(200);
      expect(api.trade.nonce).to.equal(1);
    });

    it("is refused before sending when the price moved past the slippage, and may use the quote once it is back", async function () {
      const q = (await quote(quoteBody({ slippageBps: 50 }))).body;
      api.trade.priceAnswer = 124_000_000n; // −0.8 %
      expectRefusal(await sell(q.quoteId), 409, "aborted", "(quote_slippage)");
      expect(api.trade.nonce).to.equal(0);
      api.trade.priceAnswer = 124_500_000n; // −0.4 %: within the quote's 0.5 %
      expect((await sell(q.quoteId)).status).to.equal(200);
      expect(api.trade.nonce).to.equal(1);
    });

    it("replays a keyed retry of the same trade with the same quote, and refuses the key with another quote", async function () {
      const q = (await quote(quoteBody())).body;
      const first = await sell(q.quoteId, tradeBody(), { "Idempotency-Key": "order-1" });
      const again = await sell(q.quoteId, tradeBody(), { "Idempotency-Key": "order-1" });
      expect(first.status).to.equal(200);
      expect(again.status).to.equal(200);
      expect(again.body).to.deep.equal(first.body);
      expect(api.trade.nonce).to.equal(1);
      const other = (await quote(quoteBody())).body;
      const res = await sell(other.quoteId, tradeBody(), { "Idempotency-Key": "order-1" });
      expectRefusal(res, 422, "failed_precondition", "Idempotency-Key");
      expect(api.trade.nonce).to.equal(1);
    });

    it("counts quotes by outcome and the trades that named one by theirs", async function () {
      const q = (await quote(quoteBody())).body;
      await quote(quoteBody({ amount: "1001" }));
      await quote(quoteBody({ kind: "swap" }));
      await sell(q.quoteId);
      await sell(q.quoteId);
      await sell(undefined);
      const text = await api.metrics.registry.metrics();
      expect(text).to.include('token_service_quotes_total{kind="sell",outcome="ok"} 1');
      expect(text).to.include('token_service_quotes_total{kind="sell",outcome="issues"} 1');
      expect(text).to.include('token_service_quotes_total{kind="invalid",outcome="invalid_argument"} 1');
      expect(text).to.include('token_service_quoted_trades_total{kind="sell",outcome="success"} 1');
      expect(text).to.include('token_service_quoted_trades_total{kind="sell",outcome="quote_used"} 1');
    });
  });

  describe("without a journal", function () {
    it("refuses quotes and Quote-Id with 400", async function () {
      const bare = await startTestServer();
      try {
        expectRefusal(await postJson(`${bare.url}${QUOTE}`, quoteBody()), 400, "invalid_argument", "journal");
        const res = await postJson(`${bare.url}/api/v1/token/sell`, tradeBody(), {
          headers: { "Quote-Id": `q_${"0".repeat(32)}` },
        });
        expectRefusal(res, 400, "invalid_argument", "Quote-Id:");
      } finally {
        await bare.close();
      }
    });
  });
});

describe("quotes over gRPC (grpc-js)", function () {
  let api: TestServer;
  let client: GrpcServiceClient;

  before(async function () {
    api = await startTestServer({ journal: new MemoryJournal() });
    client = grpcClient(api.url);
  });

  after(async function () {
    client.close();
    await api.close();
  });

  function call(method: string, request: object, metadata: Record<string, string> = {}) {
    const meta = new grpc.Metadata();
    meta.set("api_key", API_KEY);
    for (const [key, value] of Object.entries(metadata)) meta.set(key, value);
    return new Promise<{ response?: JsonBody; error?: grpc.ServiceError }>((resolve) => {
      client[method]!(request, meta, (error: grpc.ServiceError | null, response: JsonBody) =>
        resolve(error ? { error } : { response }),
      );
    });
  }

  it("quotes, and a Sell naming the quote in metadata executes once", async function () {
    const { response: quote } = await call("Quote", {
      kind: "sell",
      amount: "1.5",
      usd_address: USDT.address,
      slippage_bps: 0,
    });
    expect(quote).to.deep.include({
      kind: "sell",
      user_address: WALLET,
      usd_address: USDT.address,
      slippage_bps: 0,
      expected_out: { value: "1.875", base_units: "1875000" },
      min_out: { value: "1.875", base_units: "1875000" },
      issues: [],
    });
    expect(quote.destinatary).to.equal(undefined);
    const trade = { user_address: WALLET, destinatary: CUSTOMER, amount: "1.5", usd_address: USDT.address };
    const first = await call("Sell", trade, { "quote-id": quote.quote_id });
    expect(first.error).to.equal(undefined);
    const second = await call("Sell", trade, { "quote-id": quote.quote_id });
    expect(second.error?.code).to.equal(grpc.status.ALREADY_EXISTS);
    expect(second.error?.details).to.include("(quote_used)");
  });

  it("answers INVALID_ARGUMENT naming the field, and NOT_FOUND for an unknown quote", async function () {
    const bad = await call("Quote", { kind: "sell", amount: "1.5", usd_address: USDT.address, slippage_bps: 5000 });
    expect(bad.error?.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(bad.error?.details).to.include("slippageBps");
    const missing = await call("Quote", { amount: "1.5", usd_address: USDT.address });
    expect(missing.error?.details).to.include("kind: is required");
    const trade = { user_address: WALLET, destinatary: CUSTOMER, amount: "1.5", usd_address: USDT.address };
    const unknown = await call("Buy", trade, { "quote-id": `q_${"1".repeat(32)}` });
    expect(unknown.error?.code).to.equal(grpc.status.NOT_FOUND);
  });
});
