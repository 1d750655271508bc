/**
 * Never pay twice, never lose a trade: Idempotency-Key over JSON and gRPC, a receipt
 * timeout answered as "pending" without a resend, and a chain outage answered fast with
 * 503 and survived without a restart. The real service on the real embedded chain.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Socket, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";
import { JsonRpcProvider } from "ethers";
import { pino } from "pino";

import type { EmbeddedChain } from "../../../adapters/dev-mode.js";
import { startService, type RunningService } from "../../../adapters/main.js";
import { startEmbeddedChain } from "../../../scripts/embedded-chain/chain.js";
import { defaultLog, freePort } from "../../helpers/service-defaults.js";
import { type GrpcOutcome, type GrpcServiceClient, getJson, grpcClient, postJson } from "./helpers.js";

const KEY = "idem-api-key-0123456789abcdef";
const OTHER_KEY = "idem-other-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

function grpcTrade<Method extends string>(
  client: GrpcServiceClient,
  method: Method,
  request: object,
  key: string,
  idempotencyKey?: string,
) {
  const metadata = new grpc.Metadata();
  metadata.set("api_key", key);
  if (idempotencyKey !== undefined) metadata.set("idempotency-key", idempotencyKey);
  return new Promise<GrpcOutcome<Method>>((resolve) => {
    client[method]!(
      request,
      metadata,
      (error: grpc.ServiceError | null, response: NonNullable<GrpcOutcome<Method>["response"]>) =>
        resolve(error ? { error } : { response }),
    );
  });
}

describe("retries and faults on the embedded chain", function () {
  let chain: EmbeddedChain;
  let service: RunningService;
  let rpc: JsonRpcProvider;
  let dir: string;
  let proxy: TcpProxy;

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "idem-"));
    chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
    // The service reaches the chain through a proxy the tests can cut.
    proxy = await TcpProxy.start(Number(new URL(chain.rpcUrl).port));
    const file = join(dir, "deployment.json");
    writeFileSync(file, JSON.stringify(chain.addresses));
    service = await startService({
      env: {
        RPC_URL: `http://127.0.0.1:${proxy.port}`,
        DEPLOYMENT_FILE: file,
        EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
        API_KEYS: `${KEY},${OTHER_KEY}`,
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: dir,
        PRICE_CACHE_MS: "0",
        RECEIPT_TIMEOUT_MS: "1500",
        IDEMPOTENCY_WAIT_MS: "300",
      },
      log: defaultLog(),
      rootDir: dir,
    });
    rpc = new JsonRpcProvider(chain.rpcUrl, undefined, { staticNetwork: true, cacheTimeout: -1 });
  });

  after(async function () {
    rpc?.destroy();
    await service?.close();
    await proxy?.stop();
    await chain?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const wallet = () => chain.exchangeWallet.address;
  const nonce = () => rpc.getTransactionCount(wallet(), "pending");
  const body = (amount: string) => ({
    userAddress: wallet(),
    destinatary: CUSTOMER,
    amount,
    usdAddress: chain.addresses.stableCoins.USDC,
  });
  const post = (path: string, payload: unknown, idempotencyKey?: string, apiKey = KEY) =>
    postJson(`${service.apiUrl}${path}`, payload, {
      apiKey,
      headers: idempotencyKey ? { "idempotency-key": idempotencyKey } : {},
    });

  describe("Idempotency-Key on the JSON routes", function () {
    it("answers a retry with the same key and body with the original receipt and sends one transaction", async function () {
      const before = await nonce();
      const first = await post("/api/v1/token/buy", body("12.5"), "json-1");
      const again = await post("/api/v1/token/buy", body("12.5"), "json-1");
      expect(first.status).to.equal(200);
      expect(again.status).to.equal(200);
      expect(again.body).to.deep.equal(first.body);
      expect(await nonce()).to.equal(before + 1);
    });

    it("refuses the same key with a different body with 422, sending nothing", async function () {
      await post("/api/v1/token/sell", body("1"), "json-2");
      const before = await nonce();
      const other = await post("/api/v1/token/sell", body("2"), "json-2");
      expect(other.status).to.equal(422);
      expect(other.body).to.deep.equal({
        code: "failed_precondition",
        message: "Idempotency-Key: was already used with a different request",
      });
      const otherRoute = await post("/api/v1/remmitance", body("1"), "json-2");
      expect(otherRoute.status).to.equal(422);
      expect(await nonce()).to.equal(before);
    });

    it("scopes keys to the api key that sent them", async function () {
      const before = await nonce();
      const a = await post("/api/v1/token/buy", body("3"), "json-3", KEY);
      const b = await post("/api/v1/token/buy", body("3"), "json-3", OTHER_KEY);
      expect(b.body.transactionHash).not.to.equal(a.body.transactionHash);
      expect(await nonce()).to.equal(before + 2);
    });

    it("refuses a malformed key with 400 naming Idempotency-Key", async function () {
      const before = await nonce();
      const answer = await post("/api/v1/token/buy", body("3"), "x".repeat(300));
      expect(answer.status).to.equal(400);
      expect(answer.body.message).to.match(/^Idempotency-Key: /);
      expect(await nonce()).to.equal(before);
    });
  });

  describe("idempotency-key over gRPC", function () {
    it("returns the original receipt for a retry and failed_precondition for a different request", async function () {
      const client = grpcClient(service.apiUrl);
      try {
        const before = await nonce();
        const request = {
          user_address: wallet(),
          destinatary: CUSTOMER,
          amount: "4",
          usd_address: chain.addresses.stableCoins.DAI,
        };
        const first = await grpcTrade(client, "Buy", request, KEY, "grpc-1");
        const again = await grpcTrade(client, "Buy", request, KEY, "grpc-1");
        expect(first.error).to.equal(undefined);
        expect(again.response?.transaction_hash).to.equal(first.response?.transaction_hash);
        const other = await grpcTrade(client, "Buy", { ...request, amount: "5" }, KEY, "grpc-1");
        expect(other.error?.code).to.equal(grpc.status.FAILED_PRECONDITION);
        expect(other.error?.details).to.match(/Idempotency-Key/);
        // The same key through JSON with the same request is the same trade.
        const json = await post(
          "/api/v1/token/buy",
          { userAddress: wallet(), destinatary: CUSTOMER, amount: "4", usdAddress: request.usd_address },
          "grpc-1",
        );
        expect(json.body.transactionHash).to.equal(first.response?.transaction_hash);
        expect(await nonce()).to.equal(before + 1);
      } finally {
        client.close();
      }
    });
  });

  describe("a trade's status (GET /api/v1/trades/{transactionHash}, gRPC GetTrade)", function () {
    it("answers the journal's view of the caller's own trade, on both protocols, and hides it from other keys", async function () {
      const sold = await post("/api/v1/token/sell", body("3"), "status-1");
      expect(sold.status).to.equal(200);
      const hash = sold.body.transactionHash as string;
      const view = await getJson(`${service.apiUrl}/api/v1/trades/${hash}`, { apiKey: KEY });
      expect(view.status).to.equal(200);
      expect(view.body).to.deep.include({
        kind: "sell",
        status: "confirmed",
        request: body("3"),
        wallet: wallet(),
        transactionHash: hash,
        receipt: sold.body,
        error: null,
      });
      expect(view.body.confirmations).to.be.at.least(1);
      expect(view.body.deadline).to.be.within(Math.floor(Date.now() / 1000) + 200, Math.floor(Date.now() / 1000) + 310);
      expect(view.body.transactions).to.have.length(1);
      expect(view.body.transactions[0]).to.deep.include({ hash, noop: false });
      expect(view.body.transactions[0].maxFeePerGas).to.match(/^[1-9]\d*$/);
      expect(view.body.transactions[0].maxPriorityFeePerGas).to.match(/^\d+$/);

      // Another caller's key, an unknown hash, a malformed one, and no key.
      const hidden = await getJson(`${service.apiUrl}/api/v1/trades/${hash}`, { apiKey: OTHER_KEY });
      expect(hidden.status).to.equal(404);
      expect(hidden.body).to.deep.equal({
        code: "not_found",
        message: `transactionHash: no trade of yours broadcast ${hash}`,
      });
      expect((await getJson(`${service.apiUrl}/api/v1/trades/0x${"12".repeat(32)}`, { apiKey: KEY })).status).to.equal(
        404,
      );
      const malformed = await getJson(`${service.apiUrl}/api/v1/trades/0x1234`, { apiKey: KEY });
      expect(malformed.status).to.equal(400);
      expect(malformed.body).to.deep.equal({
        code: "invalid_argument",
        message: "transactionHash: must be 0x followed by 64 hex digits",
      });
      expect((await getJson(`${service.apiUrl}/api/v1/trades/${hash}`, { apiKey: null })).status).to.equal(401);
      expect((await post(`/api/v1/trades/${hash}`, {})).status).to.equal(405);

      const client = grpcClient(service.apiUrl);
      try {
        const viaGrpc = await grpcTrade(client, "GetTrade", { transaction_hash: hash }, KEY);
        expect(viaGrpc.error).to.equal(undefined);
        expect(viaGrpc.response).to.deep.include({
          kind: "sell",
          status: "confirmed",
          transaction_hash: hash,
          wallet: wallet(),
        });
        expect(viaGrpc.response!.receipt?.transaction_hash).to.equal(hash);
        expect(viaGrpc.response!.transactions[0]?.hash).to.equal(hash);
        const other = await grpcTrade(client, "GetTrade", { transaction_hash: hash }, OTHER_KEY);
        expect(other.error?.code).to.equal(grpc.status.NOT_FOUND);
        const bad = await grpcTrade(client, "GetTrade", { transaction_hash: "nope" }, KEY);
        expect(bad.error?.code).to.equal(grpc.status.INVALID_ARGUMENT);
        expect(bad.error?.details).to.match(/^transactionHash: /);
      } finally {
        client.close();
      }
    });
  });

  describe("when the receipt does not come in time", function () {
    it("answers 504 trade_pending with the hash, never resends, and a retry with the key gets the receipt once mined", async function () {
      const before = await nonce();
      await rpc.send("evm_setAutomine", [false]);
      try {
        const first = post("/api/v1/token/sell", body("2"), "slow-1");
        while ((await nonce()) === before) await new Promise((resolve) => setTimeout(resolve, 20));
        const retry = await post("/api/v1/token/sell", body("2"), "slow-1");
        expect(retry.status).to.equal(504);
        expect(retry.body.code).to.equal("deadline_exceeded");
        const answer = await first;
        expect(answer.status).to.equal(504);
        expect(answer.body.code).to.equal("deadline_exceeded");
        const hash = /transaction (0x[0-9a-f]{64})/.exec(answer.body.message)?.[1];
        expect(hash, answer.body.message).to.match(/^0x/);
        expect(await nonce()).to.equal(before + 1); // nothing sent twice
        await rpc.send("evm_mine", []);
      } finally {
        await rpc.send("evm_setAutomine", [true]);
      }
      const done = await post("/api/v1/token/sell", body("2"), "slow-1");
      expect(done.status).to.equal(200);
      expect(Object.keys(done.body.events)).to.have.length(5);
      expect(await nonce()).to.equal(before + 1);
    });
  });

  describe("when the chain's RPC is unreachable", function () {
    it("fails trades and price fast with 503 unavailable, sends nothing, and recovers by itself", async function () {
      const before = await nonce();
      await proxy.stop();
      try {
        const started = Date.now();
        const price = await getJson(`${service.apiUrl}/api/v1/token/price`, { apiKey: KEY });
        const trade = await post("/api/v1/token/buy", body("1"), "outage-1");
        const ready = await getJson(`${service.apiUrl}/readyz`, { apiKey: null });
        expect([price.status, price.body.code]).to.deep.equal([503, "unavailable"]);
        expect([trade.status, trade.body.code]).to.deep.equal([503, "unavailable"]);
        expect(ready.status).to.equal(503);
        expect(Date.now() - started).to.be.below(5_000); // well under the 10 s RPC timeout
      } finally {
        await proxy.restart();
      }
      expect(await nonce()).to.equal(before);
      const price = await getJson(`${service.apiUrl}/api/v1/token/price`, { apiKey: KEY });
      expect(price.status).to.equal(200);
      const trade = await post("/api/v1/token/buy", body("1"), "outage-1");
      expect(trade.status).to.equal(200);
      expect(await nonce()).to.equal(before + 1);
    });
  });
});

/** A TCP proxy to the chain's JSON-RPC port that a test can stop and restart on the same port. */
class TcpProxy {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();

  private constructor(
    private readonly target: number,
    public port = 0,
  ) {}

  static async start(target: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await proxy.restart();
    return proxy;
  }

  async restart(): Promise<void> {
    const server = createServer((client) => {
      const upstream = new Socket();
      upstream.connect(this.target, "127.0.0.1");
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("error", () => socket.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}
