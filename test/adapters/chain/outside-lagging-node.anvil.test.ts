/**
 * An outside transaction seen in a block's receipts while a trade is in flight, whose lookup by
 * hash a lagging endpoint answers null: the wallet's nonce is read again and explains it, so it
 * is still reported (log line) and, under OUTSIDE_TX_POLICY=pause, the wallet paused (anvil, 1 s
 * blocks, an RPC proxy between the service and the node).
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { JsonRpcProvider, parseEther, Transaction, Wallet } from "ethers";
import { pino } from "pino";

import { startService, type RunningService } from "../../../adapters/main.js";
import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { anvilServiceEnv } from "../../helpers/anvil-service.js";
import { startRpcProxy, type RpcProxy } from "../../helpers/rpc-proxy.js";
import { freePort } from "../../helpers/service-defaults.js";
import { waitFor } from "../../helpers/wait.js";
import { LogSink, postJson } from "../transport/helpers.js";

const EXCHANGE = hardhatAccount(1);
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const KEYS = { desk: "outside-desk-key-0123456789abcdef", ops: "outside-ops-key-0123456789abcdefgh" };
const sha = (key: string) => createHash("sha256").update(key).digest("hex");

describe("an outside transaction a lagging node does not know by its hash (anvil)", function () {
  this.timeout(180_000);
  let anvil: Anvil;
  let proxy: RpcProxy;
  let service: RunningService | undefined;
  let dir: string;
  let chain: JsonRpcProvider;
  let key: Wallet;
  let logs: LogSink;
  let addresses: Awaited<ReturnType<typeof deployOnAnvil>>;

  const start = async (env: Record<string, string> = {}) => {
    const { API_KEYS: _none, ...base } = anvilServiceEnv(anvil, dir, KEYS.desk, EXCHANGE.privateKey);
    logs = new LogSink();
    service = await startService({
      env: {
        ...base,
        RPC_URL: proxy.url,
        ACCESS_FILE: join(dir, "access.json"),
        METRICS_PORT: String(await freePort()),
        DATA_DIR: join(dir, "data"),
        OUTSIDE_TX_POLICY: "pause",
        RECEIPT_TIMEOUT_MS: "30000",
        ...env,
      },
      log: pino({ level: "info" }, logs),
    });
  };
  const sell = () =>
    postJson(
      `${service!.apiUrl}/api/v1/token/sell`,
      { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount: "2", usdAddress: addresses.stableCoins.USDC },
      { apiKey: KEYS.desk },
    );
  const signOutside = async () => {
    const nonce = await chain.getTransactionCount(EXCHANGE.address, "pending");
    const raw = await key.signTransaction(
      await key.populateTransaction({ to: CUSTOMER, value: parseEther("0.01"), nonce }),
    );
    return { raw, hash: Transaction.from(raw).hash!.toLowerCase(), nonce };
  };
  const outsideLines = () => logs.records().filter((r) => String(r.msg).startsWith("outside transaction"));
  const mined = (hash: string) =>
    waitFor("mined", async () => (await anvil.rpc("eth_getTransactionReceipt", [hash])) !== null);

  beforeEach(async function () {
    anvil = await startAnvil({ blockTime: 1 });
    proxy = await startRpcProxy(anvil.url);
    addresses = await deployOnAnvil(anvil, 1000);
    dir = mkdtempSync(join(tmpdir(), "outside-lag-"));
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    writeFileSync(
      join(dir, "access.json"),
      JSON.stringify({
        keys: [
          { name: "desk", sha256: sha(KEYS.desk), roles: ["trader"] },
          { name: "ops", sha256: sha(KEYS.ops), roles: ["admin"] },
        ],
      }),
    );
    chain = new JsonRpcProvider(anvil.url, undefined, { cacheTimeout: -1 });
    key = new Wallet(EXCHANGE.privateKey, chain);
  });

  afterEach(async function () {
    chain.destroy();
    await service?.close();
    service = undefined;
    await proxy.close();
    await anvil.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is still reported, and pauses the wallet, when the node answers its hash null once", async function () {
    await start();
    expect((await sell()).status).to.equal(200);
    await anvil.rpc("evm_setIntervalMining", [0]);
    const pending = sell();
    await waitFor(
      "the sell to be sent",
      async () =>
        (await chain.getTransactionCount(EXCHANGE.address, "pending")) >
        (await chain.getTransactionCount(EXCHANGE.address, "latest")),
    );
    const outside = await signOutside();
    let lagged = 0;
    proxy.rewrite((call, result) => {
      if (call.method === "eth_getTransactionByHash" && String(call.params?.[0]).toLowerCase() === outside.hash) {
        lagged += 1;
        if (lagged === 1) return null; // a lagging endpoint, once
      }
      return result;
    });
    await anvil.rpc("eth_sendRawTransaction", [outside.raw]);
    await anvil.rpc("evm_setIntervalMining", [1]);
    await mined(outside.hash);
    expect((await pending).status).to.equal(200);
    await waitFor("the outside transaction reported", async () => outsideLines().length > 0, 15_000);
    expect(lagged, "the receipts' path looked it up, and got null").to.be.greaterThan(0);
    expect(JSON.stringify(outsideLines()[0])).to.include(outside.hash);
    const nonce = await chain.getTransactionCount(EXCHANGE.address, "latest");
    const after = await sell();
    expect(after.status, after.text).to.equal(503);
    expect(after.body.message).to.include("is paused");
    expect(await chain.getTransactionCount(EXCHANGE.address, "latest"), "the wallet's nonce").to.equal(nonce);
  });
});
