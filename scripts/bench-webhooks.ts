/**
 * The webhooks of `npm run bench` (issue 28), on a service process of their own started as
 * `npm start` runs it (SQLite journal, logs on, metrics on) with WEBHOOKS_FILE naming a receiver
 * in the driver's process, which verifies every delivery with the `standardwebhooks` package:
 *
 * - Latency: sells made a few at a time; for each event, from the trade's state change (the
 *   event's `timestamp`, written with the change) to its arrival at the receiver. p50 and p99.
 * - Throughput: the receiver holds its answers while a backlog of sells is made (the endpoint's
 *   first attempts in flight wait on them, under their 10 s timeout), then answers everything:
 *   events delivered per second from then until the backlog is drained.
 */
import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

import { Webhook } from "standardwebhooks";

import type { DeploymentAddresses } from "../adapters/chain/index.js";

/** Hardhat account #2: receives the stable coins. */
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const STABLES = ["DAI", "USDT", "USDC"] as const;

/** One verified delivery: its id, type, trade hash, when its change happened and when it arrived (ms). */
interface Arrival {
  id: string;
  type: string;
  transactionHash: string | null;
  changedAt: number;
  arrivedAt: number;
}

/** The receiver: verifies and records each delivery, answering 204 at once or, while held, on release. */
export interface BenchReceiver {
  url: string;
  secret: string;
  arrivals: Arrival[];
  rejected: number;
  /** From now on, answers wait for release(). */
  hold(): void;
  /** Answers every held delivery, and the next ones at once. */
  release(): void;
  close(): Promise<void>;
}

