/**
 * The audit log: every decision the service takes about money or access, append-only and
 * hash-chained, kept by the trade journal (memory, SQLite, PostgreSQL) beside what it records.
 *
 * A record is written in the same journal transaction as the change it records, so no change
 * exists without its record: a journal method that makes such a change takes the entry to record
 * with it (TradeJournal.open and discard, WebhookOutbox.retryWebhookDelivery), and writes it only
 * when the change is made. A decision that changes nothing in the journal (a refusal, the access
 * file read again, the service started) is appended in a transaction of its own (`appendAudit`),
 * before it takes effect.
 *
 * The chain: each record's `hash` is the SHA-256 (lower-case hex) of the record's canonical JSON
 * (RFC 8785) without `hash`, `prevHash` included; `prevHash` is the previous record's hash, 64
 * zeros before the first. `seq` counts 1, 2, 3 … without gaps. On PostgreSQL every instance
 * appends to one chain, the appends serialized. The hashing is the adapters' (it needs a JSON
 * canonicalization library), in one module the storages and `npm run audit -- verify` share.
 *
 * Recording a new kind of decision, in the same transaction as its change (the approvals: a
 * trade held as pending_approval, approved, rejected, expired): add its action to AUDIT_ACTIONS;
 * give the journal method that makes the change an `audit?: AuditEntry` parameter, as `discard`
 * has; and in each storage, append the entry inside that method's own write, after its checks and
 * only when the change applies: the memory journal's `MemoryAudit.appendNow` in the same
 * synchronous step, SQLite's `SqliteAudit.appendIn` inside the method's `store.write(run, true)`
 * (the `true` makes the write one savepoint: the change and its record commit together or not at
 * all), PostgreSQL's `appendAudit(client, entry)` as the last statement inside the method's
 * `transaction(pool, …)`, or `auditAppendCall(entry, n)` in the select list of the one statement
 * that makes the change (`WITH c AS (UPDATE … RETURNING *) SELECT c.*, audit_append(…) FROM c`,
 * when no trigger of the change takes locks at the statement's end): the database's audit_append
 * locks the chain's head until the commit, so nothing after it may wait for another lock. The use
 * case builds the entry (core/audit.ts) and passes it in.
 */

/** What a record says was decided. */
export const AUDIT_ACTIONS = [
  // A trade's first write: validated, authorized and counted against the limits.
  "trade.accepted",
  // A trade refused by authorization (role, scope, denylist: no trade record), by a spending limit
  // (nothing written), or after it was accepted and before anything was signed (its record discarded).
  "trade.refused",
  // A trade accepted and never signed by a process that is gone (or left so for a trade's lifetime), forgotten.
  "trade.forgotten",
  // A trade an approval rule held (pending_approval), an approval given (the last one makes it
  // approved), a rejection, and a held trade not approved in time (approval_expired).
  "trade.held",
  "trade.approved",
  "trade.rejected",
  "trade.approval_expired",
  // A cancel or a speed-up asked of a trade by its sender or an admin, with the replacement's hash.
  "trade.cancel_requested",
  "trade.sped_up",
  // A cancel or a speed-up refused by authority (a trade the key does not see, or did not send) or
  // because the trade has nothing to replace; with the code.
  "replacement.refused",
  // A decision on a held trade refused: no approver role, the requester's own trade, a trade the
  // key does not see (or none), a trade already decided; with the code and the rule.
  "approval.refused",
  // The access file read at start, read again with a change, or refused (the one in force stays).
  "access.loaded",
  "access.reloaded",
  "access.refused",
  // A failed webhook delivery sent again by hand.
  "delivery.retried",
  // A transaction mined from an exchange wallet that the service never signed (and the wallet's
  // pause under OUTSIDE_TX_POLICY=pause), and an admin's resume of a paused wallet.
  "wallet.outside_transaction",
  "wallet.resumed",
  // This instance started or stopped, with its version and a digest of its configuration without secrets.
  "service.started",
  "service.stopped",
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** A JSON value a record may hold: no numbers but safe integers (amounts are decimal strings), so that every storage keeps it exactly. */
export type AuditValue =
  | string
  | number
  | boolean
  | null
  | readonly AuditValue[]
  | { readonly [key: string]: AuditValue };

/** The actor of the service's own decisions (starting, reloading the access file, forgetting trades). */
export const SERVICE_ACTOR = "service";

/** What a record says, before the log gives it its place in the chain. */
export interface AuditEntry {
  /** Who decided, or whose request was decided: the key's name in the access file (its id without one), or "service". */
  actor: string;
  action: AuditAction;
  /** What it is about: a trade's id, a delivery's id, an instance's name; null when there is none (a trade refused before it was recorded). */
  subject: string | null;
  details: { readonly [key: string]: AuditValue };
}

/** An entry whose subject the journal gives: the id of the trade it creates (TradeJournal.open). */
export type AuditNote = Omit<AuditEntry, "subject">;

/** A record in the chain. */
export interface AuditRecord extends AuditEntry {
  seq: number;
  /** When it was appended: RFC 3339, UTC, to the millisecond ("2026-05-01T10:00:00.000Z"); on PostgreSQL the database's clock. */
  at: string;
  /** The previous record's hash; 64 zeros before the first record. */
  prevHash: string;
  /** SHA-256, lower-case hex, of the record's canonical JSON (RFC 8785) without `hash`. */
  hash: string;
}

/** The last record's place in the chain (seq 0 and 64 zeros while it is empty): what a checkpoint witnesses. */
export interface AuditHead {
  seq: number;
  hash: string;
}

/** A page of the records, oldest first (by seq), filtered. */
export interface AuditPageQuery {
  action?: AuditAction | undefined;
  actor?: string | undefined;
  /** `at` at or after this. */
  since?: Date | undefined;
  /** `at` before this. */
  until?: Date | undefined;
  /** Only records after this seq (the previous page's `next`). */
  after?: number | undefined;
  limit: number;
}

export interface AuditPage {
  records: AuditRecord[];
  /** The last record's seq when more records match, else null. */
  next: number | null;
}

/** The audit log's port, kept by the journal's storage (the method names are the journal's own, beside its other ports'). */
export interface AuditLog {
  /** Appends one record in a transaction of its own, and answers it as chained. */
  appendAudit(entry: AuditEntry): Promise<AuditRecord>;
  /** The chain's head now. */
  auditHead(): Promise<AuditHead>;
  /** A page of the records matching the query, oldest first. */
  auditPage(query: AuditPageQuery): Promise<AuditPage>;
}
