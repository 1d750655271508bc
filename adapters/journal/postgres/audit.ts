/**
 * The PostgreSQL journal's audit log (core/ports/audit.port.ts): one chain for every instance
 * sharing the journal. Its head is one row (`audit_head`), locked FOR UPDATE as the last step of
 * the transaction that appends (`appendAudit`), so appends are serialized across instances for no
 * longer than the rest of that transaction takes to commit, and everything else the transaction
 * does (a trade's insert, its spending limits' counters) runs concurrently before it. Nothing may
 * wait for another lock once the head is held: with the head always locked last, no two appends
 * can deadlock.
 */
import type pg from "pg";

import type { AuditEntry, AuditHead, AuditLog, AuditPage, AuditPageQuery, AuditRecord } from "../../../core/index.js";
import { canonicalJson, GENESIS_HASH, sealAudit } from "../audit-chain.js";
import { transaction } from "./store.js";

/** Migration 12: the chain, one row a record (`details` the canonical JSON text that was hashed), and its head. */
export const AUDIT_MIGRATION = `
  CREATE TABLE audit_log (
    seq BIGINT PRIMARY KEY,               -- 1, 2, 3 … without gaps
    at TEXT NOT NULL,                     -- RFC 3339, UTC, milliseconds: as hashed (the database's clock)
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    subject TEXT,
    details TEXT NOT NULL,                -- canonical JSON (RFC 8785)
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
  );
  CREATE INDEX audit_log_action ON audit_log (action, seq);
  CREATE INDEX audit_log_actor ON audit_log (actor, seq);
  CREATE INDEX audit_log_at ON audit_log (at);
  CREATE TABLE audit_head (
    only_row BOOLEAN PRIMARY KEY DEFAULT true CHECK (only_row),
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
  );
  INSERT INTO audit_head (seq, hash) VALUES (0, '${GENESIS_HASH}');`;

interface AuditRow {
  seq: string;
  at: string;
  actor: string;
  action: string;
  subject: string | null;
  details: string;
  prev_hash: string;
  hash: string;
}

/** seq as text (a BIGINT): so ORDER BY names the table's column (audit_log.seq), never this alias, which sorts as text. */
const COLUMNS = "seq::text AS seq, at, actor, action, subject, details, prev_hash, hash";

export function auditRecordOf(row: AuditRow): AuditRecord {
  return {
    seq: Number(row.seq),
    at: row.at,
    actor: row.actor,
    action: row.action as AuditRecord["action"],
    subject: row.subject,
    details: JSON.parse(row.details) as AuditRecord["details"],
    prevHash: row.prev_hash,
    hash: row.hash,
  };
}

/**
 * Appends `entry` on `client`, inside the caller's transaction, as its last statements: the head
 * locked (held until the caller commits or rolls back), the record chained onto it at the
 * database's clock read once the lock is held, and the head moved to it.
 */
export async function appendAudit(client: pg.ClientBase, entry: AuditEntry): Promise<AuditRecord> {
  const { rows } = await client.query<{ seq: string; hash: string; now_ms: string }>({
    name: "audit-head-lock",
    // The clock in the outer query: read after the lock is granted, so `at` never goes back.
    text: `SELECT h.seq::text AS seq, h.hash, (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS now_ms
           FROM (SELECT seq, hash FROM audit_head FOR UPDATE) h`,
  });
  const head = rows[0]!;
  const record = sealAudit(entry, { seq: Number(head.seq), hash: head.hash }, Number(head.now_ms));
  await client.query({
    name: "audit-append",
    text: `WITH r AS (
             INSERT INTO audit_log (seq, at, actor, action, subject, details, prev_hash, hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           )
           UPDATE audit_head SET seq = $1, hash = $8`,
    values: [
      record.seq,
      record.at,
      record.actor,
      record.action,
      record.subject,
      canonicalJson(record.details),
      record.prevHash,
      record.hash,
    ],
  });
  return record;
}

export class PostgresAudit implements AuditLog {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  appendAudit(entry: AuditEntry): Promise<AuditRecord> {
    return transaction(this.#pool, (client) => appendAudit(client, entry));
  }

  async auditHead(): Promise<AuditHead> {
    const { rows } = await this.#pool.query<{ seq: string; hash: string }>(
      "SELECT seq::text AS seq, hash FROM audit_head",
    );
    return { seq: Number(rows[0]!.seq), hash: rows[0]!.hash };
  }

  async auditPage(query: AuditPageQuery): Promise<AuditPage> {
    const values: unknown[] = [];
    const param = (value: unknown) => `$${values.push(value)}`;
    const where: string[] = [];
    if (query.after !== undefined) where.push(`seq > ${param(query.after)}`);
    if (query.action !== undefined) where.push(`action = ${param(query.action)}`);
    if (query.actor !== undefined) where.push(`actor = ${param(query.actor)}`);
    if (query.since !== undefined) where.push(`at >= ${param(query.since.toISOString())}`);
    if (query.until !== undefined) where.push(`at < ${param(query.until.toISOString())}`);
    const { rows } = await this.#pool.query<AuditRow>(
      `SELECT ${COLUMNS} FROM audit_log ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`}
       ORDER BY audit_log.seq LIMIT ${param(query.limit + 1)}`,
      values,
    );
    const records = rows.slice(0, query.limit).map(auditRecordOf);
    const last = records.at(-1);
    return { records, next: rows.length > query.limit && last !== undefined ? last.seq : null };
  }
}

/** The records of a PostgreSQL journal, oldest first, read `batch` at a time (npm run audit). */
export async function* postgresAuditRecords(client: pg.ClientBase, batch = 1000): AsyncGenerator<AuditRecord> {
  let after = -1;
  for (;;) {
    const { rows } = await client.query<AuditRow>(
      `SELECT ${COLUMNS} FROM audit_log WHERE seq > $1 ORDER BY audit_log.seq LIMIT $2`,
      [after, batch],
    );
    for (const row of rows) yield auditRecordOf(row);
    if (rows.length < batch) return;
    after = Number(rows.at(-1)!.seq);
  }
}
