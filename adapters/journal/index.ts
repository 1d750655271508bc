import { join } from "node:path";

import type { Journal } from "../shared/journal.js";
import { openPostgresJournal } from "./postgres/index.js";
import { openSqliteJournal } from "./sqlite/index.js";

export { MemoryJournal } from "./memory/index.js";
export { openPostgresJournal, type PostgresJournalOptions } from "./postgres/index.js";
export { openSqliteJournal, type SqliteJournalOptions } from "./sqlite/index.js";
export {
  auditHash,
  canonicalJson,
  EMPTY_HEAD,
  GENESIS_HASH,
  verifyAudit,
  type AuditVerdict,
} from "./audit-chain.js";
export { readAuditLog, type AuditSource } from "./audit-read.js";

/**
 * A journal: the trades, the exchange wallets' nonces (their assignment, their ledger and its
 * leases), the quotes and the webhook outbox, each its own port over one storage (`ports`), and
 * every port's methods as its own (adapters/shared/journal.ts).
 */
export { Journal, journalOf, type JournalPorts, type LeasePort, type NoncePort } from "../shared/journal.js";

/**
 * The journal the configuration names: PostgreSQL when `url` is a postgres:// or postgresql://
 * URL (several instances may share it), else SQLite at `<dataDir>/journal.sqlite` (one process).
 * Any other non-empty `url` is refused rather than silently falling back to a per-process file.
 */
export async function openJournal(config: {
  url?: string;
  dataDir: string;
  instanceId?: string;
  leaseMs?: number;
}): Promise<Journal> {
  const url = config.url?.trim() ?? "";
  if (/^postgres(ql)?:\/\//i.test(url)) {
    return openPostgresJournal(url, {
      ...(config.instanceId === undefined ? {} : { instanceId: config.instanceId }),
      ...(config.leaseMs === undefined ? {} : { leaseMs: config.leaseMs }),
    });
  }
  if (url !== "") {
    // Only the scheme: the URL may hold a password.
    throw new Error(`journal URL scheme "${url.split(":")[0]}" is not supported: use postgres:// or postgresql://`);
  }
  return openSqliteJournal(join(config.dataDir, "journal.sqlite"));
}
