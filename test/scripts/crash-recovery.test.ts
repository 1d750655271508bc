/**
 * Never lose a trade, never pay twice: the service is killed with SIGKILL between
 * broadcasting a trade and seeing its receipt, restarted on the same journal, and the
 * client retries with its Idempotency-Key. Also: two service instances sharing one
 * PostgreSQL journal trade from one wallet at once; and webhooks in flight when the service is
 * killed are sent again after the restart, with the same webhook-id.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import * as http from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import { JsonRpcProvider } from "ethers";
import { pino } from "pino";

import type { EmbeddedChain } from "../../adapters/dev-mode.js";
import { startService, type RunningService } from "../../adapters/main.js";
import { startEmbeddedChain } from "../../scripts/embedded-chain/chain.js";
import { getJson, postJson, type JsonBody } from "../adapters/transport/helpers.js";
import { startPostgres, type TestPostgres } from "../helpers/postgres.js";
import { defaultLog, freePort } from "../helpers/service-defaults.js";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhook-receiver.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "crash-test-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

async function waitFor(predicate: () => boolean | Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Starts the service as `npm start` runs it, and resolves with its API URL once it is ready. */
async function startProcess(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; apiUrl: string; output: () => string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/start.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  await waitFor(() => out.includes("is ready") || child.exitCode !== null, "the service to start");
  const apiUrl = /API: +(http\S+)/.exec(out)?.[1];
  if (!apiUrl) throw new Error(`the service did not start:\n${out}`);
  return { child, apiUrl, output: () => out };
}

describe("crash recovery", function () {
  let chain: EmbeddedChain;
  let rpc: JsonRpcProvider;
  let dir: string;

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "crash-"));
    chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(chain.addresses));
    rpc = new JsonRpcProvider(chain.rpcUrl, undefined, { staticNetwork: true, cacheTimeout: -1 });
  });

  after(async function () {
    rpc?.destroy();
    await chain?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const env = async () => ({
    RPC_URL: chain.rpcUrl,
    DEPLOYMENT_FILE: join(dir, "deployment.json"),
    EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
    API_KEYS: KEY,
    PORT: "0",
    METRICS_PORT: String(await freePort()),
    DATA_DIR: join(dir, "data"),
    IDEMPOTENCY_WAIT_MS: "500",
  });
  const wallet = () => chain.exchangeWallet.address;
  const body = { destinatary: CUSTOMER, amount: "3", usdAddress: "" };

  it("after a kill -9 between broadcast and receipt, a retry with the same key gets the original receipt and one transaction exists", async function () {
    const request = { ...body, userAddress: wallet(), usdAddress: chain.addresses.stableCoins.USDT };
    const before = await rpc.getTransactionCount(wallet(), "latest");
    await rpc.send("evm_setAutomine", [false]);
    let first = await startProcess(await env());
    try {
      // The trade is broadcast and sits in the mempool: no receipt yet.
      void postJson(`${first.apiUrl}/api/v1/token/sell`, request, {
        apiKey: KEY,
        headers: { "idempotency-key": "crash-1" },
      }).catch(() => {});
      await waitFor(async () => (await rpc.getTransactionCount(wallet(), "pending")) === before + 1, "the broadcast");
      first.child.kill("SIGKILL");
      await new Promise((resolve) => first.child.once("exit", resolve));

      // Restarted on the same journal while the transaction is still pending: the retry says so.
      first = await startProcess(await env());
      // Log lines are written within 200 ms (buffered): waited for.
      await waitFor(
        () => /seeing through transactions left unconfirmed by a previous run/.test(first.output()),
        "the restart's warning",
        5_000,
      );
      const pending = await postJson(`${first.apiUrl}/api/v1/token/sell`, request, {
        apiKey: KEY,
        headers: { "idempotency-key": "crash-1" },
      });
      expect(pending.status).to.equal(504);
      expect(pending.body.code).to.equal("deadline_exceeded");
      expect(await rpc.getTransactionCount(wallet(), "pending")).to.equal(before + 1); // nothing sent twice

      await rpc.send("evm_mine", []);
      const done = await postJson(`${first.apiUrl}/api/v1/token/sell`, request, {
        apiKey: KEY,
        headers: { "idempotency-key": "crash-1" },
      });
      expect(done.status).to.equal(200);
      expect(Object.keys(done.body.events)).to.have.length(5);
      const block = await rpc.getBlock(done.body.blockNumber, true);
      const ours = block!.prefetchedTransactions.filter((tx) => tx.from === wallet());
      expect(ours.map((tx) => tx.hash)).to.deep.equal([done.body.transactionHash]);
      expect(await rpc.getTransactionCount(wallet(), "latest")).to.equal(before + 1);

      // And once more after the trade is settled: the same receipt, still one transaction.
      const again = await postJson(`${first.apiUrl}/api/v1/token/sell`, request, {
        apiKey: KEY,
        headers: { "idempotency-key": "crash-1" },
      });
      expect(again.body).to.deep.equal(done.body);
      expect(await rpc.getTransactionCount(wallet(), "pending")).to.equal(before + 1);
    } finally {
      await rpc.send("evm_setAutomine", [true]);
      first.child.kill("SIGKILL");
    }
  });
});

