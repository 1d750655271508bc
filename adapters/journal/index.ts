import { join } from "node:path";

import type { TradeJournal } from "../../core/ports/journal.port.js";
import { openPostgresJournal } from "./postgres.journal.js";
import { openSqliteJournal } from "./sqlite.journal.js";

export { openPostgresJournal, type PostgresJournalOptions } from "./postgres.journal.js";
export { openSqliteJournal, type SqliteJournalOptions } from "./sqlite.journal.js";

/**
 * The journal the configuration names: PostgreSQL when `url` is a postgres:// or postgresql://
 * URL (several instances may share it), else SQLite at `<dataDir>/journal.sqlite` (one process).
 * Any other non-empty `url` is refused rather than silently falling back to a per-process file.
 */
export async function openJournal(config: { url?: string; dataDir: string }): Promise<TradeJournal> {
  const url = config.url?.trim() ?? "";
  if (/^postgres(ql)?:\/\//i.test(url)) return openPostgresJournal(url);
  if (url !== "") {
    // Only the scheme: the URL may hold a password.
    throw new Error(`journal URL scheme "${url.split(":")[0]}" is not supported: use postgres:// or postgresql://`);
  }
  return openSqliteJournal(join(config.dataDir, "journal.sqlite"));
}
