/**
 * The audit log's chain (core/ports/audit.port.ts), one module for the three storages and for
 * `npm run audit -- verify`: a record's hash, a record sealed onto a head, and the check of a
 * chain read back from a journal.
 *
 * A record's hash is the SHA-256 of its canonical JSON (RFC 8785, the `canonicalize` package)
 * without `hash`: the keys sorted, no whitespace, strings and numbers as ECMAScript writes them.
 * The storages keep `details` as the canonical text that was hashed, so what is read back hashes
 * the same whatever the database does to JSON.
 */
import { createHash } from "node:crypto";

import canonicalize from "canonicalize";

import type { AuditEntry, AuditHead, AuditRecord } from "../../core/index.js";

/** The `prevHash` of the first record. */
export const GENESIS_HASH = "0".repeat(64);

/** The head of an empty chain. */
export const EMPTY_HEAD: AuditHead = { seq: 0, hash: GENESIS_HASH };

/** The canonical JSON (RFC 8785) of a value that has one; throws on one that has none (NaN, a lone surrogate, a cycle). */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError("an audit record's value has no JSON form");
  return text;
}

/** SHA-256 (lower-case hex) over the canonical JSON of `record` without its `hash`. */
export function auditHash(record: Omit<AuditRecord, "hash">): string {
  const { seq, at, actor, action, subject, details, prevHash } = record;
  const text = canonicalJson({ seq, at, actor, action, subject, details, prevHash });
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** When a record is appended, as it is hashed: RFC 3339 in UTC, to the millisecond. */
export function auditTime(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * `entry` as the record after `head`, at `atMs`, with its hash. Its details are copied through
 * their canonical JSON, which refuses what JSON cannot hold exactly: numbers that are not safe
 * integers (amounts are decimal strings), so that every storage gives back what was hashed.
 */
export function sealAudit(entry: AuditEntry, head: AuditHead, atMs: number): AuditRecord {
  const detailsJson = canonicalJson(entry.details);
  assertExactNumbers(entry.details);
  const unsealed = {
    seq: head.seq + 1,
    at: auditTime(atMs),
    actor: entry.actor,
    action: entry.action,
    subject: entry.subject,
    details: JSON.parse(detailsJson) as AuditRecord["details"],
    prevHash: head.hash,
  };
  return { ...unsealed, hash: auditHash(unsealed) };
}

/**
 * An entry's fields as the canonical JSON texts its record's canonical JSON is made of, for a
 * storage that hashes the record where the chain's head is (PostgreSQL's audit_append): the record
 * `{"action":A,"actor":B,"at":"<at>","details":D,"prevHash":"<hash>","seq":<seq>,"subject":S}`,
 * its keys in RFC 8785's order, hashes as auditHash does (the conformance suite checks every
 * storage's hashes against auditHash).
 */
export function canonicalParts(entry: AuditEntry): { action: string; actor: string; subject: string; details: string } {
  assertExactNumbers(entry.details);
  return {
    action: canonicalJson(entry.action),
    actor: canonicalJson(entry.actor),
    subject: canonicalJson(entry.subject),
    details: canonicalJson(entry.details),
  };
}

function assertExactNumbers(value: unknown): void {
  if (typeof value === "number" && !Number.isSafeInteger(value))
    throw new TypeError(`an audit record's number ${value} is not a safe integer: write it as a decimal string`);
  if (value !== null && typeof value === "object") for (const inner of Object.values(value)) assertExactNumbers(inner);
}

/** Where a chain read back stops matching, or its head when every record matches. */
export type AuditVerdict =
  | { ok: true; records: number; head: AuditHead }
  | { ok: false; seq: number; problem: string; records: number; head: AuditHead };

/**
 * Checks a chain read back oldest first: each record's seq is the one after the previous record's
 * (the first is 1), its prevHash is the previous record's hash (64 zeros for the first), and its
 * hash is the one its contents give. With `checkpoint` (a head a checkpoint logged), the chain
 * must hold that record with that hash: a tail cut after it, or rewritten up to it, fails.
 * Answers the first record that does not match.
 */
export async function verifyAudit(records: AsyncIterable<AuditRecord>, checkpoint?: AuditHead): Promise<AuditVerdict> {
  let head = EMPTY_HEAD;
  let count = 0;
  let witnessed = checkpoint === undefined || checkpoint.seq === 0;
  const fail = (seq: number, problem: string): AuditVerdict => ({ ok: false, seq, problem, records: count, head });
  for await (const record of records) {
    if (record.seq !== head.seq + 1)
      return record.seq <= head.seq
        ? fail(record.seq, `record ${record.seq} comes after record ${head.seq}: seq must grow by one`)
        : fail(
            head.seq + 1,
            `record ${head.seq + 1} is missing: record ${record.seq} follows record ${head.seq}` +
              (head.seq + 2 === record.seq ? "" : ` (records ${head.seq + 1} to ${record.seq - 1} are missing)`),
          );
    if (record.prevHash !== head.hash)
      return fail(record.seq, `record ${record.seq}'s prevHash is not record ${head.seq}'s hash`);
    if (auditHash(record) !== record.hash)
      return fail(record.seq, `record ${record.seq}'s hash does not match its contents (changed after it was written)`);
    head = { seq: record.seq, hash: record.hash };
    count += 1;
    if (checkpoint !== undefined && record.seq === checkpoint.seq) {
      if (record.hash !== checkpoint.hash)
        return fail(
          record.seq,
          `record ${record.seq}'s hash is not the checkpoint's: the chain was rewritten up to it`,
        );
      witnessed = true;
    }
  }
  if (!witnessed)
    return fail(
      head.seq + 1,
      `the chain ends at record ${head.seq}, before the checkpoint's record ${checkpoint!.seq}: ` +
        `records ${head.seq + 1} to ${checkpoint!.seq} (at least) were cut`,
    );
  return { ok: true, records: count, head };
}
