/**
 * Prometheus metrics (adapters/observability/metrics.ts) from the whole service on the embedded chain: scraped
 * from their own port without a key after real traffic (JSON, gRPC, a refused key), and read as
 * Prometheus reads them (text exposition format).
 */
import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";

import {
  tradeWithoutJournal,
  type ProvenTrade,
  type SignedTradeTx,
  type TradeOnChain,
  type TradeOrder,
  type TradePort,
  type TradeResolution,
  type TransactionReceipt,
} from "../../../core/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import { ServiceMetrics } from "../../../adapters/observability/metrics.js";
import {
  API_KEY,
  type GrpcOutcome,
  type GrpcServiceClient,
  getJson,
  grpcCall,
  grpcClient,
  postJson,
} from "../transport/helpers.js";
import { startEmbeddedService, type EmbeddedService } from "../transport/chain-helpers.js";

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
    // Metrics are on as `npm start` has them (startEmbeddedService gives them a free port).
    s = await startEmbeddedService(API_KEY);
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

  it("leave the trade port whole: a keyed retry of a finished trade answers its first receipt on JSON and gRPC, and the trade is found by its hash", async function () {
    const customer = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";
    const body = {
      userAddress: s.wallet,
      destinatary: customer,
      amount: "3",
      usdAddress: s.service.addresses.stableCoins.USDC,
    };
    const sell = () =>
      postJson(`${s.service.apiUrl}/api/v1/token/sell`, body, { headers: { "idempotency-key": "metered-json" } });
    const first = await sell();
    expect(first.status, first.text).to.equal(200);
    const again = await sell();
    expect(again.status, again.text).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
    const hash = first.body.transactionHash as string;

    // Both the journal and the chain are asked through the wrapped port: the confirmations come from resolve().
    const view = await getJson(`${s.service.apiUrl}/api/v1/trades/${hash}`);
    expect(view.status, view.text).to.equal(200);
    expect(view.body).to.deep.include({ status: "confirmed", transactionHash: hash, receipt: first.body });
    expect(view.body.confirmations).to.be.at.least(1);

    const client = grpcClient(s.service.apiUrl);
    try {
      const request = {
        user_address: s.wallet,
        destinatary: customer,
        amount: "2",
        usd_address: s.service.addresses.stableCoins.DAI,
      };
      const bought = await keyedCall(client, "Buy", request, "metered-grpc");
      expect(bought.error).to.equal(undefined);
      const retried = await keyedCall(client, "Buy", request, "metered-grpc");
      expect(retried.error).to.equal(undefined);
      expect(retried.response).to.deep.equal(bought.response);
      const trade = await grpcCall(
        client,
        "GetTrade",
        { transaction_hash: bought.response!.transaction_hash },
        API_KEY,
      );
      expect(trade.error).to.equal(undefined);
      expect(trade.response).to.deep.include({ status: "confirmed" });
      expect(Number(trade.response!.confirmations)).to.be.at.least(1);
    } finally {
      client.close();
    }
  });
});

/** A unary call of a grpc-js client with the api key and an Idempotency-Key. */
function keyedCall<Method extends string>(
  client: GrpcServiceClient,
  method: Method,
  request: object,
  idempotencyKey: string,
): Promise<GrpcOutcome<Method>> {
  const metadata = new grpc.Metadata();
  metadata.set("api_key", API_KEY);
  metadata.set("idempotency-key", idempotencyKey);
  return new Promise((resolve) => {
    client[method]!(
      request,
      metadata,
      (error: grpc.ServiceError | null, response: NonNullable<GrpcOutcome<Method>["response"]>) =>
        resolve(error ? { error } : { response }),
    );
  });
}

describe("the metrics' wrappers", function () {
  const order = { kind: "sell", stable: { symbol: "DAI" } } as TradeOrder;
  const receipt = { transactionHash: `0x${"ab".repeat(32)}` } as TransactionReceipt;

  /** A port that, like ChainTradeAdapter, keeps its state in private fields. */
  class PrivatePort implements TradePort {
    readonly #receipt = receipt;
    readonly #resolution: TradeResolution = { state: "pending" };
    readonly #tx = { wallet: "0x00", nonce: 0, txHash: receipt.transactionHash } as SignedTradeTx;
    released = 0;
    blockTimeMs() {
      return undefined;
    }
    async prove(order: TradeOrder) {
      return { order, output: 1n };
    }
    async reserve(proven: ProvenTrade) {
      return { proven };
    }
    async sign() {
      return { tx: this.#tx };
    }
    async send() {
      return { tx: this.#tx, submitted: false };
    }
    abandon() {}
    async settle() {
      return this.#receipt;
    }
    release() {
      this.released += 1;
    }
    async resolve(_trade: TradeOnChain) {
      return this.#resolution;
    }
  }

  it("forward every method of the trade port to the port itself, whose private fields stay readable", async function () {
    const metrics = new ServiceMetrics();
    const port = new PrivatePort();
    const metered = metrics.meteredTrades(port);
    expect(await tradeWithoutJournal(metered, order)).to.equal(receipt);
    expect(await tradeWithoutJournal(metered, { ...order, kind: "buy" })).to.equal(receipt);
    expect(await tradeWithoutJournal(metered, { ...order, kind: "remittance" })).to.equal(receipt);
    expect(port.released).to.equal(3);
    expect(await metered.resolve({ wallet: "0x00", nonce: 0, broadcasts: [] })).to.deep.equal({ state: "pending" });
    // Each trade counted once, from its proof to its receipt.
    const all = samples(await metrics.registry.metrics());
    expect(value(all, "token_service_trades_total", { kind: "sell", stable: "DAI", outcome: "success" })).to.equal(1);
    expect(value(all, "token_service_trades_total", { kind: "buy", stable: "DAI", outcome: "success" })).to.equal(1);
  });

  it("time every port of a journal, each method forwarded to the port itself, whose private fields stay readable", async function () {
    const metrics = new ServiceMetrics();
    const timed = metrics.meteredJournal(new MemoryJournal());
    const request = { userAddress: "0x01", destinatary: "0x02", amount: "1", usdAddress: "0x03" };
    const { record } = await timed.open({ scope: "s", idempotencyKey: null, requestHash: "h", kind: "sell", request });
    expect(await timed.get(record.id)).to.deep.equal(record);
    expect(await timed.ports.trades.get(record.id)).to.deep.equal(record);
    const chainNonce = async () => 7;
    expect(await timed.withNonce("0x00", chainNonce, async (nonce) => nonce)).to.equal(7);
    expect(await timed.acquireLease("monitor:0x00", "me", 60_000)).to.equal(true);
    expect(await timed.getQuote("none")).to.equal(undefined);
    expect((await timed.webhookStats()).pending).to.equal(0);
    await timed.close();
    const all = samples(await metrics.registry.metrics());
    const count = (operation: string) =>
      value(all, "token_service_journal_operation_duration_seconds_count", { operation });
    expect(["open", "get", "withNonce", "acquireLease", "getQuote", "webhookStats"].map(count)).to.deep.equal([
      1, 2, 1, 1, 1, 1,
    ]);
  });
});
