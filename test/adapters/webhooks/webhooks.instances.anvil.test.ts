/**
 * Two service processes (`npm start`'s entry point, production mode) on one PostgreSQL journal,
 * one wallet on anvil, and one webhook receiver that verifies with the `standardwebhooks`
 * package and holds each delivery a while. Trades are made through both: every event is
 * delivered once, in order per trade, both deliverers deliver, and no webhook-id is ever in
 * flight twice at once (FOR UPDATE SKIP LOCKED and the lease, docs/decisions/0010).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import pg from "pg";

import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { anvilServiceEnv, startInstance, type Instance, writeWebhooksFile } from "../../helpers/anvil-service.js";
import { startPostgres, type TestPostgres } from "../../helpers/postgres.js";
import { freePort } from "../../helpers/service-defaults.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { postJson } from "../transport/helpers.js";
import { waitFor } from "../../helpers/wait.js";

const KEY = "instances-webhooks-key-0123456789ab";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const EXCHANGE = hardhatAccount(1);
const TRADES_PER_INSTANCE = 6;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("webhooks from two instances on one PostgreSQL journal (anvil)", function () {
  this.timeout(240_000);
  let anvil: Anvil;
  let postgres: TestPostgres;
  let receiver: WebhookReceiver;
  let dir: string;
  let usdc: string;
  const instances: Instance[] = [];

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "webhooks-instances-"));
    [anvil, postgres, receiver] = await Promise.all([
      startAnvil({ blockTime: 1 }),
      startPostgres(),
      startWebhookReceiver(),
    ]);
    // Each delivery is answered after 300 ms: a second delivery of an id meanwhile would overlap it.
    receiver.holdMs = 300;
    const addresses = await deployOnAnvil(anvil, 1000);
    usdc = addresses.stableCoins.USDC;
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    const env = {
      ...anvilServiceEnv(anvil, dir, KEY, EXCHANGE.privateKey),
      ...writeWebhooksFile(dir, KEY, receiver),
      JOURNAL_URL: postgres.url,
      RECEIPT_TIMEOUT_MS: "30000",
      // Each delivery is logged ("webhook delivered"), so each instance's share can be counted.
      LOG_LEVEL: "debug",
    };
    for (let i = 0; i < 2; i++) instances.push(await startInstance({ ...env, METRICS_PORT: String(await freePort()) }));
  });

  after(async function () {
    for (const instance of instances) instance.child.kill("SIGKILL");
    await receiver?.close();
    await anvil?.stop();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  interface Row {
    id: string;
    trade_id: string;
    type: string;
    status: string;
    attempts: number;
  }

  /** The outbox, in order of writing, with each event's attempts. */
  async function outbox(): Promise<Row[]> {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      const { rows } = await client.query<Row>(
        `SELECT e.id, e.trade_id, e.type, e.status, (SELECT count(*)::int FROM webhook_attempts a WHERE a.event_id = e.id) AS attempts
         FROM webhook_events e ORDER BY e.seq`,
      );
      return rows;
    } finally {
      await client.end();
    }
  }

  it("delivers every event once, in order per trade, and never one by both at once", async function () {
    // In waves, one trade through each instance at once: events are written while both deliverers poll.
    const sell = (instance: Instance) =>
      postJson(
        `${instance.apiUrl}/api/v1/token/sell`,
        { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount: "1", usdAddress: usdc },
        { apiKey: KEY },
      );
    const sells = [];
    for (let wave = 0; wave < TRADES_PER_INSTANCE; wave++) {
      const answers = await Promise.all(instances.map(sell));
      for (const answer of answers) expect(answer.status, answer.text).to.equal(200);
      sells.push(...answers);
    }

    // Every event written is delivered.
    const events = await waitFor(
      "every event delivered",
      async () => {
        const rows = await outbox();
        const confirmed = rows.filter((row) => row.type === "trade.confirmed").length;
        return confirmed === sells.length && rows.every((row) => row.status === "delivered") ? rows : undefined;
      },
      90_000,
    );
    await sleep(1_000); // nothing more arrives
    expect(receiver.rejected).to.equal(0);
    expect(receiver.overlaps, "webhook-ids delivered twice at once").to.deep.equal([]);
    // Once each: nothing failed, so nothing was sent again.
    expect(receiver.received.map((event) => event.id).sort()).to.deep.equal(events.map((event) => event.id).sort());
    for (const event of events) expect(event.attempts, event.id).to.equal(1);
    // In order per trade: the outbox's order of writing, each ending with the trade confirmed.
    for (const tradeId of new Set(events.map((event) => event.trade_id))) {
      const written = events.filter((event) => event.trade_id === tradeId).map((event) => event.id);
      const arrived = receiver.received.filter((event) => event.data.id === tradeId);
      expect(
        arrived.map((event) => event.id),
        tradeId,
      ).to.deep.equal(written);
      expect(arrived.at(-1)!.type).to.equal("trade.confirmed");
    }
    // Both deliverers delivered. Each logs a delivery after its journal write, through a log
    // buffer and a pipe, so the lines are waited for.
    const deliveredLines = () =>
      instances.map((instance) => instance.output().match(/"msg":"webhook delivered"/g)?.length ?? 0);
    await waitFor(
      "a log line for each delivery",
      async () => deliveredLines().reduce((a, b) => a + b) >= events.length || undefined,
      10_000,
    ).catch(() => {}); // the count is asserted below either way
    const delivered = deliveredLines();
    console.log(`      ${events.length} events for ${sells.length} trades, delivered ${delivered.join(" + ")}`);
    expect(delivered.reduce((a, b) => a + b)).to.equal(events.length);
    for (const count of delivered) expect(count).to.be.greaterThan(0);
  });
});
