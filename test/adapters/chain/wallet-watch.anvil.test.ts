/**
 * Issue 40, item 2's "done when", on anvil (1 s blocks): the wallet's gas money watched against
 * WATCH_NATIVE_MIN fires `wallet.balance_low` once when it falls below, stays quiet while it hovers
 * between the threshold and 120 % of it (up and down again), and clears with `wallet.balance_ok`
 * once at 120 %; the gauges and /readyz say so meanwhile. The swap's reserves against a threshold
 * above them raise `swap.reserves_low` at the first reading. Events reach the admin's endpoint,
 * with no trade. The service runs as `npm start` runs it, with an access file.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { pino } from "pino";

import { startService, type RunningService } from "../../../adapters/main.js";
import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { anvilServiceEnv } from "../../helpers/anvil-service.js";
import { freePort } from "../../helpers/service-defaults.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { type CarriedCall, callsCarried, isBatchedCall } from "../../helpers/eth-calls.js";
import { startRpcProxy, type RpcProxy } from "../../helpers/rpc-proxy.js";
import { callSimulatorAbi } from "../../../gen/abi/index.js";
import { Interface } from "ethers";
import { getJson, LogSink, postJson } from "../transport/helpers.js";

const EXCHANGE = hardhatAccount(1);
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const KEYS = { desk: "watch-desk-key-0123456789abcdefgh", ops: "watch-ops-key-0123456789abcdefghij" };
const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const ETHER = 10n ** 18n;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The selector of the simulator's nativeBalance read: the watch's, riding. */
const NATIVE_BALANCE = new Interface(callSimulatorAbi).getFunction("nativeBalance")!.selector;

