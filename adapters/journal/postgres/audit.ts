/**
 * The PostgreSQL journal's audit log (core/ports/audit.port.ts): one chain for every instance
 * sharing the journal. Its head is one row (`audit_head`), locked FOR UPDATE by `audit_append`,
 * which chains the record onto it, hashes it and moves the head, all inside the server: the lock
 * is held from there to the commit, never across a round trip to the service
 * (docs/decisions/0011-audit-append-in-the-database.md). Everything else the appending write does
 * (a trade's insert, its spending limits' counters) runs concurrently before it. Nothing may wait
 * for another lock once the head is held: audit_append is always a write's last step, so no two
 * appends can deadlock.
 *
 * The hash is the shared module's (../audit-chain.ts), computed here: the service hands over the
 * record's fields as canonical JSON texts (canonicalParts), the function writes them around the
 * head's seq and hash and the time, in RFC 8785's key order, and takes their SHA-256.
 */
import type pg from "pg";

import type { AuditEntry, AuditHead, AuditLog, AuditPage, AuditPageQuery, AuditRecord } from "../../../core/index.js";
import { canonicalParts, GENESIS_HASH } from "../audit-chain.js";

/**
 * Migration 12: the chain, one row a record (`details` the canonical JSON text that was hashed),
 * its head, and audit_append. The text is hashed as UTF-8 (convert_to): the journal's database
 * must be UTF8, as PostgreSQL creates it by default.
 */
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
  INSERT INTO audit_head (seq, hash) VALUES (0, '${GENESIS_HASH}');

  -- Appends a record: its fields, then the same as canonical JSON texts; answers {seq, at, prevHash, hash}.
  CREATE FUNCTION audit_append(p_action TEXT, p_actor TEXT, p_subject TEXT, p_details TEXT,
      p_action_json TEXT, p_actor_json TEXT, p_subject_json TEXT)
  RETURNS json LANGUAGE plpgsql AS $$
  DECLARE
    h RECORD;
    v_seq BIGINT;
    v_at TEXT;
    v_hash TEXT;
  BEGIN
    SELECT a.seq, a.hash INTO h FROM audit_head a FOR UPDATE;
    v_seq := h.seq + 1;
    -- Read once the lock is held, so that at never goes back along the chain.
    v_at := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    v_hash := encode(sha256(convert_to(
      '{"action":' || p_action_json || ',"actor":' || p_actor_json || ',"at":"' || v_at || '","details":' ||
      p_details || ',"prevHash":"' || h.hash || '","seq":' || v_seq || ',"subject":' || p_subject_json || '}',
      'UTF8')), 'hex');
    INSERT INTO audit_log (seq, at, actor, action, subject, details, prev_hash, hash)
      VALUES (v_seq, v_at, p_actor, p_action, p_subject, p_details, h.hash, v_hash);
    UPDATE audit_head SET seq = v_seq, hash = v_hash;
    RETURN json_build_object('seq', v_seq, 'at', v_at, 'prevHash', h.hash, 'hash', v_hash);
  END $$;`;

/** What audit_append answers. */
export interface Appended {
  seq: number;
  at: string;
  prevHash: string;
  hash: string;
}

/** The call of audit_append with its arguments from `$first` on, and those arguments for `entry`. */
export function auditAppendCall(entry: AuditEntry, first: number): { sql: string; values: unknown[] } {
  const parts = canonicalParts(entry);
  const values = [entry.action, entry.actor, entry.subject, parts.details, parts.action, parts.actor, parts.subject];
  return { sql: `audit_append(${values.map((_, i) => `$${first + i}`).join(", ")})`, values };
}

/** The record `entry` became, from what audit_append answered. */
export function appendedRecord(entry: AuditEntry, appended: Appended): AuditRecord {
  return {
    seq: Number(appended.seq),
    at: appended.at,
    actor: entry.actor,
    action: entry.action,
    subject: entry.subject,
    details: JSON.parse(canonicalParts(entry).details) as AuditRecord["details"],
    prevHash: appended.prevHash,
    hash: appended.hash,
  };
}

/**
 * Appends `entry` on `client` (or the pool: a transaction of its own), as the last statement of
 * the caller's transaction: the head stays locked until the caller commits or rolls back.
 */
export async function appendAudit(client: pg.ClientBase | pg.Pool, entry: AuditEntry): Promise<AuditRecord> {
  const call = auditAppendCall(entry, 1);
  const { rows } = await client.query<{ audit: Appended }>({
    name: "audit-append",
    text: `SELECT ${call.sql} AS audit`,
    values: call.values,
  });
  return appendedRecord(entry, rows[0]!.audit);
}

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

export class PostgresAudit implements AuditLog {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  appendAudit(entry: AuditEntry): Promise<AuditRecord> {
    return appendAudit(this.#pool, entry);
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
