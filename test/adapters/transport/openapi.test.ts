/**
 * The OpenAPI document (adapters/transport/docs/openapi.ts) against the service's real answers on the
 * embedded chain: every answer below is validated with Ajv (JSON Schema 2020-12, as OpenAPI 3.1
 * uses it) against the schema the document gives for its path, method and status, so the
 * document cannot drift from the routes. A status the document does not list fails too.
 */
import { expect } from "chai";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

import { OPENAPI_DOCUMENT } from "../../../adapters/transport/docs/index.js";
import { startEmbeddedService, type EmbeddedService } from "./chain-helpers.js";
import { API_KEY } from "./helpers.js";

type Doc = {
  paths: Record<
    string,
    Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>
  >;
  components: object;
};

const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

describe("the OpenAPI document", function () {
  this.timeout(120_000);
  let s: EmbeddedService;
  let doc: Doc;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);

  before(async function () {
    s = await startEmbeddedService(API_KEY);
    const served = await fetch(`${s.service.apiUrl}/api/v1/openapi.json`); // no key
    expect(served.status).to.equal(200);
    expect(served.headers.get("content-type")).to.match(/^application\/json/);
    doc = (await served.json()) as Doc;
    expect(doc).to.deep.equal(JSON.parse(JSON.stringify(OPENAPI_DOCUMENT)));
    ajv.addSchema({ $id: "api", components: doc.components });
  });
  after(async function () {
    await s?.close();
  });

  /** The schema the document gives for this answer; fails when it gives none. */
  function schemaFor(path: string, method: string, status: number): object {
    const operation = doc.paths[path]?.[method];
    expect(operation, `${method} ${path} is not in the document`).to.not.equal(undefined);
    const response = operation!.responses[String(status)];
    expect(response, `${method} ${path} answered ${status}, which the document does not list`).to.not.equal(undefined);
    const schema = response!.content?.["application/json"]?.schema;
    expect(schema, `${method} ${path} ${status} has no JSON schema`).to.not.equal(undefined);
    return schema!;
  }

  /** Validates `body` as the document says `method path` answers `status`; the errors, or [] when it conforms. */
  function check(path: string, method: string, status: number, body: unknown): string[] {
    // The document's references ("#/components/...") resolved against it, added to Ajv as "api".
    const schema = JSON.parse(
      JSON.stringify(schemaFor(path, method, status)).replaceAll('"$ref":"#/', '"$ref":"api#/'),
    ) as object;
    const validate = ajv.compile(schema);
    return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
  }

  async function call(
    method: string,
    url: string,
    init: { key?: string | null; body?: string; contentType?: string } = {},
  ) {
    const headers: Record<string, string> = {};
    if (init.key !== null) headers.api_key = init.key ?? API_KEY;
    if (init.body !== undefined) headers["content-type"] = init.contentType ?? "application/json";
    const answer = await fetch(`${s.service.apiUrl}${url}`, {
      method,
      headers,
      ...(init.body !== undefined ? { body: init.body } : {}),
    });
    return { status: answer.status, body: (await answer.json()) as unknown };
  }

  const tradeBody = (amount: string) =>
    JSON.stringify({
      userAddress: s.wallet,
      destinatary: CUSTOMER,
      amount,
      usdAddress: s.service.addresses.stableCoins.DAI,
    });

  it("describes the real answers of every operation: price, sell, buy, remittance, the trade's status, the history, the probes", async function () {
    const price = await call("GET", "/api/v1/token/price");
    expect(check("/api/v1/token/price", "get", price.status, price.body)).to.deep.equal([]);
    let hash = "";
    for (const path of ["/api/v1/token/sell", "/api/v1/token/buy", "/api/v1/remmitance"]) {
      const trade = await call("POST", path, { body: tradeBody("2") });
      expect(trade.status, JSON.stringify(trade.body)).to.equal(200);
      expect(check(path, "post", 200, trade.body), path).to.deep.equal([]);
      hash = (trade.body as { transactionHash: string }).transactionHash;
    }
    const status = await call("GET", `/api/v1/trades/${hash}`);
    expect(status.status).to.equal(200);
    expect(check("/api/v1/trades/{transactionHash}", "get", 200, status.body)).to.deep.equal([]);
    const list = await call("GET", "/api/v1/trades?limit=2");
    expect(list.status, JSON.stringify(list.body)).to.equal(200);
    expect(check("/api/v1/trades", "get", 200, list.body)).to.deep.equal([]);
    expect((list.body as { nextCursor: unknown }).nextCursor).to.be.a("string");
    const summary = await call("GET", "/api/v1/trades/summary?since=2000-01-01");
    expect(summary.status, JSON.stringify(summary.body)).to.equal(200);
    expect(check("/api/v1/trades/summary", "get", 200, summary.body)).to.deep.equal([]);
    const refused = await call("GET", "/api/v1/trades?limit=0");
    expect(check("/api/v1/trades", "get", refused.status, refused.body)).to.deep.equal([]);
    const health = await call("GET", "/healthz", { key: null });
    expect(check("/healthz", "get", health.status, health.body)).to.deep.equal([]);
    const ready = await call("GET", "/readyz", { key: null });
    expect(check("/readyz", "get", ready.status, ready.body)).to.deep.equal([]);
  });

  it("describes the real error bodies: 400 naming the field, 401, 404, 415, an amount over the limit", async function () {
    const cases: Array<[string, string, Awaited<ReturnType<typeof call>>]> = [
      ["/api/v1/token/sell", "post", await call("POST", "/api/v1/token/sell", { body: tradeBody("-1") })],
      [
        "/api/v1/token/sell",
        "post",
        await call("POST", "/api/v1/token/sell", { body: "{", contentType: "application/json" }),
      ],
      [
        "/api/v1/token/buy",
        "post",
        await call("POST", "/api/v1/token/buy", { body: tradeBody("1"), key: "not-a-key-0123456789" }),
      ],
      [
        "/api/v1/token/buy",
        "post",
        await call("POST", "/api/v1/token/buy", { body: tradeBody("1"), contentType: "text/plain" }),
      ],
      ["/api/v1/token/sell", "post", await call("POST", "/api/v1/token/sell", { body: tradeBody("100001") })],
      ["/api/v1/token/price", "get", await call("GET", "/api/v1/token/price", { key: null })],
      ["/api/v1/trades/{transactionHash}", "get", await call("GET", `/api/v1/trades/0x${"ab".repeat(32)}`)],
      ["/api/v1/trades/{transactionHash}", "get", await call("GET", "/api/v1/trades/0x12")],
    ];
    const statuses = cases.map(([, , answer]) => answer.status);
    expect(statuses).to.deep.equal([400, 400, 401, 415, 400, 401, 404, 400]);
    for (const [path, method, answer] of cases)
      expect(check(path, method, answer.status, answer.body), `${method} ${path} ${answer.status}`).to.deep.equal([]);
    expect((cases[0]![2].body as { message: string }).message).to.match(/^amount:/);
  });

  it("fails when an answer drifts from it: an extra field, a wrong type, a missing field", async function () {
    const price = (await call("GET", "/api/v1/token/price")).body as Record<string, unknown>;
    expect(check("/api/v1/token/price", "get", 200, { ...price, extra: 1 })).to.not.deep.equal([]);
    expect(check("/api/v1/token/price", "get", 200, { ...price, cryptoCurrency: 5 })).to.not.deep.equal([]);
    const { rateForCashCurrency: _dropped, ...missing } = price;
    expect(check("/api/v1/token/price", "get", 200, missing)).to.not.deep.equal([]);
    const receipt = (await call("POST", "/api/v1/token/sell", { body: tradeBody("1") })).body as Record<
      string,
      unknown
    >;
    expect(check("/api/v1/token/sell", "post", 200, { ...receipt, blockNumber: "0x1" })).to.not.deep.equal([]);
    expect(check("/api/v1/token/sell", "post", 200, { ...receipt, logs: [] })).to.not.deep.equal([]);
    expect(check("/api/v1/token/sell", "post", 200, { code: "x", message: "y", extra: true })).to.not.deep.equal([]);
  });

  it("describes a quote, a trade naming it, and the quote refusals: 422 mismatched, 409 used", async function () {
    const quote = await call("POST", "/api/v1/token/quote", {
      body: JSON.stringify({ kind: "buy", amount: "3", usdAddress: s.service.addresses.stableCoins.DAI }),
    });
    expect(quote.status, JSON.stringify(quote.body)).to.equal(200);
    expect(check("/api/v1/token/quote", "post", 200, quote.body)).to.deep.equal([]);
    const issues = await call("POST", "/api/v1/token/quote", {
      body: JSON.stringify({ kind: "sell", amount: "99999999", usdAddress: s.service.addresses.stableCoins.DAI }),
    });
    expect((issues.body as { issues: unknown[] }).issues).to.not.deep.equal([]);
    expect(check("/api/v1/token/quote", "post", 200, issues.body)).to.deep.equal([]);
    const bad = await call("POST", "/api/v1/token/quote", { body: JSON.stringify({ kind: "swap" }) });
    expect(check("/api/v1/token/quote", "post", bad.status, bad.body)).to.deep.equal([]);
    const quoteId = (quote.body as { quoteId: string }).quoteId;
    const named = (body: string) =>
      fetch(`${s.service.apiUrl}/api/v1/token/buy`, {
        method: "POST",
        headers: { api_key: API_KEY, "content-type": "application/json", "quote-id": quoteId },
        body,
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as unknown }));
    const mismatched = await named(tradeBody("4"));
    expect(mismatched.status).to.equal(422);
    expect(check("/api/v1/token/buy", "post", 422, mismatched.body)).to.deep.equal([]);
    const bought = await named(tradeBody("3"));
    expect(bought.status, JSON.stringify(bought.body)).to.equal(200);
    const used = await named(tradeBody("3"));
    expect(used.status).to.equal(409);
    expect(check("/api/v1/token/buy", "post", 409, used.body)).to.deep.equal([]);
    expect(JSON.stringify(doc.paths["/api/v1/token/buy"])).to.include("QuoteId");
  });

  it("documents exactly the routes the service answers: each of its paths answers, others are 404", async function () {
    expect(Object.keys(doc.paths).sort()).to.deep.equal(
      [
        "/api/v1/approvals",
        "/api/v1/audit",
        "/api/v1/remmitance",
        "/api/v1/token/buy",
        "/api/v1/token/price",
        "/api/v1/token/quote",
        "/api/v1/token/sell",
        "/api/v1/trades",
        "/api/v1/trades/summary",
        "/api/v1/trades/{transactionHash}",
        "/api/v1/trades/{id}/approve",
        "/api/v1/trades/{id}/reject",
        "/api/v1/trades/{id}/cancel",
        "/api/v1/trades/{id}/speed-up",
        "/api/v1/webhooks/deliveries",
        "/api/v1/webhooks/deliveries/{id}/retry",
        "/api/v1/wallets/{address}/resume",
        "/healthz",
        "/readyz",
      ].sort(),
    );
    for (const [path, operations] of Object.entries(doc.paths)) {
      const url = path.replace("{transactionHash}", `0x${"cd".repeat(32)}`);
      for (const method of Object.keys(operations)) {
        const answer = await fetch(`${s.service.apiUrl}${url}`, {
          method: method.toUpperCase(),
          headers: { api_key: API_KEY, "content-type": "application/json" },
          ...(method === "post" ? { body: "{}" } : {}),
        });
        expect(answer.status, `${method} ${path}`).to.not.equal(405);
        if (!path.includes("{")) expect(answer.status, `${method} ${path}`).to.not.equal(404);
      }
    }
    expect((await fetch(`${s.service.apiUrl}/api/v1/token/steal`, { headers: { api_key: API_KEY } })).status).to.equal(
      404,
    );
    // Without an access file no key is an admin: a resume is refused as documented.
    const resume = await fetch(`${s.service.apiUrl}/api/v1/wallets/${s.service.wallets[0]}/resume`, {
      method: "POST",
      headers: { api_key: API_KEY },
    });
    expect(resume.status).to.equal(403);
    expect(check("/api/v1/wallets/{address}/resume", "post", 403, await resume.json())).to.deep.equal([]);
    // The api_key scheme and the Idempotency-Key header are in it.
    expect(JSON.stringify(doc)).to.include(
      '"securitySchemes":{"api_key":{"type":"apiKey","in":"header","name":"api_key"',
    );
    expect(JSON.stringify(doc.paths["/api/v1/token/sell"])).to.include("IdempotencyKey");
  });

  it("documents the webhook deliveries' answers and refusals, and the events sent", async function () {
    const list = await fetch(`${s.service.apiUrl}/api/v1/webhooks/deliveries?status=failed`, {
      headers: { api_key: API_KEY },
    });
    expect(check("/api/v1/webhooks/deliveries", "get", list.status, await list.json())).to.deep.equal([]);
    const bad = await fetch(`${s.service.apiUrl}/api/v1/webhooks/deliveries?cursor=x`, {
      headers: { api_key: API_KEY },
    });
    expect(check("/api/v1/webhooks/deliveries", "get", bad.status, await bad.json())).to.deep.equal([]);
    const retry = await fetch(`${s.service.apiUrl}/api/v1/webhooks/deliveries/msg_${"0".repeat(32)}/retry`, {
      method: "POST",
      headers: { api_key: API_KEY },
    });
    expect(check("/api/v1/webhooks/deliveries/{id}/retry", "post", retry.status, await retry.json())).to.deep.equal([]);
    expect(JSON.stringify((doc as { webhooks?: unknown }).webhooks)).to.include("WebhookEvent");
  });

  it("documents the audit log's refusal of a key that is not an admin's (here: no access file)", async function () {
    const refused = await fetch(`${s.service.apiUrl}/api/v1/audit`, { headers: { api_key: API_KEY } });
    expect(refused.status).to.equal(403);
    expect(check("/api/v1/audit", "get", 403, await refused.json())).to.deep.equal([]);
  });
});
