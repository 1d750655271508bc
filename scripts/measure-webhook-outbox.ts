/**
 * How much room the webhook outbox takes on PostgreSQL, for docs/operations.md ("Webhooks"):
 * `node --import tsx scripts/measure-webhook-outbox.ts [events]` (default 10,000).
 *
 * Real sells on anvil at 1 s blocks (the service as the webhook tests run it, in production
 * mode), with the journal on an embedded PostgreSQL and the api key's endpoint answering 204:
 * their events are written by the journal's trigger and delivered at the first attempt, as most
 * are. They are then copied by SQL (new ids, the same trades) up to `events`, vacuumed, and the
 * tables' sizes read (heap, TOAST and indexes) per event, per trade and per million trades.
 * Last, the journal's own sweep deletes them all, a page of 1,000 per statement, timed.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import pg from "pg";
import { pino } from "pino";

import { openPostgresJournal } from "../adapters/journal/index.js";
import { startService } from "../adapters/main.js";
import { deployOnAnvil, startAnvil } from "../test/helpers/anvil.js";
import { anvilServiceEnv } from "../test/helpers/anvil-service.js";
import { startPostgres } from "../test/helpers/postgres.js";
import { hardhatAccount } from "./embedded-chain/chain.js";

const EVENTS = Number(process.argv[2] ?? 10_000);
const SELLS = 30;
/** Sells in flight at once: 1 s blocks, so a sell takes a block or two. */
const CONCURRENCY = 10;
const KEY = "measure-outbox-key-0123456789abcdef";
/** Hardhat account #2: receives the stable coins. */
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const EXCHANGE = hardhatAccount(1);
const STABLES = ["DAI", "USDT", "USDC"] as const;

const receiver = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(204).end());
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const dir = mkdtempSync(join(tmpdir(), "measure-outbox-"));
const [postgres, anvil] = await Promise.all([startPostgres(), startAnvil({ blockTime: 1 })]);
const db = new pg.Client({ connectionString: postgres.url });
const query = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
  (await db.query<T>(text, values)).rows;