/** A JSON-RPC proxy to the chain that can stall: while stalled, requests are held unanswered. */
async function stallingProxy(target: string) {
  let stalled = false;
  const held: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const forward = () =>
        void fetch(target, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: Buffer.concat(chunks),
        })
          .then(async (answer) =>
            res.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text()),
          )
          .catch(() => res.destroy());
      if (stalled) held.push(forward);
      else forward();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    stall: () => {
      stalled = true;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
    held: () => held.length,
  };
}

describe("a crash before trades were signed", function () {
  let chain: EmbeddedChain;
  let dir: string;

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "unsigned-"));
    chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(chain.addresses));
  });

  after(async function () {
    await chain?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("forgets the keyed trades a killed run accepted and never signed: each retry executes once", async function () {
    const rpc = new JsonRpcProvider(chain.rpcUrl, undefined, { staticNetwork: true, cacheTimeout: -1 });
    const proxy = await stallingProxy(chain.rpcUrl);
    const env = async (rpcUrl: string) => ({
      RPC_URL: rpcUrl,
      DEPLOYMENT_FILE: join(dir, "deployment.json"),
      EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
      API_KEYS: KEY,
      PORT: "0",
      METRICS_PORT: String(await freePort()),
      DATA_DIR: join(dir, "data"),
      IDEMPOTENCY_WAIT_MS: "200",
    });
    const wallet = chain.exchangeWallet.address;
    const request = {
      userAddress: wallet,
      destinatary: CUSTOMER,
      amount: "1",
      usdAddress: chain.addresses.stableCoins.DAI,
    };
    const keys = Array.from({ length: 20 }, (_, i) => `unsigned-${i}`);
    try {
      const before = await rpc.getTransactionCount(wallet, "latest");
      const first = await startProcess(await env(proxy.url));
      // The node stops answering: every trade is journalled as accepted, then waits in its preflight.
      proxy.stall();
      for (const key of keys)
        void postJson(`${first.apiUrl}/api/v1/token/buy`, request, {
          apiKey: KEY,
          headers: { "idempotency-key": key },
        }).catch(() => {});
      await waitFor(() => proxy.held() >= 1, "the preflights to reach the node");
      await new Promise((resolve) => setTimeout(resolve, 500)); // all twenty journalled and waiting
      first.child.kill("SIGKILL");
      await new Promise((resolve) => first.child.once("exit", resolve));

      const second = await startProcess(await env(chain.rpcUrl));
      try {
        await waitFor(
          () => /forgot trades a stopped process accepted and never signed/.test(second.output()),
          "the forgetting's warning",
          5_000,
        );
        const answers = await Promise.all(
          keys.map((key) =>
            postJson(`${second.apiUrl}/api/v1/token/buy`, request, {
              apiKey: KEY,
              headers: { "idempotency-key": key },
            }),
          ),
        );
        expect(answers.map((a) => a.status)).to.deep.equal(Array(20).fill(200));
        const again = await Promise.all(
          keys.map((key) =>
            postJson(`${second.apiUrl}/api/v1/token/buy`, request, {
              apiKey: KEY,
              headers: { "idempotency-key": key },
            }),
          ),
        );
        expect(again.map((a) => a.body.transactionHash)).to.deep.equal(answers.map((a) => a.body.transactionHash));
        expect(await rpc.getTransactionCount(wallet, "latest")).to.equal(before + 20);
      } finally {
        second.child.kill("SIGKILL");
      }
    } finally {
      rpc.destroy();
      await proxy.close();
    }
  });
});