export async function startBenchReceiver(): Promise<BenchReceiver> {
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const verifier = new Webhook(secret);
  let held: Array<() => void> | undefined;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const answer = () => {
        const body = Buffer.concat(chunks).toString("utf8");
        try {
          const event = verifier.verify(body, {
            "webhook-id": String(req.headers["webhook-id"]),
            "webhook-timestamp": String(req.headers["webhook-timestamp"]),
            "webhook-signature": String(req.headers["webhook-signature"]),
          }) as { type: string; timestamp: string; data: { transactionHash: string | null } };
          receiver.arrivals.push({
            id: String(req.headers["webhook-id"]),
            type: event.type,
            transactionHash: event.data.transactionHash,
            changedAt: Date.parse(event.timestamp),
            arrivedAt: Date.now(),
          });
          res.writeHead(204).end();
        } catch {
          receiver.rejected += 1;
          res.writeHead(400).end();
        }
      };
      if (held === undefined) answer();
      else held.push(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const receiver: BenchReceiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    secret,
    arrivals: [],
    rejected: 0,
    hold: () => {
      held ??= [];
    },
    release: () => {
      const answers = held ?? [];
      held = undefined;
      for (const answer of answers) answer();
    },
    close: async () => {
      receiver.release();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return receiver;
}

/** WEBHOOKS_FILE (written into `dir`) naming the receiver for `apiKey`, and the flags a local receiver needs. */
export function webhookEnv(apiKey: string, receiver: BenchReceiver, dir: string): Record<string, string> {
  const file = join(dir, "webhooks.json");
  const apiKeyId = createHash("sha256").update(apiKey).digest("hex").slice(0, 32);
  writeFileSync(file, JSON.stringify({ endpoints: [{ apiKeyId, url: receiver.url, secrets: [receiver.secret] }] }));
  return { WEBHOOKS_FILE: file, WEBHOOK_ALLOW_INSECURE: "true", WEBHOOK_ALLOW_PRIVATE: "true" };
}

export interface WebhookTarget {
  apiUrl: string;
  apiKey: string;
  wallet: string;
  addresses: DeploymentAddresses;
}

export interface WebhookResult {
  latency: { trades: number; concurrency: number; events: number; p50Ms: number; p99Ms: number; maxMs: number };
  throughput: { trades: number; events: number; fillSeconds: number; seconds: number; perSecond: number };
  rejected: number;
}

/** `count` sells, `concurrency` at a time; resolves with their transaction hashes. */
async function sells(target: WebhookTarget, count: number, concurrency: number): Promise<string[]> {
  const hashes: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const answer = await fetch(`${target.apiUrl}/api/v1/token/sell`, {
        method: "POST",
        headers: { api_key: target.apiKey, "content-type": "application/json" },
        body: JSON.stringify({
          userAddress: target.wallet,
          destinatary: CUSTOMER,
          amount: "1",
          usdAddress: target.addresses.stableCoins[STABLES[i % STABLES.length]!],
        }),
      });
      const body = (await answer.json()) as { transactionHash?: string; message?: string };
      if (answer.status !== 200 || body.transactionHash === undefined)
        throw new Error(`a sell answered ${answer.status}: ${body.message}`);
      hashes.push(body.transactionHash);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return hashes;
}

/** Resolves once every trade's trade.confirmed (its last event, each trade's delivered in order) arrived. */
async function allConfirmed(receiver: BenchReceiver, hashes: readonly string[], timeoutMs = 120_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  const waiting = new Set(hashes);
  let seen = 0;
  while (waiting.size > 0) {
    for (; seen < receiver.arrivals.length; seen++) {
      const arrival = receiver.arrivals[seen]!;
      if (arrival.type === "trade.confirmed" && arrival.transactionHash !== null)
        waiting.delete(arrival.transactionHash);
    }
    if (Date.now() > until) throw new Error(`${waiting.size} trades' webhooks did not arrive within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const percentile = (sorted: readonly number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

export async function measureWebhooks(
  target: WebhookTarget,
  receiver: BenchReceiver,
  options: { trades: number; concurrency: number; backlog: number },
  log: (line: string) => void,
): Promise<WebhookResult> {
  // Warm-up: the deliverer's first connection, the JIT.
  await allConfirmed(receiver, await sells(target, 20, 2));

  log(`webhooks: latency over ${options.trades} sells, ${options.concurrency} at a time…`);
  let from = receiver.arrivals.length;
  await allConfirmed(receiver, await sells(target, options.trades, options.concurrency));
  const delays = receiver.arrivals
    .slice(from)
    .map((a) => a.arrivedAt - a.changedAt)
    .sort((a, b) => a - b);

  log(`webhooks: throughput, a backlog of ${options.backlog} sells made while the receiver holds its answers…`);
  receiver.hold();
  const filling = performance.now();
  const backlog = await sells(target, options.backlog, 50);
  const fillSeconds = (performance.now() - filling) / 1000;
  if (fillSeconds > 9)
    log(`webhooks: the backlog took ${fillSeconds.toFixed(1)} s; the held batch may have timed out and be retried`);
  from = receiver.arrivals.length;
  const released = Date.now();
  receiver.release();
  await allConfirmed(receiver, backlog);
  const drained = receiver.arrivals.slice(from);
  const seconds = (Math.max(...drained.map((a) => a.arrivedAt)) - released) / 1000;

  return {
    latency: {
      trades: options.trades,
      concurrency: options.concurrency,
      events: delays.length,
      p50Ms: percentile(delays, 50),
      p99Ms: percentile(delays, 99),
      maxMs: delays[delays.length - 1]!,
    },
    throughput: {
      trades: options.backlog,
      events: drained.length,
      fillSeconds,
      seconds,
      perSecond: drained.length / seconds,
    },
    rejected: receiver.rejected,
  };
}

/** The webhooks' table. */
export function webhooksTable({ latency, throughput, rejected }: WebhookResult): string {
  const fmt = (n: number, digits = 0) =>
    n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return [
    "",
    `Webhooks (a service process as npm start runs it, SQLite journal, logs on; a local receiver verifying each delivery with standardwebhooks${rejected > 0 ? `; ${rejected} deliveries did NOT verify` : ""}):`,
    "",
    "| Measure | Result |",
    "|---|---:|",
    `| Latency from a trade's state change to the receiver, p50 / p99 / slowest (${fmt(latency.events)} events of ${fmt(latency.trades)} sells, ${latency.concurrency} at a time) | ${fmt(latency.p50Ms)} / ${fmt(latency.p99Ms)} / ${fmt(latency.maxMs)} ms |`,
    `| Deliverer throughput: a backlog of ${fmt(throughput.events)} events (${fmt(throughput.trades)} sells, made in ${fmt(throughput.fillSeconds, 1)} s while the receiver held its answers) drained in ${fmt(throughput.seconds, 2)} s | ${fmt(throughput.perSecond)} events/s |`,
    "",
  ].join("\n");
}
