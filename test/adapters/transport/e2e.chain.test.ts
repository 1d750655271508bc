/**
 * End to end on the real in-process chain: the composition root (adapters/main.ts)
 * with the embedded chain of `npm start` (scripts/embedded-chain/chain.ts: Hardhat's EDR
 * served as JSON-RPC on a free port, the suite deployed with the deployment module),
 * the real chain adapter, and the API on port 0, called over every protocol.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";
import { JsonRpcProvider, keccak256, toUtf8Bytes } from "ethers";
import { pino } from "pino";

import { startService, type RunningService } from "../../../adapters/main.js";
import type { TransactionReceipt } from "../../../core/index.js";
import { TokenService, TradeRequestSchema } from "../../../gen/tokentrade/v1/token_pb.js";
import { EXCHANGE_ACCOUNT, hardhatAccount, startEmbeddedChain } from "../../../scripts/embedded-chain/chain.js";
import { defaultLog, freePort } from "../../helpers/service-defaults.js";
import { LogSink, getJson, grpcCall, grpcClient, postJson } from "./helpers.js";

const KEY = "e2e-api-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"; // Hardhat account #2
const STRANGER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"; // Hardhat account #3: not an exchange wallet

/** web3.js 1.x log id, written independently of core/receipt.ts. */
function web3Id(blockHash: string, txHash: string, logIndex: number) {
  return `log_${keccak256(toUtf8Bytes(blockHash.slice(2) + txHash.slice(2) + logIndex.toString(16))).slice(2, 10)}`;
}