describe("two service instances sharing one PostgreSQL journal", function () {
  let chain: EmbeddedChain;
  let postgres: TestPostgres;
  let rpc: JsonRpcProvider;
  let dir: string;
  const services: RunningService[] = [];

  before(async function () {
    this.timeout(180_000);
    dir = mkdtempSync(join(tmpdir(), "two-"));
    [chain, postgres] = await Promise.all([
      startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) }),
      startPostgres(),
    ]);
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(chain.addresses));
    for (let i = 0; i < 2; i++) {
      services.push(
        await startService({
          env: {
            RPC_URL: chain.rpcUrl,
            DEPLOYMENT_FILE: join(dir, "deployment.json"),
            EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
            API_KEYS: KEY,
            PORT: "0",
            METRICS_PORT: String(await freePort()),
            JOURNAL_URL: postgres.url,
          },
          log: defaultLog(),
          rootDir: dir,
        }),
      );
    }
    rpc = new JsonRpcProvider(chain.rpcUrl, undefined, { staticNetwork: true, cacheTimeout: -1 });
  });

  after(async function () {
    this.timeout(60_000);
    rpc?.destroy();
    for (const service of services) await service.close();
    await chain?.close();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("trades from one wallet through both at once: every trade mined, one nonce each, no collisions", async function () {
    const wallet = chain.exchangeWallet.address;
    const before = await rpc.getTransactionCount(wallet, "pending");
    const coins = Object.values(chain.addresses.stableCoins);
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        postJson(
          `${services[i % 2]!.apiUrl}/api/v1/token/buy`,
          { userAddress: wallet, destinatary: CUSTOMER, amount: `${i + 1}.25`, usdAddress: coins[i % 3] },
          { apiKey: KEY },
        ),
      ),
    );
    expect(answers.map((a) => a.status)).to.deep.equal(Array(40).fill(200));
    expect(new Set(answers.map((a) => a.body.transactionHash)).size).to.equal(40);
    expect(await rpc.getTransactionCount(wallet, "pending")).to.equal(before + 40);
  });

  it("answers the same Idempotency-Key sent to both at once with one transaction", async function () {
    const wallet = chain.exchangeWallet.address;
    const before = await rpc.getTransactionCount(wallet, "pending");
    const request = {
      userAddress: wallet,
      destinatary: CUSTOMER,
      amount: "7",
      usdAddress: chain.addresses.stableCoins.DAI,
    };
    const answers = await Promise.all(
      services.flatMap((service) =>
        [0, 1, 2].map(() =>
          postJson(`${service.apiUrl}/api/v1/token/sell`, request, {
            apiKey: KEY,
            headers: { "idempotency-key": "shared-1" },
          }),
        ),
      ),
    );
    expect(answers.map((a) => a.status)).to.deep.equal(Array(6).fill(200));
    expect(new Set(answers.map((a) => a.body.transactionHash)).size).to.equal(1);
    expect(await rpc.getTransactionCount(wallet, "pending")).to.equal(before + 1);
  });
});

/** An api key's id in WEBHOOKS_FILE: the first 32 hex digits of its SHA-256. */
const apiKeyId = (key: string) => createHash("sha256").update(key).digest("hex").slice(0, 32);

/** Every delivery of the caller's, oldest first (the list pages newest first). */
async function allDeliveries(apiUrl: string): Promise<JsonBody[]> {
  const all: JsonBody[] = [];
  let cursor: string | null = "";
  while (cursor !== null) {
    const page = await getJson(
      `${apiUrl}/api/v1/webhooks/deliveries?limit=200${cursor === "" ? "" : `&cursor=${cursor}`}`,
      { apiKey: KEY },
    );
    expect(page.status, page.text).to.equal(200);
    all.push(...page.body.deliveries);
    cursor = page.body.nextCursor;
  }
  return all.reverse();
}

