/**
 * The memory journal's audit log: the records in an array, appended in the same synchronous step
 * as the change each records (which is what a transaction is in memory).
 */
import type { AuditEntry, AuditHead, AuditLog, AuditPage, AuditPageQuery, AuditRecord } from "../../../core/index.js";
import { EMPTY_HEAD, sealAudit } from "../audit-chain.js";

export class MemoryAudit implements AuditLog {
  readonly records: AuditRecord[] = [];

  /** Appends now, in the caller's synchronous step (its transaction). */
  appendNow(entry: AuditEntry): AuditRecord {
    const record = sealAudit(entry, this.#head(), Date.now());
    this.records.push(record);
    return structuredClone(record);
  }

  async appendAudit(entry: AuditEntry): Promise<AuditRecord> {
    return this.appendNow(entry);
  }

  async auditHead(): Promise<AuditHead> {
    return this.#head();
  }

  async auditPage(query: AuditPageQuery): Promise<AuditPage> {
    const since = query.since?.toISOString();
    const until = query.until?.toISOString();
    const matching = this.records.filter(
      (r) =>
        (query.after === undefined || r.seq > query.after) &&
        (query.action === undefined || r.action === query.action) &&
        (query.actor === undefined || r.actor === query.actor) &&
        (since === undefined || r.at >= since) &&
        (until === undefined || r.at < until),
    );
    const records = matching.slice(0, query.limit);
    const last = records.at(-1);
    return {
      records: structuredClone(records),
      next: matching.length > query.limit && last !== undefined ? last.seq : null,
    };
  }

  #head(): AuditHead {
    const last = this.records.at(-1);
    return last === undefined ? EMPTY_HEAD : { seq: last.seq, hash: last.hash };
  }
}