describe("end to end on the embedded chain (npm start's composition)", function () {
  let service: RunningService;
  let provider: JsonRpcProvider;
  let dir: string;
  let logs: LogSink;
  let wallet: string;
  let coins: { DAI: string; USDT: string; USDC: string };

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "e2e-"));
    logs = new LogSink();
    service = await startService({
      env: {
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        CHAIN_PORT: "0",
        API_KEYS: KEY,
        MAX_SELL_TOKENS: "100000000",
        MAX_USD: "100000000",
      },
      embeddedChain: async () => startEmbeddedChain,
      log: pino({ level: "debug" }, logs),
      rootDir: dir,
    });
    provider = new JsonRpcProvider(service.rpcUrl, undefined, { staticNetwork: true, cacheTimeout: -1 });
    wallet = service.wallets[0]!;
    coins = service.addresses.stableCoins;
  });

  after(async function () {
    provider?.destroy();
    await service?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const nonce = () => provider.getTransactionCount(wallet, "pending");
  const body = (amount: string, usdAddress: string, overrides: Record<string, unknown> = {}) => ({
    userAddress: wallet,
    destinatary: CUSTOMER,
    amount,
    usdAddress,
    ...overrides,
  });

  /** Checks a JSON receipt against the node's own receipt. */
  async function expectReceipt(receipt: TransactionReceipt, logCount: number) {
    expect(receipt.status).to.equal(true);
    expect(receipt.from).to.equal(wallet.toLowerCase());
    expect(receipt.to).to.equal(service.addresses.swap.toLowerCase());
    expect(receipt.contractAddress).to.equal(null);
    expect(Object.keys(receipt.events)).to.deep.equal([...Array(logCount).keys()].map(String));
    const raw = await provider.getTransactionReceipt(receipt.transactionHash);
    expect(raw?.blockNumber).to.equal(receipt.blockNumber);
    expect(raw?.logs).to.have.length(logCount);
    for (const [key, log] of Object.entries(receipt.events)) {
      expect(log.logIndex).to.equal(raw!.logs[Number(key)]!.index);
      expect(log.id).to.equal(web3Id(receipt.blockHash, receipt.transactionHash, log.logIndex));
      expect(log.raw.topics).to.deep.equal(raw!.logs[Number(key)]!.topics);
    }
  }

  it("writes .dev/deployment.json once the API listens", function () {
    const written = JSON.parse(readFileSync(join(dir, ".dev/deployment.json"), "utf8"));
    expect(written).to.include({
      chainId: 31337,
      rpcUrl: service.rpcUrl,
      apiUrl: service.apiUrl,
      exchangeWallet: wallet,
    });
    expect(written.swap).to.equal(service.addresses.swap);
    expect(written.token).to.equal(service.addresses.token);
    expect(Object.keys(written.stableCoins)).to.deep.equal(["DAI", "USDT", "USDC"]);
    expect(Object.keys(written.feeds)).to.have.members(["tokenUsd", "eurUsd", "chfUsd", "nativeUsd"]);
  });

  it("serves the chain as JSON-RPC for wallets and scripts", async function () {
    expect(Number((await provider.getNetwork()).chainId)).to.equal(31337);
    expect(await provider.getCode(service.addresses.swap)).to.not.equal("0x");
  });

  it("is ready", async function () {
    const res = await getJson(`${service.apiUrl}/readyz`, { apiKey: null });
    expect(res.status).to.equal(200);
    expect(res.body.status).to.equal("ready");
  });

  describe("JSON routes", function () {
    for (const [path, symbol, logCount] of [
      ["/api/v1/token/sell", "DAI", 5],
      ["/api/v1/token/sell", "USDT", 5],
      ["/api/v1/token/buy", "USDT", 3],
      ["/api/v1/token/buy", "USDC", 3],
      ["/api/v1/remmitance", "USDC", 3],
      ["/api/v1/remmitance", "DAI", 3],
    ] as const) {
      it(`POST ${path} paying in ${symbol} answers a receipt with ${logCount} logs and sends one transaction`, async function () {
        const before = await nonce();
        const res = await postJson(`${service.apiUrl}${path}`, body("12.5", coins[symbol]), { apiKey: KEY });
        expect(res.status, res.text).to.equal(200);
        await expectReceipt(res.body, logCount);
        expect(await nonce()).to.equal(before + 1);
      });
    }

    it("GET /api/v1/token/price answers rates for CHF, EUR and USD from the feeds", async function () {
      const res = await getJson(`${service.apiUrl}/api/v1/token/price`, { apiKey: KEY });
      expect(res.status).to.equal(200);
      expect(res.body.cryptoCurrency).to.equal("TTK");
      expect(res.body.rateForCashCurrency.USD).to.equal(1.25);
      // (chai's closeTo is taken over by Hardhat's bigint matchers, hence the explicit difference)
      expect(Math.abs(res.body.rateForCashCurrency.EUR - 1.25 / 1.08)).to.be.lessThan(1e-6);
      expect(Math.abs(res.body.rateForCashCurrency.CHF - 1.25 / 1.12)).to.be.lessThan(1e-6);
      expect(res.body.rateWithDiscountForCashCurrency).to.deep.equal({});
    });
  });

  describe("refused trades send nothing (the exchange wallet's nonce does not move)", function () {
    const refusals: Array<{
      name: string;
      path: string;
      body: () => unknown;
      apiKey?: string | null;
      status: number;
      code: string;
      message?: RegExp;
    }> = [
      {
        name: "a missing key",
        path: "/api/v1/token/sell",
        body: () => body("1", coins.DAI),
        apiKey: null,
        status: 401,
        code: "unauthenticated",
      },
      {
        name: "a wrong key",
        path: "/api/v1/token/buy",
        body: () => body("1", coins.DAI),
        apiKey: "wrong-key-0123456789",
        status: 401,
        code: "unauthenticated",
      },
      {
        name: "a bad address",
        path: "/api/v1/token/sell",
        body: () => body("1", coins.DAI, { destinatary: "0x123" }),
        status: 400,
        code: "invalid_argument",
      },
      {
        name: "a bad amount",
        path: "/api/v1/token/buy",
        body: () => body("1.0000001", coins.USDT),
        status: 400,
        code: "invalid_argument",
      },
      {
        name: "an extra field",
        path: "/api/v1/remmitance",
        body: () => ({ ...body("1", coins.DAI), note: "x" }),
        status: 400,
        code: "invalid_argument",
      },
      {
        name: "an unsupported stable coin",
        path: "/api/v1/token/buy",
        body: () => body("1", service.addresses.token),
        status: 400,
        code: "invalid_argument",
      },
      {
        name: "an unknown wallet",
        path: "/api/v1/token/sell",
        body: () => body("1", coins.DAI, { userAddress: STRANGER }),
        status: 403,
        code: "permission_denied",
      },
      {
        name: "insufficient tokens for a sell",
        path: "/api/v1/token/sell",
        body: () => body("5000000", coins.DAI),
        status: 400,
        code: "failed_precondition",
      },
      {
        name: "insufficient stable coin for a buy",
        path: "/api/v1/token/buy",
        body: () => body("5000000", coins.USDC),
        status: 400,
        code: "failed_precondition",
      },
      {
        name: "insufficient stable coin for a remittance",
        path: "/api/v1/remmitance",
        body: () => body("5000000", coins.USDT),
        status: 400,
        code: "failed_precondition",
      },
      {
        name: "dust: a sell of 1e-18 tokens",
        path: "/api/v1/token/sell",
        body: () => body("0.000000000000000001", coins.DAI),
        status: 400,
        code: "invalid_argument",
        message: /^amount: must be at least 0\.01 tokens$/,
      },
      {
        name: "dust: a buy of 0.001 USD",
        path: "/api/v1/token/buy",
        body: () => body("0.001", coins.USDC),
        status: 400,
        code: "invalid_argument",
        message: /^amount: must be at least 0\.01 USD$/,
      },
      ...(["swap", "token"] as const).map((name) => ({
        name: `the ${name} as destinatary`,
        path: "/api/v1/token/buy",
        body: () => body("1", coins.DAI, { destinatary: service.addresses[name] }),
        status: 400,
        code: "invalid_argument",
        message: new RegExp(`^destinatary: 0x[0-9a-fA-F]{40} is the ${name} contract: what it received would be lost$`),
      })),
      ...(["DAI", "USDT", "USDC"] as const).map((symbol) => ({
        name: `the ${symbol} contract as destinatary`,
        path: "/api/v1/token/sell",
        body: () => body("1", coins.DAI, { destinatary: service.addresses.stableCoins[symbol] }),
        status: 400,
        code: "invalid_argument",
        message: new RegExp(`is the ${symbol} contract`),
      })),
      ...(["tokenUsd", "eurUsd", "chfUsd", "nativeUsd"] as const).map((feed) => ({
        name: `the ${feed} feed as destinatary`,
        path: "/api/v1/remmitance",
        body: () => body("1", coins.DAI, { destinatary: service.addresses.feeds[feed]! }),
        status: 400,
        code: "invalid_argument",
        message: /price feed: what it received would be lost$/,
      })),
      {
        name: "the exchange wallet paying itself",
        path: "/api/v1/token/sell",
        body: () => body("1", coins.DAI, { destinatary: wallet.toLowerCase() }),
        status: 400,
        code: "invalid_argument",
        message: /is an exchange wallet of this service/,
      },
    ];
    for (const r of refusals) {
      it(`${r.name}: ${r.status} ${r.code}`, async function () {
        const before = await nonce();
        const res = await postJson(`${service.apiUrl}${r.path}`, r.body(), {
          apiKey: r.apiKey === undefined ? KEY : r.apiKey,
        });
        expect(res.status, res.text).to.equal(r.status);
        expect(res.body.code).to.equal(r.code);
        if (r.message) expect(res.body.message).to.match(r.message);
        expect(await nonce()).to.equal(before);
      });
    }

    it("malformed JSON, a wrong Content-Type and an oversized body", async function () {
      const before = await nonce();
      expect(
        (await postJson(`${service.apiUrl}/api/v1/token/sell`, undefined, { apiKey: KEY, raw: "{" })).status,
      ).to.equal(400);
      expect(
        (
          await postJson(`${service.apiUrl}/api/v1/token/sell`, body("1", coins.DAI), {
            apiKey: KEY,
            contentType: "text/plain",
          })
        ).status,
      ).to.equal(415);
      expect(
        (await postJson(`${service.apiUrl}/api/v1/token/sell`, body("1".repeat(20_000), coins.DAI), { apiKey: KEY }))
          .status,
      ).to.equal(413);
      expect(await nonce()).to.equal(before);
    });

    it("over gRPC: a wrong key, an unknown wallet and insufficient funds", async function () {
      const client = grpcClient(service.apiUrl);
      const before = await nonce();
      const request = { user_address: wallet, destinatary: CUSTOMER, amount: "1", usd_address: coins.DAI };
      expect((await grpcCall(client, "Sell", request, "wrong-key-0123456789")).error?.code).to.equal(
        grpc.status.UNAUTHENTICATED,
      );
      expect((await grpcCall(client, "Sell", { ...request, user_address: STRANGER }, KEY)).error?.code).to.equal(
        grpc.status.PERMISSION_DENIED,
      );
      expect((await grpcCall(client, "Buy", { ...request, amount: "5000000" }, KEY)).error?.code).to.equal(
        grpc.status.FAILED_PRECONDITION,
      );
      expect((await grpcCall(client, "Buy", { ...request, amount: "-1" }, KEY)).error?.code).to.equal(
        grpc.status.INVALID_ARGUMENT,
      );
      client.close();
      expect(await nonce()).to.equal(before);
    });
  });

  describe("gRPC over h2c (@grpc/grpc-js)", function () {
    for (const [method, logCount] of [
      ["Sell", 5],
      ["Buy", 3],
      ["Remittance", 3],
    ] as const) {
      it(`${method} returns the receipt with ${logCount} events`, async function () {
        const client = grpcClient(service.apiUrl);
        const { response, error } = await grpcCall(
          client,
          method,
          { user_address: wallet, destinatary: CUSTOMER, amount: "3", usd_address: coins.USDC },
          KEY,
        );
        client.close();
        expect(error, error?.message).to.equal(undefined);
        expect(response!.status).to.equal(true);
        expect(response!.to).to.equal(service.addresses.swap.toLowerCase());
        expect(response!.events).to.have.length(logCount);
        const raw = await provider.getTransactionReceipt(response!.transaction_hash);
        expect(raw?.logs).to.have.length(logCount);
      });
    }

    it("sends a receipt uncompressed although the client accepts gzip", async function () {
      const request = create(TradeRequestSchema, {
        userAddress: wallet,
        destinatary: CUSTOMER,
        amount: "1",
        usdAddress: coins.DAI,
      });
      const message = toBinary(TradeRequestSchema, request);
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), Buffer.from(message)]);
      frame.writeUInt32BE(message.length, 1);
      const session = http2.connect(service.apiUrl);
      try {
        const { headers, body } = await new Promise<{ headers: http2.IncomingHttpHeaders; body: Buffer }>(
          (resolve, reject) => {
            const stream = session.request({
              ":method": "POST",
              ":path": "/tokentrade.v1.TokenService/Sell",
              "content-type": "application/grpc",
              te: "trailers",
              "grpc-accept-encoding": "gzip",
              api_key: KEY,
            });
            const chunks: Buffer[] = [];
            let headers: http2.IncomingHttpHeaders = {};
            stream.on("response", (h) => (headers = h));
            stream.on("data", (chunk: Buffer) => chunks.push(chunk));
            stream.on("end", () => resolve({ headers, body: Buffer.concat(chunks) }));
            stream.on("error", reject);
            stream.end(frame);
          },
        );
        expect(headers[":status"]).to.equal(200);
        // The stream may name gzip (Connect negotiates it), but the message itself is sent with
        // the compressed flag 0, although it is large enough that Connect would gzip it by
        // default (from 1 KiB on).
        expect(body[0]).to.equal(0);
        expect(body.readUInt32BE(1)).to.be.greaterThan(1024);
      } finally {
        session.close();
      }
    });

    it("GetPrice returns CHF, EUR and USD", async function () {
      const client = grpcClient(service.apiUrl);
      const { response } = await grpcCall(client, "GetPrice", {}, KEY);
      client.close();
      expect(Object.keys(response!.rate_for_cash_currency).sort()).to.deep.equal(["CHF", "EUR", "USD"]);
    });
  });

  describe("Connect and gRPC-Web", function () {
    for (const [name, transport] of [
      ["Connect over HTTP/1.1", () => createConnectTransport({ baseUrl: service.apiUrl, httpVersion: "1.1" })],
      ["Connect over HTTP/2", () => createConnectTransport({ baseUrl: service.apiUrl, httpVersion: "2" })],
      ["gRPC-Web over HTTP/1.1", () => createGrpcWebTransport({ baseUrl: service.apiUrl, httpVersion: "1.1" })],
    ] as const) {
      it(`${name}: all four operations, and a refused key`, async function () {
        const client = createClient(TokenService, transport());
        const options = { headers: { api_key: KEY } };
        const request = { userAddress: wallet, destinatary: CUSTOMER, amount: "2", usdAddress: coins.DAI };
        expect((await client.sell(request, options)).events).to.have.length(5);
        expect((await client.buy(request, options)).events).to.have.length(3);
        expect((await client.remittance(request, options)).events).to.have.length(3);
        expect((await client.getPrice({}, options)).rateForCashCurrency).to.have.keys("CHF", "EUR", "USD");
        const before = await nonce();
        let code: Code | undefined;
        try {
          await client.sell(request, { headers: { api_key: "nope-nope-nope-nope" } });
        } catch (error) {
          code = ConnectError.from(error).code;
        }
        expect(code).to.equal(Code.Unauthenticated);
        expect(await nonce()).to.equal(before);
      });
    }
  });

  describe("after all the calls above", function () {
    it("has logged every request without a key in sight", function () {
      expect(logs.records().filter((r) => r.msg === "request completed").length).to.be.greaterThan(30);
      expect(logs.text).not.to.include(KEY);
      expect(logs.text).not.to.include("wrong-key-0123456789");
      expect(logs.text).not.to.include(hardhatAccount(EXCHANGE_ACCOUNT).privateKey.slice(2));
    });
  });
});

