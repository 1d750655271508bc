/**
 * The journals of the authorize step's bench (bench-access.ts), filled by SQL as the journal itself
 * would have written them: each trade's row as `open` inserted it and its lifecycle left it (the
 * exchange wallet, a nonce and a hash, its amounts once confirmed, the error of one that failed or
 * expired), with its key's name and id, and its spend in `spends` as `open` counted it (`counts`
 * off for the failed and expired, whose trigger took them out). A million trades through `open`
 * would take most of an hour.
 *
 * Trade `i`: key "desk" (9 in 10) or "backoffice"; a sell, buy or remittance in turn; failed one in
 * 50, expired one in 97, else confirmed; paying destinatary `i` mod 10,000 (so about 100 trades
 * each) from one exchange wallet; counting 100 to 999 USD. Ids are UUIDs (an md5 of the position),
 * so that new trades land anywhere in the id index, as `randomUUID` ids do.
 */
import { createHash } from "node:crypto";
import { DatabaseSync } from "node:sqlite";

import pg from "pg";

import { openPostgresJournal, openSqliteJournal } from "../adapters/journal/index.js";
import { keyIdOf } from "../core/index.js";

export const WALLET = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
export const DAI = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
export const DESTINATARIES = 10_000;
/** The SHA-256 of the access file's two keys, and the id (scope) of each. */
export const KEY_SHA256 = { desk: sha256Hex("bench-access desk"), backoffice: sha256Hex("bench-access backoffice") };
export const KEY_IDS = { desk: keyIdOf(KEY_SHA256.desk), backoffice: keyIdOf(KEY_SHA256.backoffice) };

function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** The SQL that differs between the two databases. */
interface Dialect {
  /** The positions 0 … n-1, as rows of a column `i`, and the clause that follows SELECT … FROM. */
  series(n: number): { with: string; from: string };
  uuid(salt: string): string;
  hex(value: string, digits: number): string;
  time(ms: string): string;
  /** Decimal text as the column's type. */
  amount(text: string): string;
  json(text: string): string;
  bool(condition: string): string;
  /** The columns only this database's trades have, and their values. */
  own: { columns: string; values: string };
}

const SQLITE: Dialect = {
  series: (n) => ({
    with: `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${n - 1})`,
    from: "n",
  }),
  uuid: (salt) => `bench_uuid('${salt}', i)`,
  hex: (value, digits) => `printf('%0${digits}x', ${value})`,
  time: (ms) => ms,
  amount: (text) => text,
  json: (text) => text,
  bool: (condition) => `(${condition})`,
  own: { columns: "", values: "" },
};

const POSTGRES: Dialect = {
  series: (n) => ({ with: "", from: `generate_series(0::bigint, ${n - 1}) AS i` }),
  uuid: (salt) => `md5('${salt}' || i)::uuid::text`,
  hex: (value, digits) => `lpad(to_hex(${value}), ${digits}, '0')`,
  time: (ms) => `to_timestamp((${ms}) / 1000.0)`,
  amount: (text) => `(${text})::numeric`,
  json: (text) => `(${text})::json`,
  bool: (condition) => `(${condition})`,
  // The instance that accepted the trade (PostgresJournalOptions.instanceId).
  own: { columns: ", owner", values: ", 'bench'" },
};

const KEY = "CASE WHEN i % 10 = 0 THEN 'backoffice' ELSE 'desk' END";
const SCOPE = `CASE WHEN i % 10 = 0 THEN '${KEY_IDS.backoffice}' ELSE '${KEY_IDS.desk}' END`;
const KIND = "CASE i % 3 WHEN 0 THEN 'sell' WHEN 1 THEN 'buy' ELSE 'remittance' END";
const STATUS = "CASE WHEN i % 50 = 1 THEN 'failed' WHEN i % 97 = 0 THEN 'expired' ELSE 'confirmed' END";
const ERROR = `CASE WHEN i % 50 = 1 THEN '{"code":"failed_precondition","message":"the transaction reverted"}'
  WHEN i % 97 = 0 THEN '{"code":"deadline_exceeded","message":"its deadline passed before it was mined"}' END`;
