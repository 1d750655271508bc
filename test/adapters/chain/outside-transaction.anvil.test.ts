/**
 * Issue 40, item 3's "done when", on anvil (1 s blocks): a transfer signed with the exchange
 * wallet's key outside the service is detected within one block, while the service is idle (the
 * wallet's nonce read by the watch) and while a trade of its own is in flight (the receipts the
 * block watcher reads of the block that mines both): an error line naming its hash, nonce,
 * recipient and value, the counter, a `wallet.outside_transaction` webhook to the admin's
 * endpoint (none to the trader's), an audit record. With OUTSIDE_TX_POLICY=pause, no further trade
 * from the wallet is signed (503 wallet_paused, its nonce unmoved) until an admin resumes it.
 * The service runs as `npm start` runs it (metrics and access logs on, an access file).
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { JsonRpcProvider, parseEther, Wallet } from "ethers";
import { pino } from "pino";

import { startService, type RunningService } from "../../../adapters/main.js";
import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { anvilServiceEnv } from "../../helpers/anvil-service.js";
import { freePort } from "../../helpers/service-defaults.js";
import { waitFor } from "../../helpers/wait.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { getJson, LogSink, postJson } from "../transport/helpers.js";

const EXCHANGE = hardhatAccount(1);
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const KEYS = { desk: "outside-desk-key-0123456789abcdef", ops: "outside-ops-key-0123456789abcdefgh" };
const sha = (key: string) => createHash("sha256").update(key).digest("hex");

interface Setup {
  anvil: Anvil;
  service: RunningService;
  admin: WebhookReceiver;
  trader: WebhookReceiver;
  logs: LogSink;
  sell(key?: string): ReturnType<typeof postJson>;
  /** A transfer of 0.01 ether to CUSTOMER signed with the wallet's key, not by the service; its hash and nonce. */
  outside(nonce?: number): Promise<{ hash: string; nonce: number }>;
  nonce(tag?: string): Promise<number>;
  metric(name: string): Promise<number>;
  /** Stops the service, runs `meanwhile`, and starts it again on the same data (journal) and chain. */
  restart(meanwhile?: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

async function setUp(env: Record<string, string> = {}): Promise<Setup> {
  const [anvil, admin, trader] = await Promise.all([
    startAnvil({ blockTime: 1 }),
    startWebhookReceiver(),
    startWebhookReceiver(),
  ]);
  const addresses = await deployOnAnvil(anvil, 1000);
  const dir = mkdtempSync(join(tmpdir(), "anvil-outside-"));
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
  const endpoint = (key: string, receiver: WebhookReceiver) => ({
    apiKeyId: sha(key).slice(0, 32),
    url: receiver.url,
    secrets: [receiver.secret],
  });
  writeFileSync(
    join(dir, "webhooks.json"),
    JSON.stringify({ endpoints: [endpoint(KEYS.ops, admin), endpoint(KEYS.desk, trader)] }),
  );
  const { API_KEYS: _none, ...base } = anvilServiceEnv(anvil, dir, KEYS.desk, EXCHANGE.privateKey);
  const logs = new LogSink();
  const serviceEnv = {
    ...base,
    ACCESS_FILE: join(dir, "access.json"),
    WEBHOOKS_FILE: join(dir, "webhooks.json"),
    WEBHOOK_ALLOW_INSECURE: "true",
    WEBHOOK_ALLOW_PRIVATE: "true",
    METRICS_PORT: String(await freePort()),
    DATA_DIR: join(dir, "data"),
    ...env,
  };
  const start = () => startService({ env: serviceEnv, log: pino({ level: "info" }, logs) });
  let service = await start();
  const chain = new JsonRpcProvider(anvil.url, undefined, { cacheTimeout: -1 });
  const key = new Wallet(EXCHANGE.privateKey, chain);
  return {
    anvil,
    get service() {
      return service;
    },
    admin,
    trader,
    logs,
    sell: (apiKey = KEYS.desk) =>
      postJson(
        `${service.apiUrl}/api/v1/token/sell`,
        { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount: "2", usdAddress: addresses.stableCoins.USDC },
        { apiKey },
      ),
    async outside(nonce) {
      const next = nonce ?? (await chain.getTransactionCount(EXCHANGE.address, "pending"));
      const tx = await key.sendTransaction({ to: CUSTOMER, value: parseEther("0.01"), nonce: next });
      return { hash: tx.hash.toLowerCase(), nonce: next };
    },
    nonce: (tag = "pending") => chain.getTransactionCount(EXCHANGE.address, tag),
    async metric(name) {
      const text = await (await fetch(service.metricsUrl!)).text();
      const line = text.split("\n").find((l) => l.startsWith(name));
      return line === undefined ? 0 : Number(line.split(" ").at(-1));
    },
    async restart(meanwhile) {
      await service.close();
      await meanwhile?.();
      service = await start();
    },
    async close() {
      chain.destroy();
      await service.close();
      await Promise.all([admin.close(), trader.close()]);
      await anvil.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The block `hash` was mined in, once it is. */
async function minedIn(s: Setup, hash: string): Promise<number> {
  let block = 0;
  await waitFor("the outside transfer to be mined", async () => {
    const receipt = await s.anvil.rpc<{ blockNumber: string } | null>("eth_getTransactionReceipt", [hash]);
    if (receipt !== null) block = Number(receipt.blockNumber);
    return receipt !== null;
  });
  return block;
}

/** Waits for the error line about `hash`; answers the head when it was written, and the line. */
async function detected(s: Setup, hash: string): Promise<{ head: number; line: Record<string, unknown> }> {
  let found: Record<string, unknown> | undefined;
  let head = 0;
  await waitFor(
    "the outside transaction's error line",
    async () => {
      found = s.logs.records().find((r) => r.hash === hash && String(r.msg).startsWith("outside transaction"));
      if (found !== undefined) head = Number(await s.anvil.rpc<string>("eth_blockNumber"));
      return found !== undefined;
    },
    15_000,
  );
  return { head, line: found! };
}

describe("a transaction signed with the wallet's key outside the service (anvil, 1 s blocks)", function () {
  this.timeout(180_000);
  let setup: Setup | undefined;

  afterEach(async function () {
    await setup?.close();
    setup = undefined;
  });

  it("is detected within one block, idle or with a trade in flight: error line, counter, webhook, audit record", async function () {
    // The sell in flight waits for its receipt through the block watcher (not 504 after 1 s).
    setup = await setUp({ RECEIPT_TIMEOUT_MS: "30000" });
    const s = setup;
    const first = await s.sell();
    expect(first.status, first.text).to.equal(200);

    // Idle: only the watch's reading (the wallet's nonce) can see it.
    const idle = await s.outside();
    const idleBlock = await minedIn(s, idle.hash);
    const seenIdle = await detected(s, idle.hash);
    expect(seenIdle.head, "detected before the next block but one").to.be.at.most(idleBlock + 1);
    expect(seenIdle.line).to.include({
      level: 50,
      wallet: EXCHANGE.address.toLowerCase(),
      nonce: idle.nonce,
      to: CUSTOMER.toLowerCase(),
      value: parseEther("0.01").toString(),
      block: idleBlock,
      policy: "alert",
      seen: "nonce",
    });
    expect(s.logs.text).to.not.include(EXCHANGE.privateKey.slice(2));

    // Busy: a sell waits unmined, the transfer takes the nonce after it, one block mines both.
    await s.anvil.rpc("evm_setIntervalMining", [0]);
    const pending = s.sell();
    await waitFor("the sell to be sent", async () => (await s.nonce()) > (await s.nonce("latest")));
    const busy = await s.outside();
    await s.anvil.rpc("evm_setIntervalMining", [1]);
    const busyBlock = await minedIn(s, busy.hash);
    const sold = await pending;
    expect(sold.status, sold.text).to.equal(200);
    expect(sold.body.blockNumber, "mined with the transfer").to.equal(busyBlock);
    const seenBusy = await detected(s, busy.hash);
    expect(seenBusy.head).to.be.at.most(busyBlock + 1);
    expect(seenBusy.line).to.include({ nonce: busy.nonce, block: busyBlock, seen: "block receipts" });

    // One series, under the wallet's name as the other wallet metrics give it.
    const counted = (await (await fetch(s.service.metricsUrl!)).text())
      .split("\n")
      .filter((line) => line.startsWith("token_service_wallet_outside_transactions_total{"));
    expect(counted).to.deep.equal([`token_service_wallet_outside_transactions_total{wallet="${EXCHANGE.address}"} 2`]);
    await s.admin.until(() => s.admin.received.filter((e) => e.type === "wallet.outside_transaction").length === 2);
    const [event] = s.admin.received.filter((e) => e.type === "wallet.outside_transaction");
    expect(event!.data).to.deep.include({ wallet: EXCHANGE.address, paused: false, policy: "alert" });
    expect(event!.data.transaction).to.deep.include({ hash: idle.hash, nonce: idle.nonce, to: CUSTOMER.toLowerCase() });
    expect(s.trader.received.filter((e) => !e.type.startsWith("trade."))).to.deep.equal([]);
    const deliveries = await getJson(`${s.service.apiUrl}/api/v1/webhooks/deliveries`, { apiKey: KEYS.ops });
    const outside = deliveries.body.deliveries.filter((d: { type: string }) => d.type === "wallet.outside_transaction");
    expect(outside.map((d: { tradeId: unknown }) => d.tradeId)).to.deep.equal([null, null]);
    const audit = await getJson(`${s.service.apiUrl}/api/v1/audit?action=wallet.outside_transaction`, {
      apiKey: KEYS.ops,
    });
    expect(audit.body.records.map((r: { details: { hash: string } }) => r.details.hash)).to.deep.equal([
      idle.hash,
      busy.hash,
    ]);
    // Alert only: the wallet still trades.
    expect((await s.sell()).status).to.equal(200);
  });

  it("finds, at the next start, a transaction signed while no instance ran; its own trades and the first start raise nothing", async function () {
    setup = await setUp();
    const s = setup;
    const outsideEvents = () => s.admin.received.filter((e) => e.type === "wallet.outside_transaction");
    // The first start on this chain does not look at what the wallet did before (the deploy's funding).
    expect((await s.sell()).status).to.equal(200);
    // A restart after its own trades: each nonce since is one of the journal's slots.
    await s.restart();
    expect((await s.sell()).status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // two blocks: the watch reads the wallet

    // Stopped: a transfer signed with the key, mined while nothing watched.
    let leaked: { hash: string; nonce: number } | undefined;
    await s.restart(async () => {
      leaked = await s.outside();
      await minedIn(s, leaked.hash);
    });
    const seen = await detected(s, leaked!.hash);
    expect(seen.line).to.include({ level: 50, nonce: leaked!.nonce, to: CUSTOMER.toLowerCase(), seen: "nonce" });
    await s.admin.until(() => outsideEvents().length === 1);
    expect(outsideEvents()[0]!.data.transaction).to.deep.include({ hash: leaked!.hash, nonce: leaked!.nonce });
    expect(await s.metric("token_service_wallet_outside_transactions_total")).to.equal(1);
    // Its own trades, before and after the restarts, raised nothing.
    expect(s.logs.records().filter((r) => String(r.msg).startsWith("outside transaction"))).to.have.length(1);
    const audit = await getJson(`${s.service.apiUrl}/api/v1/audit?action=wallet.outside_transaction`, {
      apiKey: KEYS.ops,
    });
    expect(audit.body.records.map((r: { details: { hash: string } }) => r.details.hash)).to.deep.equal([leaked!.hash]);
  });

  it("with OUTSIDE_TX_POLICY=pause, signs no further trade from the wallet until an admin resumes it", async function () {
    setup = await setUp({ OUTSIDE_TX_POLICY: "pause" });
    const s = setup;
    expect((await s.sell()).status).to.equal(200);
    const leaked = await s.outside();
    await detected(s, leaked.hash);

    const before = await s.nonce();
    const refused = await s.sell();
    expect(refused.status, refused.text).to.equal(503);
    expect(refused.body.code).to.equal("unavailable");
    expect(refused.body.message).to.include(`exchange wallet ${EXCHANGE.address} is paused`);
    expect(refused.body.message).to.include(leaked.hash);
    expect(refused.body.message).to.include(`/api/v1/wallets/${EXCHANGE.address}/resume`);
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // two blocks: nothing was sent meanwhile
    expect(await s.nonce(), "the wallet's nonce").to.equal(before);
    expect(await s.metric("token_service_wallet_paused")).to.equal(1);
    const ready = await getJson(`${s.service.apiUrl}/readyz`, { apiKey: null });
    expect(JSON.stringify(ready.body)).to.include("paused:");

    const resume = (key: string) =>
      getJson(`${s.service.apiUrl}/api/v1/wallets/${EXCHANGE.address}/resume`, { apiKey: key, method: "POST" });
    const byTrader = await resume(KEYS.desk);
    expect(byTrader.status).to.equal(403);
    expect(byTrader.body.message).to.include("may not resume a wallet");
    expect((await s.sell()).status, "still paused").to.equal(503);
    const resumed = await resume(KEYS.ops);
    expect(resumed.status, resumed.text).to.equal(200);
    expect(resumed.body).to.deep.include({ wallet: EXCHANGE.address, paused: false });
    expect(resumed.body.pause).to.deep.include({ nonce: leaked.nonce, hash: leaked.hash });
    expect((await resume(KEYS.ops)).status, "not paused any more").to.equal(409);
    const after = await s.sell();
    expect(after.status, after.text).to.equal(200);
    const audit = await getJson(`${s.service.apiUrl}/api/v1/audit?action=wallet.resumed`, { apiKey: KEYS.ops });
    expect(audit.body.records.map((r: { actor: string; subject: string }) => [r.actor, r.subject])).to.deep.equal([
      ["ops", EXCHANGE.address.toLowerCase()],
    ]);
  });

  it("refuses OUTSIDE_TX_POLICY=pause at start when no key of the access file holds admin", async function () {
    const { loadConfig } = await import("../../../adapters/config/env.js");
    const dir = mkdtempSync(join(tmpdir(), "outside-config-"));
    try {
      writeFileSync(
        join(dir, "access.json"),
        JSON.stringify({ keys: [{ name: "desk", sha256: sha(KEYS.desk), roles: ["trader"] }] }),
      );
      expect(() => loadConfig({ OUTSIDE_TX_POLICY: "pause", ACCESS_FILE: join(dir, "access.json") })).to.throw(
        /OUTSIDE_TX_POLICY: pause needs a key with the admin role in ACCESS_FILE/,
      );
      expect(() => loadConfig({ OUTSIDE_TX_POLICY: "pause" })).to.throw(/OUTSIDE_TX_POLICY: pause needs/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
