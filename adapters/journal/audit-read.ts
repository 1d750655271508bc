/**
 * The audit log read straight from a journal's storage, oldest first, for `npm run audit`: the
 * SQLite file (opened read-only, never migrated) or the PostgreSQL database at a URL.
 */
import { existsSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";

import pg from "pg";

import type { AuditRecord } from "../../core/index.js";
import { postgresAuditRecords } from "./postgres/audit.js";
import { sqliteAuditRecords } from "./sqlite/audit.js";

export interface AuditSource {
  records: AsyncIterable<AuditRecord>;
  close(): Promise<void>;
}

/** The audit log of the journal at `url` (postgres://…) or, without one, of the SQLite file at `file`. */
export async function readAuditLog(journal: { url?: string | undefined; file: string }): Promise<AuditSource> {
  const url = journal.url?.trim() ?? "";
  if (/^postgres(ql)?:\/\//i.test(url)) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return { records: postgresAuditRecords(client), close: () => client.end() };
  }
  if (url !== "") throw new Error(`journal URL scheme "${url.split(":")[0]}" is not supported: use postgres://`);
  if (!existsSync(journal.file)) throw new Error(`no journal at ${journal.file}`);
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(journal.file, { readOnly: true });
    db.exec("PRAGMA busy_timeout = 200");
    db.prepare("SELECT count(*) FROM audit_log").get();
  } catch (error) {
    const code = (error as { errcode?: number }).errcode;
    if (code === 5 || code === 6)
      throw new Error(
        `journal ${journal.file} is in use by the service (a SQLite journal serves one process): stop it first, or verify an export (--file)`,
        { cause: error },
      );
    throw error;
  }
  return {
    records: (async function* () {
      yield* sqliteAuditRecords(db);
    })(),
    close: async () => db.close(),
  };
}