describe("production mode (RPC_URL) on an existing chain", function () {
  it("trades on the chain named by RPC_URL with the addresses of DEPLOYMENT_FILE and the key of EXCHANGE_PRIVATE_KEYS", async function () {
    const dir = mkdtempSync(join(tmpdir(), "prod-"));
    const chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
    let service: RunningService | undefined;
    try {
      const file = join(dir, "deployment.json");
      writeFileSync(file, JSON.stringify(chain.addresses));
      service = await startService({
        env: {
          RPC_URL: chain.rpcUrl,
          DEPLOYMENT_FILE: file,
          EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
          API_KEYS: KEY,
          PORT: "0",
          METRICS_PORT: String(await freePort()),
          DATA_DIR: dir,
        },
        log: defaultLog(),
        rootDir: dir,
      });
      expect(service.mode).to.equal("rpc");
      expect(service.deploymentFile).to.equal(undefined);
      const res = await postJson(
        `${service.apiUrl}/api/v1/token/sell`,
        {
          userAddress: chain.exchangeWallet.address,
          destinatary: CUSTOMER,
          amount: "1",
          usdAddress: chain.addresses.stableCoins.USDT,
        },
        { apiKey: KEY },
      );
      expect(res.status, res.text).to.equal(200);
      expect(Object.keys(res.body.events)).to.have.length(5);
    } finally {
      await service?.close();
      await chain.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