for (const journal of ["SQLite", "PostgreSQL"] as const) {
  describe(`webhooks across a kill -9 mid-delivery (${journal})`, function () {
    // PostgreSQL keeps a dead run's leases for their 60 s: its redeliveries wait that long.
    this.timeout(journal === "PostgreSQL" ? 240_000 : 120_000);
    let chain: EmbeddedChain;
    let postgres: TestPostgres | undefined;
    let receiver: WebhookReceiver;
    let dir: string;

    before(async function () {
      dir = mkdtempSync(join(tmpdir(), "webhooks-crash-"));
      [chain, postgres, receiver] = await Promise.all([
        // A block every 300 ms, as on a real chain: each trade is submitted, then confirmed.
        startEmbeddedChain({ chainPort: 0, blockTimeMs: 300, log: pino({ level: "silent" }) }),
        journal === "PostgreSQL" ? startPostgres() : undefined,
        startWebhookReceiver(),
      ]);
      writeFileSync(join(dir, "deployment.json"), JSON.stringify(chain.addresses));
      writeFileSync(
        join(dir, "webhooks.json"),
        JSON.stringify({ endpoints: [{ apiKeyId: apiKeyId(KEY), url: receiver.url, secrets: [receiver.secret] }] }),
      );
    });

    after(async function () {
      await receiver?.close();
      await chain?.close();
      await postgres?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("sends every event at least once after the restart, in order per trade, a resent one with the same webhook-id", async function () {
      const env = async () => ({
        RPC_URL: chain.rpcUrl,
        DEPLOYMENT_FILE: join(dir, "deployment.json"),
        EXCHANGE_PRIVATE_KEYS: chain.exchangeWallet.privateKey,
        API_KEYS: KEY,
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        DATA_DIR: join(dir, "data"),
        WEBHOOKS_FILE: join(dir, "webhooks.json"),
        WEBHOOK_ALLOW_INSECURE: "true",
        WEBHOOK_ALLOW_PRIVATE: "true",
        ...(postgres === undefined ? {} : { JOURNAL_URL: postgres.url }),
      });
      // Each verified delivery waits 1 s for its 204: the deliveries are in flight when the service dies.
      receiver.holdMs = 1_000;
      let service = await startProcess(await env());
      try {
        const coins = Object.values(chain.addresses.stableCoins);
        const answers = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            postJson(
              `${service.apiUrl}/api/v1/token/sell`,
              {
                userAddress: chain.exchangeWallet.address,
                destinatary: CUSTOMER,
                amount: "2",
                usdAddress: coins[i % 3],
              },
              { apiKey: KEY },
            ),
          ),
        );
        expect(answers.map((a) => a.status)).to.deep.equal(Array(6).fill(200));
        // CONFIRMATIONS=1: each answer came with its trade confirmed, so all its events are written.
        // Killed while a delivery is unanswered (held 1 s): it must come again after the restart.
        await receiver.until(
          () => new Set(receiver.received.map((e) => e.data.id)).size === 6 && receiver.unanswered() > 0,
        );
        service.child.kill("SIGKILL");
        await new Promise((resolve) => service.child.once("exit", resolve));
        const beforeRestart = receiver.received.length;

        receiver.holdMs = 0;
        service = await startProcess(await env());
        const apiUrl = service.apiUrl;
        await waitFor(
          async () => {
            const pending = await getJson(`${apiUrl}/api/v1/webhooks/deliveries?status=pending`, { apiKey: KEY });
            return pending.status === 200 && pending.body.deliveries.length === 0;
          },
          "every event to be delivered",
          journal === "PostgreSQL" ? 150_000 : 60_000,
        );
        expect(receiver.received.length).to.be.greaterThan(beforeRestart);

        const deliveries = await allDeliveries(apiUrl);
        expect(deliveries.map((d) => d.status)).to.deep.equal(Array(deliveries.length).fill("delivered"));
        expect(receiver.rejected).to.equal(0);
        // Every event arrived, and nothing arrived that the journal did not write.
        const events = deliveries.map((d) => d.id as string);
        expect(events.length).to.be.greaterThan(answers.length); // some trades have two events to keep in order
        expect(new Set(receiver.received.map((e) => e.id))).to.deep.equal(new Set(events));
        // A kill -9 mid-delivery sent some again: with the same webhook-id and the same body.
        const copies = new Map<string, string[]>();
        for (const { headers, body } of receiver.raw)
          copies.set(headers["webhook-id"]!, [...(copies.get(headers["webhook-id"]!) ?? []), body]);
        const resent = [...copies].filter(([, bodies]) => bodies.length > 1);
        expect(resent).to.not.be.empty;
        for (const [id, bodies] of resent) expect(new Set(bodies).size, id).to.equal(1);
        // In order per trade: once an event arrived, no earlier one of its trade came again.
        for (const answer of answers) {
          const trade = await getJson(`${apiUrl}/api/v1/trades/${answer.body.transactionHash}`, { apiKey: KEY });
          const written = deliveries.filter((d) => d.tradeId === trade.body.id);
          // Submitted, then confirmed; or confirmed alone, when mined before the submission was recorded.
          expect(["trade.submitted,trade.confirmed", "trade.confirmed"]).to.include(written.map((d) => d.type).join());
          const arrived = receiver.received.filter((e) => e.data.id === trade.body.id).map((e) => e.id);
          const inTurn = arrived.filter((id, i) => id !== arrived[i - 1]);
          expect(inTurn).to.deep.equal(written.map((d) => d.id));
        }
      } finally {
        service.child.kill("SIGKILL");
      }
    });
  });
}