/** Whole USD the trade counts (a buy's or remittance's amount; a sell's payout, at one USD a token). */
const USD = "(100 + i % 900)";

function destinatary(d: Dialect): string {
  return `'0x' || ${d.hex(`i % ${DESTINATARIES}`, 40)}`;
}

/** The trades at positions 0 … n-1, accepted at `at` (ms, an SQL expression of i). */
function tradesSql(d: Dialect, n: number, at: string, salt: string): string {
  const { with: w, from } = d.series(n);
  const request = `'{"userAddress":"${WALLET}","destinatary":"' || ${destinatary(d)} || '","amount":"' || ${USD} || '","usdAddress":"${DAI}"}'`;
  const confirmed = (value: string) => `CASE WHEN i % 50 <> 1 AND i % 97 <> 0 THEN ${d.amount(value)} END`;
  return `${w} INSERT INTO trades (id, scope, key_name, idempotency_key, request_hash, kind, request, status, wallet,
      nonce, tx_hash, deadline, error, created_at, updated_at, amount_in, amount_out, gas_wei${d.own.columns})
    SELECT ${d.uuid(salt)}, ${SCOPE}, ${KEY}, '${salt}-' || i, ${d.hex("i", 64)}, ${KIND}, ${d.json(request)},
      ${STATUS}, '${WALLET}', i, '0x' || ${d.hex("i", 64)}, (${at}) / 1000 + 600, ${d.json(ERROR)}, ${d.time(at)},
      ${d.time(at)}, ${confirmed(`${USD} || '000000000000000000'`)}, ${confirmed(`${USD} || '000000000000000000'`)},
      ${confirmed("'21000000000000'")}${d.own.values}
    FROM ${from}`;
}

/** The spends of those trades, as `open` recorded them and the status trigger left them. */
function spendsSql(d: Dialect, n: number, at: string, salt: string): string {
  const { with: w, from } = d.series(n);
  return `${w} INSERT INTO spends (trade_id, at_ms, usd, key_name, wallet, destinatary, counts)
    SELECT ${d.uuid(salt)}, ${at}, ${d.amount(`${USD} || '000000000000000000'`)}, ${KEY}, '${WALLET}', ${destinatary(d)},
      ${d.bool("i % 50 <> 1 AND i % 97 <> 0")}
    FROM ${from}`;
}

/** Positions spread evenly over `spreadMs` ending at `end`, or one a millisecond from `start` (integer ms). */
export type Placement = { n: number; spreadMs: number; end: number } | { n: number; start: number };

function atOf(p: Placement): string {
  return "spreadMs" in p ? `${p.end - p.spreadMs} + (i * ${p.spreadMs}) / ${p.n}` : `${p.start} + i`;
}

/** Writes the trades of `placement` into a closed SQLite journal (creating its schema first). */
export async function fillSqlite(path: string, placement: Placement, salt: string): Promise<void> {
  (await openSqliteJournal(path)).close(); // the schema, by the journal's own migrations
  const db = new DatabaseSync(path);
  db.function("bench_uuid", { deterministic: true }, (prefix, i) => {
    const h = createHash("md5")
      .update(`${String(prefix)}${String(i)}`)
      .digest("hex");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  });
  try {
    // The fill's own settings (the journal sets its own when it opens the file).
    db.exec("PRAGMA cache_size = -1000000; PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF");
    db.exec("BEGIN");
    db.exec(tradesSql(SQLITE, placement.n, atOf(placement), salt));
    db.exec(spendsSql(SQLITE, placement.n, atOf(placement), salt));
    db.exec("COMMIT");
  } finally {
    db.close();
  }
}

/** Writes the trades of `placement` into the PostgreSQL journal at `url` (creating its schema first). */
export async function fillPostgres(url: string, placement: Placement, salt: string): Promise<void> {
  await (await openPostgresJournal(url)).close();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(tradesSql(POSTGRES, placement.n, atOf(placement), salt));
    await client.query(spendsSql(POSTGRES, placement.n, atOf(placement), salt));
    // What autovacuum does soon after a load that size: the planner's statistics, the visibility map.
    await client.query("VACUUM ANALYZE trades");
    await client.query("VACUUM ANALYZE spends");
  } finally {
    await client.end();
  }
}