try {
  const file = join(dir, "webhooks.json");
  const apiKeyId = createHash("sha256").update(KEY).digest("hex").slice(0, 32);
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  writeFileSync(file, JSON.stringify({ endpoints: [{ apiKeyId, url, secrets: [secret] }] }));
  const addresses = await deployOnAnvil(anvil, 1000);
  writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
  const service = await startService({
    env: {
      ...anvilServiceEnv(anvil, dir, KEY, EXCHANGE.privateKey),
      METRICS_PORT: "0",
      RECEIPT_TIMEOUT_MS: "30000",
      JOURNAL_URL: postgres.url,
      WEBHOOKS_FILE: file,
      WEBHOOK_ALLOW_INSECURE: "true",
      WEBHOOK_ALLOW_PRIVATE: "true",
    },
    log: pino({ level: "silent" }),
  });
  try {
    const sell = async (i: number) => {
      const answer = await fetch(`${service.apiUrl}/api/v1/token/sell`, {
        method: "POST",
        headers: { api_key: KEY, "content-type": "application/json" },
        body: JSON.stringify({
          userAddress: EXCHANGE.address,
          destinatary: CUSTOMER,
          amount: "1",
          usdAddress: addresses.stableCoins[STABLES[i % STABLES.length]!],
        }),
      });
      if (answer.status !== 200) throw new Error(`a sell answered ${answer.status}: ${await answer.text()}`);
    };
    for (let i = 0; i < SELLS; i += CONCURRENCY)
      await Promise.all(Array.from({ length: CONCURRENCY }, (_, j) => sell(i + j)));
    await db.connect();
    for (let waited = 0; ; waited += 100) {
      const [row] = await query<{ confirmed: number; pending: number }>(
        `SELECT count(*) FILTER (WHERE type = 'trade.confirmed')::int AS confirmed,
                count(*) FILTER (WHERE status = 'pending')::int AS pending FROM webhook_events`,
      );
      if (row!.confirmed === SELLS && row!.pending === 0) break;
      if (waited > 60_000) throw new Error(`the events were not all delivered: ${JSON.stringify(row)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await service.close();
  }

  const real = await query<{ type: string; events: number; text: number; stored: number }>(
    `SELECT type, count(*)::int AS events, round(avg(octet_length(trade::text)))::int AS text,
            round(avg(pg_column_size(trade)))::int AS stored
     FROM webhook_events GROUP BY type ORDER BY min(seq)`,
  );
  const written = real.reduce((sum, row) => sum + row.events, 0);
  const copies = Math.ceil(EVENTS / written) - 1;
  await query(
    `INSERT INTO webhook_events (id, scope, trade_id, type, trade, created_at, status, attempts, next_attempt_at,
                                 window_start, finished_at)
     SELECT 'msg_' || md5(e.id || g), e.scope, e.trade_id || '-' || g, e.type, e.trade, e.created_at, e.status,
            e.attempts, e.next_attempt_at, e.window_start, e.finished_at
     FROM webhook_events e CROSS JOIN generate_series(1, $1) AS g`,
    [copies],
  );
  await query(
    `INSERT INTO webhook_attempts (event_id, at, status_code, error)
     SELECT 'msg_' || md5(a.event_id || g), a.at, a.status_code, a.error
     FROM webhook_attempts a CROSS JOIN generate_series(1, $1) AS g`,
    [copies],
  );
  await query("VACUUM ANALYZE webhook_events, webhook_attempts");
  const [sizes] = await query<Record<string, string>>(
    `SELECT (SELECT count(*) FROM webhook_events) AS events, (SELECT count(*) FROM webhook_attempts) AS attempts,
            pg_relation_size('webhook_events') AS heap, pg_indexes_size('webhook_events') AS indexes,
            pg_total_relation_size('webhook_events') AS total,
            pg_total_relation_size('webhook_attempts') AS attempts_total`,
  );
  const n = (key: string) => Number(sizes![key]);
  const events = n("events");
  const perEvent = (n("total") + n("attempts_total")) / events;
  const perTrade = (written / SELLS) * perEvent;
  const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KiB`;
  const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
  console.log(`${SELLS} sells wrote ${written} events (${(written / SELLS).toFixed(2)} a trade):`);
  for (const row of real)
    console.log(`  ${row.type}: ${row.events} events, trade JSON ${row.text} bytes as text, ${row.stored} stored`);
  console.log(`copied to ${events} events and ${n("attempts")} attempts, vacuumed:`);
  console.log(
    `  webhook_events: heap ${kb(n("heap") / events)}, TOAST ${kb((n("total") - n("heap") - n("indexes")) / events)}, indexes ${kb(n("indexes") / events)} per event`,
  );
  console.log(`  webhook_attempts: ${kb(n("attempts_total") / events)} per event (heap and indexes)`);
  console.log(`  in all: ${kb(perEvent)} per event, ${kb(perTrade)} per trade`);
  console.log(`  a million trades: ${gb(perTrade * 1_000_000)} (${(written / SELLS).toFixed(2)} events a trade)`);

  const journal = await openPostgresJournal(postgres.url);
  try {
    const pages: number[] = [];
    for (let deleted = -1; deleted !== 0; ) {
      const started = performance.now();
      deleted = await journal.sweepWebhookEvents(new Date(Date.now() + 60_000), 1_000);
      if (deleted === 1_000) pages.push(performance.now() - started);
    }
    pages.sort((a, b) => a - b);
    console.log(
      `the sweep: ${pages.length} full pages of 1,000 events with their attempts, median ${pages[pages.length >> 1]!.toFixed(0)} ms, slowest ${pages.at(-1)!.toFixed(0)} ms`,
    );
  } finally {
    await journal.close();
  }
} finally {
  await db.end().catch(() => {});
  await postgres.stop();
  await anvil.stop();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}
