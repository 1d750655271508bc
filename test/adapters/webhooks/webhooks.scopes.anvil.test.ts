/**
 * Instances with different webhook files on one PostgreSQL journal, as during a rolling deploy
 * or with an instance started without WEBHOOKS_FILE: three service processes (`npm start`'s
 * entry point, production mode) on one wallet on anvil. A has key 1's endpoint, B key 2's, C
 * none, started in that order. Trades of both keys are made through all three: each key's
 * events are all written and delivered to its own receiver, once each, by an instance that has
 * its endpoint; none is failed for want of one. Then the instances' upkeep deletes the events
 * finished over WEBHOOK_RETENTION_DAYS ago, with their attempts.
 */
import { createHash } from "node:crypto";
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
import { waitFor } from "../../helpers/wait.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../helpers/webhook-receiver.js";
import { postJson } from "../transport/helpers.js";

const KEYS = ["scopes-webhooks-key-one-0123456789", "scopes-webhooks-key-two-0123456789"] as const;
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const EXCHANGE = hardhatAccount(1);
const WAVES = 2;

const scopeOf = (key: string) => createHash("sha256").update(key).digest("hex").slice(0, 32);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("webhooks from instances with different webhook files on one PostgreSQL journal (anvil)", function () {
  this.timeout(300_000);
  let anvil: Anvil;
  let postgres: TestPostgres;
  let receivers: WebhookReceiver[];
  let dir: string;
  let usdc: string;
  const instances: Instance[] = [];

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "webhooks-scopes-"));
    [anvil, postgres] = await Promise.all([startAnvil({ blockTime: 1 }), startPostgres()]);
    receivers = [await startWebhookReceiver(), await startWebhookReceiver()];
    const addresses = await deployOnAnvil(anvil, 1000);
    usdc = addresses.stableCoins.USDC;
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    const env = {
      ...anvilServiceEnv(anvil, dir, KEYS[0], EXCHANGE.privateKey),
      API_KEYS: KEYS.join(","),
      JOURNAL_URL: postgres.url,
      RECEIPT_TIMEOUT_MS: "30000",
      // The upkeep beat (and the wallets' monitor lease): every 2 s rather than 15.
      MONITOR_LEASE_MS: "2000",
    };
    const files = KEYS.map((key, i) => writeWebhooksFile(dir, key, receivers[i]!, `webhooks-${i}.json`));
    // A with key 1's endpoint, then B with key 2's, then C with none: each start used to replace
    // the journal's one set of webhook scopes with its own.
    for (const file of [...files, {}])
      instances.push(await startInstance({ ...env, ...file, METRICS_PORT: String(await freePort()) }));
  });

  after(async function () {
    for (const instance of instances) instance.child.kill("SIGKILL");
    await Promise.all((receivers ?? []).map((receiver) => receiver.close()));
    await anvil?.stop();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  interface Row {
    id: string;
    scope: string;
    trade_id: string;
    type: string;
    status: string;
    errors: Array<string | null>;
  }

  async function query<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  const outbox = () =>
    query<Row>(
      `SELECT e.id, e.scope, e.trade_id, e.type, e.status,
         coalesce((SELECT array_agg(a.error ORDER BY a.seq) FROM webhook_attempts a WHERE a.event_id = e.id), '{}') AS errors
       FROM webhook_events e ORDER BY e.seq`,
    );

  async function tradeIds(): Promise<Map<string, string>> {
    const rows = await query<{ id: string; scope: string }>("SELECT id, scope FROM trades");
    return new Map(rows.map((row) => [row.id, row.scope]));
  }

  it("writes and delivers every key's events to its own receiver, whichever instance made the trade", async function () {
    // In waves: each instance sells with each key at once.
    let sells = 0;
    for (let wave = 0; wave < WAVES; wave++) {
      const answers = await Promise.all(
        instances.flatMap((instance) =>
          KEYS.map((key) =>
            postJson(
              `${instance.apiUrl}/api/v1/token/sell`,
              { userAddress: EXCHANGE.address, destinatary: CUSTOMER, amount: "1", usdAddress: usdc },
              { apiKey: key },
            ),
          ),
        ),
      );
      for (const answer of answers) expect(answer.status, answer.text).to.equal(200);
      sells += answers.length;
    }

    const trades = await tradeIds();
    expect(trades.size).to.equal(sells);
    // Every trade of either key is told to the end (trade.confirmed), and everything told is delivered.
    const events = await waitFor(
      "every trade's events written and delivered",
      async () => {
        const rows = await outbox();
        const confirmed = new Set(rows.filter((row) => row.type === "trade.confirmed").map((row) => row.trade_id));
        return confirmed.size === trades.size && rows.every((row) => row.status !== "pending") ? rows : undefined;
      },
      90_000,
    ).catch(async (error: Error) => {
      const rows = await outbox();
      const byStatus = rows.reduce<Record<string, number>>((all, row) => {
        all[`${row.scope.slice(0, 6)} ${row.status}`] = (all[`${row.scope.slice(0, 6)} ${row.status}`] ?? 0) + 1;
        return all;
      }, {});
      throw new Error(`${error.message}: ${trades.size} trades, events ${JSON.stringify(byStatus)}`);
    });
    await sleep(1_000); // nothing more arrives

    for (const [i, key] of KEYS.entries()) {
      const receiver = receivers[i]!;
      const mine = events.filter((row) => row.scope === scopeOf(key));
      expect(receiver.rejected, `receiver ${i + 1}: deliveries signed with another key's secret`).to.equal(0);
      // Every trade of the key has its events, each delivered once, at the first attempt.
      expect(new Set(mine.map((row) => row.trade_id)).size).to.equal(sells / KEYS.length);
      for (const row of mine) {
        expect(row.status, `${row.type} of ${row.trade_id}`).to.equal("delivered");
        expect(row.errors, `${row.type} of ${row.trade_id}`).to.deep.equal([null]);
      }
      expect(receiver.received.map((event) => event.id).sort()).to.deep.equal(mine.map((row) => row.id).sort());
      // In order per trade.
      for (const tradeId of new Set(mine.map((row) => row.trade_id)))
        expect(
          receiver.received.filter((event) => event.data.id === tradeId).map((event) => event.id),
          tradeId,
        ).to.deep.equal(mine.filter((row) => row.trade_id === tradeId).map((row) => row.id));
    }
    for (const instance of instances) expect(instance.output()).not.to.include("no webhook endpoint");
  });

  it("deletes the events finished over WEBHOOK_RETENTION_DAYS (30) ago, with their attempts, on the upkeep beat", async function () {
    // The previous test's events: half the trades' finished 31 days ago, as far as the journal knows.
    const trades = (await query<{ trade_id: string }>("SELECT DISTINCT trade_id FROM webhook_events ORDER BY 1")).map(
      (row) => row.trade_id,
    );
    expect(trades.length, "the previous test's trades").to.be.greaterThan(2);
    const old = trades.slice(0, trades.length / 2);
    const kept = await query<{ id: string }>("SELECT id FROM webhook_events WHERE NOT (trade_id = ANY($1))", [old]);
    await query("UPDATE webhook_events SET finished_at = finished_at - interval '31 days' WHERE trade_id = ANY($1)", [
      old,
    ]);
    await waitFor(
      "the old events deleted",
      async () => {
        const [left] = await query<{ n: number }>(
          "SELECT count(*)::int AS n FROM webhook_events WHERE trade_id = ANY($1)",
          [old],
        );
        return left!.n === 0 || undefined;
      },
      20_000,
    );
    await sleep(4_500); // two more beats: nothing else goes
    const left = await query<{ id: string }>("SELECT id FROM webhook_events ORDER BY id");
    expect(left.map((row) => row.id)).to.deep.equal(kept.map((row) => row.id).sort());
    const attempts = await query<{ event_id: string }>("SELECT event_id FROM webhook_attempts ORDER BY event_id");
    expect(attempts.map((row) => row.event_id)).to.deep.equal(kept.map((row) => row.id).sort());
    await waitFor(
      "the upkeep's log line",
      async () => instances.some((instance) => instance.output().includes("deleted webhook events")) || undefined,
      5_000,
    );
  });
});
