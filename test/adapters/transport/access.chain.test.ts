/**
 * The access file on real chains, EDR and anvil, with the service as an operator runs it (RPC_URL,
 * DEPLOYMENT_FILE, metrics and access logs on): every role and scope refused over JSON and gRPC,
 * each limit kind exactly at its cap and one base unit over, the rolling window giving room back,
 * the denylist, expiry and allowFrom, reads that follow `sees`, and reloads with the service
 * running. Every refusal leaves the exchange wallet's nonce where it was.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import * as grpc from "@grpc/grpc-js";
import { expect } from "chai";
import { JsonRpcProvider } from "ethers";
import { pino } from "pino";

import type { DeploymentAddresses } from "../../../adapters/chain/index.js";
import { startService, type RunningService } from "../../../adapters/main.js";
import { EXCHANGE_ACCOUNT, hardhatAccount, startEmbeddedChain } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil } from "../../helpers/anvil.js";
import { defaultLog, freePort } from "../../helpers/service-defaults.js";
import { waitFor } from "../../helpers/wait.js";
import { getJson, grpcCall, grpcClient, type GrpcServiceClient, type JsonBody, postJson } from "./helpers.js";

interface Node {
  url: string;
  addresses: DeploymentAddresses;
  close(): Promise<void>;
}

const NODES: Array<[string, () => Promise<Node>]> = [
  [
    "EDR",
    async () => {
      const chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
      return { url: chain.rpcUrl, addresses: chain.addresses, close: () => chain.close() };
    },
  ],
  [
    "anvil",
    async () => {
      const anvil = await startAnvil();
      const addresses = await deployOnAnvil(anvil, 0);
      await anvil.rpc("evm_setAutomine", [true]);
      return { url: anvil.url, addresses, close: () => anvil.stop() };
    },
  ],
];

const sha = (key: string) => createHash("sha256").update(key).digest("hex");
/** One key per role or scope; each name is its key's own prefix. */
const KEYS = {
  trader: "trader-key-0123456789abcdef",
  desk: "desk-key-0123456789abcdefgh",
  deskB: "desk-b-key-0123456789abcdef",
  viewer: "viewer-key-0123456789abcdef",
  approver: "approver-key-0123456789abc",
  admin: "admin-key-0123456789abcdefg",
  expired: "expired-key-0123456789abcde",
  remote: "remote-key-0123456789abcdef",
  local: "local-key-0123456789abcdefg",
} as const;
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const SECOND = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";
const DENIED = "0x8589427373D6D84E98730D7795D8f6f8731FDA16";
const WALLET = hardhatAccount(EXCHANGE_ACCOUNT);
/** An exchange wallet of the service's that no trade here may use (unfunded): the wallets scope's other side. */
const WALLET_B = hardhatAccount(5);
/** One DAI base unit (18 decimals), and one USDC base unit (6). */
const DAI_UNIT = "0.000000000000000001";
const USDC_UNIT = "0.000001";