describe("the wallet watch on anvil (1 s blocks)", function () {
  this.timeout(180_000);
  let anvil: Anvil | undefined;
  let service: RunningService | undefined;
  let receiver: WebhookReceiver | undefined;
  let dir: string | undefined;
  let proxy: RpcProxy | undefined;

  afterEach(async function () {
    await service?.close();
    await proxy?.close();
    await receiver?.close();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("warns once when the gas money falls below WATCH_NATIVE_MIN, and clears once at 120 % of it", async function () {
    anvil = await startAnvil({ blockTime: 1 });
    receiver = await startWebhookReceiver();
    const addresses = await deployOnAnvil(anvil, 1000);
    dir = mkdtempSync(join(tmpdir(), "anvil-watch-"));
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
    writeFileSync(
      join(dir, "webhooks.json"),
      JSON.stringify({
        endpoints: [{ apiKeyId: sha(KEYS.ops).slice(0, 32), url: receiver.url, secrets: [receiver.secret] }],
      }),
    );
    const { API_KEYS: _none, ...base } = anvilServiceEnv(anvil, dir, KEYS.desk, EXCHANGE.privateKey);
    // What the service asks of the node while `counting`: each batched eth_call's reads and proofs, and the nonce reads.
    proxy = await startRpcProxy(anvil.url);
    const batches: CarriedCall[][] = [];
    let nonceReads = 0;
    let counting = false;
    proxy.intercept((calls) => {
      if (!counting) return "pass";
      for (const call of calls) {
        if (isBatchedCall(call.method, call.params)) batches.push(callsCarried(call.method, call.params));
        if (call.method === "eth_getTransactionCount") nonceReads += 1;
      }
      return "pass";
    });
    const logs = new LogSink();
    service = await startService({
      env: {
        ...base,
        RPC_URL: proxy.url,
        ACCESS_FILE: join(dir, "access.json"),
        WEBHOOKS_FILE: join(dir, "webhooks.json"),
        WEBHOOK_ALLOW_INSECURE: "true",
        WEBHOOK_ALLOW_PRIVATE: "true",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: join(dir, "data"),
        WATCH_NATIVE_MIN: "5000",
        // Far above what the swap holds: raised at the first reading.
        WATCH_RESERVES_USDC_MIN: "1000000000000.5",
      },
      log: pino({ level: "info" }, logs),
    });
    const s = service;
    const chain = anvil;
    const r = receiver;
    const setBalance = (ether: bigint) =>
      chain.rpc("anvil_setBalance", [EXCHANGE.address, `0x${(ether * ETHER).toString(16)}`]);
    const balanceEvents = () => r.received.filter((e) => e.type.startsWith("wallet.balance_")).map((e) => e.type);
    const metric = async (name: string) => {
      const text = await (await fetch(s.metricsUrl!)).text();
      const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
      return line === undefined ? undefined : Number(line.split(" ").at(-1));
    };

    await r.until(() => r.received.some((e) => e.type === "swap.reserves_low"));
    const reserves = r.received.find((e) => e.type === "swap.reserves_low")!;
    expect(reserves.data).to.deep.include({ swap: addresses.swap, asset: "USDC", setting: "WATCH_RESERVES_USDC_MIN" });
    expect(reserves.data.threshold).to.deep.equal({ value: "1000000000000.5", baseUnits: "1000000000000500000" });
    expect(reserves.data.clearsAt).to.deep.equal({ value: "1200000000000.6", baseUnits: "1200000000000600000" });
    expect(await metric("token_service_swap_reserves_low")).to.equal(1);
    expect(await metric("token_service_wallet_trades_left")).to.be.greaterThan(1000);
    expect(balanceEvents(), "10000 ether: above").to.deep.equal([]);

    await setBalance(4000n);
    await r.until(() => balanceEvents().length === 1);
    const low = r.received.find((e) => e.type === "wallet.balance_low")!;
    expect(low.data).to.deep.include({ wallet: EXCHANGE.address, asset: "native", setting: "WATCH_NATIVE_MIN" });
    expect(low.data.balance).to.deep.equal({ value: "4000", baseUnits: (4000n * ETHER).toString() });
    expect(low.data.clearsAt).to.deep.equal({ value: "6000", baseUnits: (6000n * ETHER).toString() });
    expect(await metric("token_service_wallet_balance_low")).to.equal(1);
    const ready = await getJson(`${s.apiUrl}/readyz`, { apiKey: null });
    expect(ready.body.detail).to.include("native 4000 (low, under 5000)");
    expect(logs.text).to.match(/wallet\.balance_low: below 5000/);

    // Back over the threshold but under 120 % of it, then under again: still the one alarm.
    for (const ether of [5500n, 4500n, 5999n]) {
      await setBalance(ether);
      await sleep(2_500);
      expect(balanceEvents(), `${ether} ether`).to.deep.equal(["wallet.balance_low"]);
    }
    await setBalance(6000n);
    await r.until(() => balanceEvents().length === 2);
    expect(await metric("token_service_wallet_balance_low")).to.equal(0);
    // Under 120 % again, above the threshold: no new alarm.
    await setBalance(5500n);
    await sleep(2_500);
    expect(balanceEvents()).to.deep.equal(["wallet.balance_low", "wallet.balance_ok"]);
    const ok = r.received.find((e) => e.type === "wallet.balance_ok")!;
    expect(ok.data.balance).to.deep.equal({ value: "6000", baseUnits: (6000n * ETHER).toString() });
    const deliveries = await getJson(`${s.apiUrl}/api/v1/webhooks/deliveries`, { apiKey: KEYS.ops });
    for (const delivery of deliveries.body.deliveries) expect(delivery.tradeId, delivery.type).to.equal(null);
    // The wallet still trades: an alarm warns, it stops nothing. While sells run one after the
    // other, the watch's reads ride their eth_call (the proof's): no eth_call or nonce read of its own.
    const sell = () =>
      postJson(
        `${s.apiUrl}/api/v1/token/sell`,
        { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount: "2", usdAddress: addresses.stableCoins.USDC },
        { apiKey: KEYS.desk },
      );
    const warm = await sell(); // its allowance top-up, its first gas figures
    expect(warm.status, warm.text).to.equal(200);
    const watchedBlock = async () =>
      Number(/watch at block (\d+)/.exec((await getJson(`${s.apiUrl}/readyz`, { apiKey: null })).body.detail)![1]);
    const fromBlock = await watchedBlock();
    counting = true;
    let lastBlock = 0;
    for (let i = 0; i < 5; i++) {
      const sold = await sell();
      expect(sold.status, sold.text).to.equal(200);
      lastBlock = sold.body.blockNumber;
    }
    counting = false;
    const proofs = batches.filter((carried) => carried.some((call) => call.from !== undefined));
    const alone = batches.filter((carried) => carried.every((call) => call.from === undefined));
    const rode = proofs.filter((carried) => carried.some((call) => call.data?.startsWith(NATIVE_BALANCE)));
    expect(proofs, "a batched eth_call per sell").to.have.length(5);
    // Most ride; a sell whose proof came before the watch saw its block goes without them. On a
    // loaded machine one gap between two sells may let the watch read on its own, once.
    expect(rode.length, "sells whose eth_call carried the watch's reads").to.be.at.least(3);
    expect(alone.length, "readings of the watch's own").to.be.at.most(1);
    expect(nonceReads, "nonce reads while the watcher read every block").to.be.at.most(alone.length);
    expect(await watchedBlock(), "the watch read along").to.be.at.least(Math.max(fromBlock + 3, lastBlock - 2));
  });
});
