/**
 * The SQLite journal's audit log (core/ports/audit.port.ts). One process holds the file (index.ts),
 * and every write goes through the group commit (store.ts), so appends are serialized already: a
 * record is chained onto the head read in the same write, inside the same transaction, and a write
 * that appends runs as one savepoint (`store.write(run, true)`), so that its change and its record
 * commit together or not at all.
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";

import type { AuditEntry, AuditHead, AuditLog, AuditPage, AuditPageQuery, AuditRecord } from "../../../core/index.js";
import { canonicalJson, EMPTY_HEAD, sealAudit } from "../audit-chain.js";
import type { Row } from "./rows.js";
import type { SqliteStore } from "./store.js";

/** Migration 12: the chain, one row a record; `details` the canonical JSON text that was hashed. */
export const AUDIT_MIGRATION = `
  CREATE TABLE audit_log (
    seq INTEGER PRIMARY KEY,              -- 1, 2, 3 … without gaps
    at TEXT NOT NULL,                     -- RFC 3339, UTC, milliseconds: as hashed
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    subject TEXT,
    details TEXT NOT NULL,                -- canonical JSON (RFC 8785)
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
  );
  CREATE INDEX audit_log_action ON audit_log (action, seq);
  CREATE INDEX audit_log_actor ON audit_log (actor, seq);
  CREATE INDEX audit_log_at ON audit_log (at);`;

/** A stored row as the record it holds. */
export function auditRecordOf(row: Row): AuditRecord {
  return {
    seq: Number(row.seq),
    at: row.at as string,
    actor: row.actor as string,
    action: row.action as AuditRecord["action"],
    subject: row.subject as string | null,
    details: JSON.parse(row.details as string) as AuditRecord["details"],
    prevHash: row.prev_hash as string,
    hash: row.hash as string,
  };
}

export class SqliteAudit implements AuditLog {
  readonly #store: SqliteStore;
  readonly #head: StatementSync;
  readonly #insert: StatementSync;
  readonly #pages = new Map<string, StatementSync>();

  constructor(store: SqliteStore) {
    this.#store = store;
    this.#head = store.db.prepare("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1");
    this.#insert = store.db.prepare(
      "INSERT INTO audit_log (seq, at, actor, action, subject, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    );
  }

  /**
   * Appends `entry` inside the caller's write (store.write(run, true)), chained onto the head as
   * this transaction sees it: the records of the writes before it in the same group included, and
   * none of a group that was rolled back.
   */
  appendIn(entry: AuditEntry): AuditRecord {
    const record = sealAudit(entry, this.#headNow(), Date.now());
    this.#insert.run(
      record.seq,
      record.at,
      record.actor,
      record.action,
      record.subject,
      canonicalJson(record.details),
      record.prevHash,
      record.hash,
    );
    return record;
  }

  appendAudit(entry: AuditEntry): Promise<AuditRecord> {
    return this.#store.write(() => this.appendIn(entry), true);
  }

  async auditHead(): Promise<AuditHead> {
    return this.#headNow();
  }

  async auditPage(query: AuditPageQuery): Promise<AuditPage> {
    const where: string[] = [];
    const values: SQLInputValue[] = [];
    const add = (condition: string, value: SQLInputValue) => {
      where.push(condition);
      values.push(value);
    };
    if (query.after !== undefined) add("seq > ?", query.after);
    if (query.action !== undefined) add("action = ?", query.action);
    if (query.actor !== undefined) add("actor = ?", query.actor);
    if (query.since !== undefined) add("at >= ?", query.since.toISOString());
    if (query.until !== undefined) add("at < ?", query.until.toISOString());
    const sql = `SELECT * FROM audit_log ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`} ORDER BY seq LIMIT ?`;
    let statement = this.#pages.get(sql);
    if (statement === undefined) {
      statement = this.#store.db.prepare(sql);
      this.#pages.set(sql, statement);
    }
    const rows = statement.all(...values, query.limit + 1);
    const records = rows.slice(0, query.limit).map(auditRecordOf);
    const last = records.at(-1);
    return { records, next: rows.length > query.limit && last !== undefined ? last.seq : null };
  }

  #headNow(): AuditHead {
    const row = this.#head.get();
    return row === undefined ? EMPTY_HEAD : { seq: Number(row.seq), hash: row.hash as string };
  }
}

/** The records of a SQLite journal file, oldest first, read `batch` at a time (npm run audit). */
export function* sqliteAuditRecords(db: DatabaseSync, batch = 1000): Generator<AuditRecord> {
  const page = db.prepare("SELECT * FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?");
  let after = -1;
  for (;;) {
    const rows = page.all(after, batch);
    for (const row of rows) yield auditRecordOf(row);
    if (rows.length < batch) return;
    after = Number(rows.at(-1)!.seq);
  }
}