for (const [name, start] of NODES) {
  describe(`the access file on ${name}`, function () {
    this.timeout(180_000);
    let node: Node;
    let service: RunningService | undefined;
    let provider: JsonRpcProvider;
    let dir: string;
    let file: string;
    let client: GrpcServiceClient | undefined;
    let DAI: string;
    let USDC: string;

    const keys = (overrides: Record<string, Record<string, unknown>> = {}) => [
      { name: "trader", sha256: sha(KEYS.trader), roles: ["trader"], ...overrides.trader },
      {
        name: "desk",
        sha256: sha(KEYS.desk),
        roles: ["trader"],
        kinds: ["sell", "buy"],
        wallets: [WALLET.address],
        coins: [DAI],
        destinataries: [CUSTOMER, SECOND],
        ...overrides.desk,
      },
      { name: "desk-b", sha256: sha(KEYS.deskB), roles: ["trader"], wallets: [WALLET_B.address] },
      { name: "viewer", sha256: sha(KEYS.viewer), roles: ["viewer"], sees: ["desk"] },
      { name: "approver", sha256: sha(KEYS.approver), roles: ["approver"] },
      { name: "admin", sha256: sha(KEYS.admin), roles: ["admin"] },
      { name: "expired", sha256: sha(KEYS.expired), roles: ["trader"], expiresAt: "2026-01-01T00:00:00Z" },
      { name: "remote", sha256: sha(KEYS.remote), roles: ["trader"], allowFrom: ["10.0.0.0/8"] },
      { name: "local", sha256: sha(KEYS.local), roles: ["trader"], allowFrom: ["127.0.0.0/8", "::1"] },
    ];

    /** Writes the access file as a configuration tool would: beside it, then renamed over it. */
    const writeAccess = (document: object) => {
      writeFileSync(`${file}.new`, JSON.stringify(document));
      renameSync(`${file}.new`, file);
    };

    /** A service with a journal of its own (no earlier test's spends), under `document`. */
    async function serve(document: object): Promise<RunningService> {
      client?.close();
      await service?.close();
      writeAccess(document);
      const data = mkdtempSync(join(dir, "data-"));
      const deployment = join(dir, "deployment.json");
      service = await startService({
        env: {
          RPC_URL: node.url,
          DEPLOYMENT_FILE: deployment,
          EXCHANGE_PRIVATE_KEYS: `${WALLET.privateKey},${WALLET_B.privateKey}`,
          ACCESS_FILE: file,
          PORT: "0",
          METRICS_PORT: String(await freePort()),
          DATA_DIR: data,
        },
        log: defaultLog(),
        rootDir: dir,
      });
      client = grpcClient(service.apiUrl);
      return service;
    }

    before(async function () {
      node = await start();
      dir = mkdtempSync(join(tmpdir(), "access-chain-"));
      file = join(dir, "access.json");
      writeFileSync(join(dir, "deployment.json"), JSON.stringify(node.addresses));
      writeFileSync(join(dir, "denied.txt"), `# sanctioned\n${DENIED}\n`);
      provider = new JsonRpcProvider(node.url, undefined, { staticNetwork: true, cacheTimeout: -1 });
      DAI = node.addresses.stableCoins.DAI;
      USDC = node.addresses.stableCoins.USDC;
    });

    after(async function () {
      client?.close();
      await service?.close();
      provider?.destroy();
      await node?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const nonce = () => provider.getTransactionCount(WALLET.address, "pending");
    const body = (amount: string, usdAddress: string, destinatary = CUSTOMER, wallet = WALLET.address) => ({
      userAddress: wallet,
      destinatary,
      amount,
      usdAddress,
    });
    const post = (path: string, key: string, payload: object) =>
      postJson(`${service!.apiUrl}${path}`, payload, { apiKey: key });
    const buy = (key: string, amount: string, usdAddress = DAI, destinatary = CUSTOMER) =>
      post("/api/v1/token/buy", key, body(amount, usdAddress, destinatary));
    const grpcTrade = (method: string, key: string, payload: ReturnType<typeof body>) =>
      grpcCall(
        client!,
        method,
        {
          user_address: payload.userAddress,
          destinatary: payload.destinatary,
          amount: payload.amount,
          usd_address: payload.usdAddress,
        },
        key,
      );

    /** A refusal over JSON and over gRPC, with nothing sent. */
    async function refusedEverywhere(
      path: string,
      method: string,
      key: string,
      payload: ReturnType<typeof body>,
      expected: { status: number; code: string; grpc: grpc.status; message: RegExp },
    ): Promise<JsonBody> {
      const before = await nonce();
      const json = await post(path, key, payload);
      expect(json.status, json.text).to.equal(expected.status);
      expect(json.body.code).to.equal(expected.code);
      expect(json.body.message).to.match(expected.message);
      const rpc = await grpcTrade(method, key, payload);
      expect(rpc.error?.code, rpc.error?.message).to.equal(expected.grpc);
      expect(rpc.error!.details).to.match(expected.message);
      expect(await nonce(), "nothing was sent").to.equal(before);
      return json;
    }

    describe("roles and scopes", function () {
      before(async function () {
        await serve({ keys: keys(), denylist: "denied.txt" });
      });

      it("lets only a trader trade: a viewer, an approver and an admin are refused, naming the key and the role", async function () {
        for (const role of ["viewer", "approver", "admin"] as const) {
          await refusedEverywhere("/api/v1/token/buy", "Buy", KEYS[role], body("5", DAI), {
            status: 403,
            code: "permission_denied",
            grpc: grpc.status.PERMISSION_DENIED,
            message: new RegExp(`^api key "${role}" may not trade: its roles are ${role} \\(trading needs trader\\)$`),
          });
        }
        const ok = await buy(KEYS.trader, "5");
        expect(ok.status, ok.text).to.equal(200);
        expect(ok.body.status).to.equal(true);
      });

      it("refuses each scope by name: the kind, the wallet, the coin and the destinatary", async function () {
        await refusedEverywhere("/api/v1/remmitance", "Remittance", KEYS.desk, body("5", DAI), {
          status: 403,
          code: "permission_denied",
          grpc: grpc.status.PERMISSION_DENIED,
          message: /^api key "desk" may not send remittances: its kinds are sell, buy$/,
        });
        await refusedEverywhere("/api/v1/token/buy", "Buy", KEYS.deskB, body("5", DAI), {
          status: 403,
          code: "permission_denied",
          grpc: grpc.status.PERMISSION_DENIED,
          message: new RegExp(
            `^userAddress: api key "desk-b" may not send from ${WALLET.address} \\(not among its wallets\\)$`,
          ),
        });
        await refusedEverywhere("/api/v1/token/sell", "Sell", KEYS.desk, body("5", USDC), {
          status: 403,
          code: "permission_denied",
          grpc: grpc.status.PERMISSION_DENIED,
          message: new RegExp(`^usdAddress: api key "desk" may not use USDC ${USDC} \\(not among its coins\\)$`),
        });
        const stranger = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65";
        await refusedEverywhere("/api/v1/token/buy", "Buy", KEYS.desk, body("5", DAI, stranger), {
          status: 403,
          code: "permission_denied",
          grpc: grpc.status.PERMISSION_DENIED,
          message: new RegExp(
            `^destinatary: api key "desk" may not pay ${stranger} \\(not among its destinataries\\)$`,
          ),
        });
        // Within every scope, the desk trades.
        const sold = await post("/api/v1/token/sell", KEYS.desk, body("2", DAI, SECOND));
        expect(sold.status, sold.text).to.equal(200);
      });

      it("refuses a trade to a denylisted destinatary, and a quote naming one says so", async function () {
        await refusedEverywhere("/api/v1/token/buy", "Buy", KEYS.trader, body("5", DAI, DENIED), {
          status: 403,
          code: "permission_denied",
          grpc: grpc.status.PERMISSION_DENIED,
          message: new RegExp(`^destinatary: ${DENIED} is on the denylist; no trade may pay it$`),
        });
        const before = await nonce();
        const quote = await post("/api/v1/token/quote", KEYS.trader, {
          kind: "buy",
          amount: "5",
          usdAddress: DAI,
          destinatary: DENIED,
          userAddress: WALLET.address,
        });
        expect(quote.status, quote.text).to.equal(200);
        expect(quote.body.issues.map((i: { type: string }) => i.type)).to.deep.equal(["destinatary_denied"]);
        expect(await nonce()).to.equal(before);
      });

      it("refuses an expired key and one used from elsewhere exactly as a wrong key, and counts why", async function () {
        for (const key of [KEYS.expired, KEYS.remote, "no-such-key-0123456789abcdef"]) {
          const before = await nonce();
          const json = await buy(key, "5");
          expect(json.status).to.equal(401);
          expect(json.body).to.deep.equal({ code: "unauthenticated", message: "invalid api_key" });
          const rpc = await grpcTrade("Buy", key, body("5", DAI));
          expect(rpc.error?.code).to.equal(grpc.status.UNAUTHENTICATED);
          expect(await nonce()).to.equal(before);
        }
        // From an address it may use, it trades.
        expect((await buy(KEYS.local, "5")).status).to.equal(200);
        const metrics = await (await fetch(service!.metricsUrl!)).text();
        expect(metrics).to.match(/token_service_access_refusals_total\{reason="key_expired",limit=""\} 2/);
        expect(metrics).to.match(/token_service_access_refusals_total\{reason="key_address",limit=""\} 2/);
        expect(metrics).to.match(/token_service_access_refusals_total\{reason="role",limit=""\} [1-9]/);
      });

      it("answers reads as `sees` says: a viewer reads the desk's trades and no other's, an admin every trade", async function () {
        const desk = await post("/api/v1/token/buy", KEYS.desk, body("3", DAI, SECOND));
        const other = await buy(KEYS.trader, "4");
        expect([desk.status, other.status]).to.deep.equal([200, 200]);
        const read = (key: string, path: string) => getJson(`${service!.apiUrl}${path}`, { apiKey: key });
        const deskTrade = await read(KEYS.viewer, `/api/v1/trades/${desk.body.transactionHash}`);
        expect(deskTrade.status).to.equal(200);
        expect(deskTrade.body.apiKeyName).to.equal("desk");
        expect((await read(KEYS.viewer, `/api/v1/trades/${other.body.transactionHash}`)).status).to.equal(404);
        const viewed = await read(KEYS.viewer, "/api/v1/trades?limit=100");
        expect(new Set(viewed.body.trades.map((t: { apiKeyName: string }) => t.apiKeyName))).to.deep.equal(
          new Set(["desk"]),
        );
        const all = await read(KEYS.admin, "/api/v1/trades?limit=100");
        const names = new Set(all.body.trades.map((t: { apiKeyName: string }) => t.apiKeyName));
        expect(names.has("desk") && names.has("trader")).to.equal(true);
        const byGrpc = await grpcCall(
          client!,
          "GetTrade",
          { transaction_hash: other.body.transactionHash },
          KEYS.admin,
        );
        expect(byGrpc.response?.api_key_name).to.equal("trader");
        // The trader reads its own, and not the desk's.
        expect((await read(KEYS.trader, `/api/v1/trades/${desk.body.transactionHash}`)).status).to.equal(404);
      });
    });

    /** A spending limit's refusal over JSON and gRPC: 429 resource_exhausted naming it, nothing sent. */
    async function overTheLimit(
      key: string,
      payload: ReturnType<typeof body>,
      limit: RegExp,
      path = "/api/v1/token/buy",
    ) {
      const json = await refusedEverywhere(path, path.endsWith("sell") ? "Sell" : "Buy", key, payload, {
        status: 429,
        code: "resource_exhausted",
        grpc: grpc.status.RESOURCE_EXHAUSTED,
        message: limit,
      });
      return json;
    }

    describe("spending limits", function () {
      it("holds a per-key limit exactly at its cap, and refuses one base unit more, with Retry-After", async function () {
        await serve({
          keys: keys(),
          limits: [{ name: "desk daily", per: "key", keys: ["desk"], window: "24h", maxUsd: "50" }],
        });
        expect((await post("/api/v1/token/buy", KEYS.desk, body("25", DAI))).status).to.equal(200);
        const over = await overTheLimit(
          KEYS.desk,
          body(`25${DAI_UNIT.slice(1)}`, DAI),
          /^spending limit "desk daily" \(per key desk, rolling 24h\): 25 of 50 USD used, this trade counts 25\.000000000000000001 USD; the window frees enough room in \d+ s$/,
        );
        const retry = Number(over.headers.get("retry-after"));
        expect(retry).to.be.within(86_300, 86_400);
        // Another key is not counted by the desk's limit.
        expect((await buy(KEYS.trader, "60")).status).to.equal(200);
        const exact = await post("/api/v1/token/buy", KEYS.desk, body("25", DAI));
        expect(exact.status, exact.text).to.equal(200);
      });

      it("holds a per-destinatary, a per-wallet and a whole-service limit, each at its cap and one base unit over", async function () {
        const limits = (walletMax: string) => [
          { name: "customer hourly", per: "destinatary", window: "1h", maxUsd: "16" },
          { name: "hot wallet hourly", per: "wallet", window: "1h", maxUsd: walletMax },
          { name: "service hourly", per: "all", window: "1h", maxUsd: "45" },
        ];
        await serve({ keys: keys(), limits: limits("30") });
        const over = (amount: string) => `${amount}${USDC_UNIT.slice(1)}`; // one USDC base unit more
        const third = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955";
        const fourth = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f";
        expect((await buy(KEYS.trader, "8", USDC)).status).to.equal(200);
        await overTheLimit(
          KEYS.trader,
          body(over("8"), USDC),
          /^spending limit "customer hourly" \(per destinatary 0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc, rolling 1h\): 8 of 16 USD used, this trade counts 8\.000001 USD/,
        );
        expect((await buy(KEYS.trader, "8", USDC)).status, "exactly at the cap").to.equal(200);
        expect((await buy(KEYS.trader, "8", USDC, SECOND)).status).to.equal(200);
        await overTheLimit(
          KEYS.trader,
          body(over("6"), USDC, third),
          /^spending limit "hot wallet hourly" \(per wallet 0x70997970c51812dc3a010c7d01b50e0d17dc79c8, rolling 1h\): 24 of 30 USD used, this trade counts 6\.000001 USD/,
        );
        expect((await buy(KEYS.trader, "6", USDC, third)).status, "exactly at the cap").to.equal(200);
        const metrics = await (await fetch(service!.metricsUrl!)).text();
        expect(metrics).to.include(
          'token_service_spending_limit_highest_use_ratio{limit="hot wallet hourly",measure="usd"} 1\n',
        );
        expect(metrics).to.include(
          'token_service_spending_limit_highest_use_ratio{limit="customer hourly",measure="usd"} 1\n',
        );
        // The wallet's limit raised by a reload, the service's is the one that refuses.
        writeAccess({ keys: keys(), limits: limits("1000") });
        await waitFor(
          "the raised limit in force",
          async () =>
            /hot wallet hourly",measure="usd"\} 0\.03\n/.test(await (await fetch(service!.metricsUrl!)).text()),
          5_000,
          100,
        );
        await overTheLimit(
          KEYS.trader,
          body(over("15"), USDC, fourth),
          /^spending limit "service hourly" \(for the whole service, rolling 1h\): 30 of 45 USD used, this trade counts 15\.000001 USD/,
        );
        expect((await buy(KEYS.trader, "15", USDC, fourth)).status, "exactly at the cap").to.equal(200);
      });

      it("counts trades against maxTrades, and a sell by its stable-coin payout", async function () {
        await serve({
          keys: keys(),
          limits: [
            { name: "desk trades", per: "key", keys: ["desk"], window: "1h", maxTrades: 2 },
            { name: "trader usd", per: "key", keys: ["trader"], window: "1h", maxUsd: "10" },
          ],
        });
        expect((await post("/api/v1/token/buy", KEYS.desk, body("1", DAI))).status).to.equal(200);
        expect((await post("/api/v1/token/sell", KEYS.desk, body("1", DAI))).status).to.equal(200);
        await overTheLimit(
          KEYS.desk,
          body("1", DAI),
          /^spending limit "desk trades" \(per key desk, rolling 1h\): 2 of 2 trades used/,
        );
        // 4 tokens at 1.25 USD pay 5 DAI: counted at the price route's rate rounded up when accepted, then at the proven 5.
        const sold = await post("/api/v1/token/sell", KEYS.trader, body("4", DAI));
        expect(sold.status, sold.text).to.equal(200);
        await overTheLimit(
          KEYS.trader,
          body("5", DAI),
          /^spending limit "trader usd" \(per key trader, rolling 1h\): 5 of 10 USD used, this trade counts 6\.25\d* USD/,
          "/api/v1/token/sell",
        );
      });

      it("gives a trade's room back when it leaves the rolling window", async function () {
        await serve({ keys: keys(), limits: [{ name: "burst", per: "key", window: "4s", maxUsd: "30" }] });
        expect((await buy(KEYS.trader, "20")).status).to.equal(200);
        const over = await overTheLimit(
          KEYS.trader,
          body("20", DAI),
          /^spending limit "burst" \(per key trader, rolling 4s\): 20 of 30 USD used, this trade counts 20 USD; the window frees enough room in [1-4] s$/,
        );
        const retry = Number(over.headers.get("retry-after"));
        expect(retry).to.be.within(1, 4);
        await new Promise((resolve) => setTimeout(resolve, retry * 1000 + 100));
        expect((await buy(KEYS.trader, "20")).status).to.equal(200);
      });

      it("answers a trade alone over the maximum without Retry-After: waiting never helps", async function () {
        await serve({ keys: keys(), limits: [{ name: "small", per: "all", window: "1h", maxUsd: "5" }] });
        const over = await overTheLimit(
          KEYS.trader,
          body("6", DAI),
          /^spending limit "small" \(for the whole service, rolling 1h\): 0 of 5 USD used, this trade counts 6 USD; the trade alone is over the maximum$/,
        );
        expect(over.headers.get("retry-after")).to.equal(null);
      });
    });

    describe("reloads with the service running", function () {
      it("refuses a removed key, accepts an added one, expires one on time, and keeps the old file when the new one is invalid", async function () {
        await serve({ keys: keys() });
        expect((await buy(KEYS.trader, "1")).status).to.equal(200);
        const fresh = "fresh-key-0123456789abcdefg";
        const soon = new Date(Date.now() + 6_000).toISOString();
        writeAccess({
          keys: [
            ...keys().filter((k) => k.name !== "trader"),
            { name: "fresh", sha256: sha(fresh), roles: ["trader"], expiresAt: soon },
          ],
        });
        const started = Date.now();
        await waitFor("the trader key refused", async () => (await buy(KEYS.trader, "1")).status === 401, 2_000, 100);
        expect(Date.now() - started).to.be.below(2_000);
        expect((await buy(fresh, "1")).status).to.equal(200);
        await waitFor("the fresh key expired", async () => (await buy(fresh, "1")).status === 401, 10_000, 250);
        // An invalid file is refused whole: the one in force stays.
        writeFileSync(file, '{"keys": [{"name": "desk", "roles": ["trader"]}]}');
        await waitFor(
          "the refusal counted",
          async () =>
            /token_service_access_file_reload_failures_total 1/.test(await (await fetch(service!.metricsUrl!)).text()),
          3_000,
          100,
        );
        expect((await post("/api/v1/token/buy", KEYS.desk, body("1", DAI))).status).to.equal(200);
        expect((await buy(KEYS.trader, "1")).status).to.equal(401);
      });
    });
  });
}
