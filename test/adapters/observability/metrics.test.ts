/**
 * Prometheus metrics (adapters/observability/metrics.ts) from the whole service on the embedded chain: scraped
 * from their own port without a key after real traffic (JSON, gRPC, a refused key), and read as
 * Prometheus reads them (text exposition format).
 */
import { createServer, type AddressInfo } from "node:net";

import { expect } from "chai";

import { ServiceMetrics } from "../../../adapters/observability/metrics.js";
import { API_KEY, grpcCall, grpcClient } from "../transport/helpers.js";
import { startEmbeddedService, type EmbeddedService } from "../transport/chain-helpers.js";

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** The samples of a text exposition: `name{labels}` → value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** The value of the sample named `name` whose labels include all of `labels`. */
function value(all: Map<string, number>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const [key, v] of all) {
    const brace = key.indexOf("{");
    const metric = brace === -1 ? key : key.slice(0, brace);
    if (metric !== name) continue;
    const text = brace === -1 ? "" : key.slice(brace);
    if (Object.entries(labels).every(([label, wanted]) => text.includes(`${label}="${wanted}"`))) return v;
  }
  return undefined;
}

describe("Prometheus metrics", function () {
  this.timeout(120_000);
  let s: EmbeddedService;
  let metricsUrl: string;

  before(async function () {
    s = await startEmbeddedService(API_KEY, { METRICS_PORT: String(await freePort()) });
    metricsUrl = s.service.metricsUrl!;
  });
  after(async function () {
    await s?.close();
  });

  it("are served on their own port without a key, and not on the API's", async function () {
    expect(metricsUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const answer = await fetch(metricsUrl);
    expect(answer.status).to.equal(200);
    expect(answer.headers.get("content-type")).to.match(/^text\/plain; version=0\.0\.4/);
    expect((await fetch(`${s.service.apiUrl}/metrics`)).status).to.equal(404);
  });

  it("count requests, trades, RPC calls and journal commits after real traffic, and read wallets and the chain at scrape", async function () {
    const dai = s.service.addresses.stableCoins.DAI;
    const sell = await fetch(`${s.service.apiUrl}/api/v1/token/sell`, {
      method: "POST",
      headers: { api_key: API_KEY, "content-type": "application/json" },
      body: JSON.stringify({
        userAddress: s.wallet,
        destinatary: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
        amount: "2",
        usdAddress: dai,
      }),
    });
    expect(sell.status).to.equal(200);
    expect(
      (await fetch(`${s.service.apiUrl}/api/v1/token/price`, { headers: { api_key: "wrong-key-0123456789" } })).status,
    ).to.equal(401);
    const client = grpcClient(s.service.apiUrl);
    expect((await grpcCall(client, "GetPrice", {}, API_KEY)).response).to.not.equal(undefined);
    expect((await grpcCall(client, "GetPrice", {}, "wrong-key-0123456789")).error?.code).to.equal(16);
    client.close();

    const all = samples(await (await fetch(metricsUrl)).text());
    expect(
      value(all, "token_service_requests_total", { route: "/api/v1/token/sell", protocol: "http", code: "200" }),
    ).to.equal(1);
    expect(
      value(all, "token_service_requests_total", { route: "/api/v1/token/price", protocol: "http", code: "401" }),
    ).to.equal(1);
    expect(
      value(all, "token_service_requests_total", {
        route: "/tokentrade.v1.TokenService/GetPrice",
        protocol: "grpc",
        code: "ok",
      }),
    ).to.equal(1);
    expect(
      value(all, "token_service_requests_total", {
        route: "/tokentrade.v1.TokenService/GetPrice",
        protocol: "grpc",
        code: "unauthenticated",
      }),
    ).to.equal(1);
    expect(
      value(all, "token_service_request_duration_seconds_count", { route: "/api/v1/token/sell", protocol: "http" }),
    ).to.equal(1);
    expect(value(all, "token_service_trades_total", { kind: "sell", stable: "DAI", outcome: "success" })).to.equal(1);
    expect(value(all, "token_service_trade_duration_seconds_count", { kind: "sell", stable: "DAI" })).to.equal(1);
    expect(value(all, "token_service_wallet_balance", { wallet: s.wallet, asset: "ETH" })).to.be.greaterThan(0);
    expect(value(all, "token_service_wallet_balance", { wallet: s.wallet, asset: "TTK" })).to.be.greaterThan(0);
    expect(value(all, "token_service_wallet_balance", { wallet: s.wallet, asset: "USDT" })).to.be.a("number");
    expect(value(all, "token_service_wallet_unconfirmed_nonces", { wallet: s.wallet })).to.be.a("number");
    expect(value(all, "token_service_wallet_oldest_unconfirmed_age_seconds", { wallet: s.wallet })).to.be.a("number");
    expect(value(all, "token_service_chain_head_age_seconds")).to.be.a("number").and.at.least(0);
    expect(value(all, "token_service_rpc_requests_total", { outcome: "ok" })).to.be.greaterThan(0);
    expect(value(all, "token_service_rpc_calls_total")).to.be.greaterThan(0);
    expect(value(all, "token_service_rpc_request_duration_seconds_count")).to.be.greaterThan(0);
    expect(
      value(all, "token_service_journal_operation_duration_seconds_count", { operation: "open" }),
    ).to.be.greaterThan(0);
    expect(value(all, "nodejs_eventloop_lag_seconds")).to.be.a("number");
    expect(value(all, "process_cpu_seconds_total")).to.be.a("number");
    // No key reaches the metrics: labels hold routes, codes, wallets and endpoints only.
    const text = await (await fetch(metricsUrl)).text();
    expect(text).to.not.include(API_KEY);
    expect(text).to.not.include("wrong-key");
  });

  it("count the lifecycle monitor's events by wallet from its warnings, and pass every line on", async function () {
    const metrics = new ServiceMetrics();
    const lines: string[] = [];
    const log = metrics.countingLifecycle({
      warn: (_d, message) => lines.push(message),
      info: (_d, message) => lines.push(message),
    });
    const wallet = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    log.warn({ wallet, nonce: 1 }, "replaced a transaction not mined in time, with higher fees");
    log.warn(
      { wallet, nonce: 1 },
      "replaced a transaction not mined in time, with higher fees: the node refused it for now",
    );
    log.warn({ wallet, nonce: 2 }, "re-sent a transaction the node no longer knew (same signed bytes)");
    log.warn({ wallet, nonce: 3 }, "reorg: transaction's block left the canonical chain; watching it again");
    log.warn({ wallet }, "lifecycle monitor: look failed; trying again");
    log.info({ wallet }, "something else");
    expect(lines).to.have.length(6);
    const all = samples(await metrics.registry.metrics());
    expect(value(all, "token_service_wallet_lifecycle_events_total", { wallet, event: "replaced" })).to.equal(1);
    expect(value(all, "token_service_wallet_lifecycle_events_total", { wallet, event: "resent" })).to.equal(1);
    expect(value(all, "token_service_wallet_lifecycle_events_total", { wallet, event: "reorg" })).to.equal(1);
  });
});
