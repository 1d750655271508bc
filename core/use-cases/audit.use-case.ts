/**
 * Reading the audit log (GET /api/v1/audit): a page of its records, oldest first, for an admin key.
 * The records are the chain as stored, hashes included, so that a page exported can be verified
 * (`npm run audit -- verify --file`).
 */
import { authorizeAuditRead, callerOf } from "../access/authorize.js";
import { InvalidArgumentError } from "../errors.js";
import { AUDIT_ACTIONS, type AuditAction, type AuditLog, type AuditRecord } from "../ports/audit.port.js";
import type { TradeContext } from "./trade-context.js";
import { fields, range } from "./trade-history.use-case.js";
import type { PolicySource } from "./trade-status.use-case.js";

export const DEFAULT_AUDIT_PAGE = 100;
export const MAX_AUDIT_PAGE = 1000;
const CURSOR = /^a([1-9][0-9]{0,15})$/;

/** A page of the audit log. */
export interface AuditListView {
  /** Oldest first, as chained. */
  records: AuditRecord[];
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: string | null;
}

export type ListAuditUseCase = (query: unknown, context?: TradeContext) => Promise<AuditListView>;

/**
 * The records matching `action`, `actor` and [`since`, `until`) (ISO 8601), `limit` (1 to 1000,
 * default 100) at a time from `cursor` (a page's nextCursor). Only an admin key reads it.
 */
export function listAuditUseCase(audit: AuditLog, policy?: PolicySource): ListAuditUseCase {
  return async (input, context = {}) => {
    authorizeAuditRead(policy?.(), callerOf(context));
    const query = fields(input, ["action", "actor", "since", "until", "limit", "cursor"]);
    if (query.action !== undefined && !(AUDIT_ACTIONS as readonly string[]).includes(query.action))
      throw new InvalidArgumentError("action", `must be one of ${AUDIT_ACTIONS.join(", ")}`);
    if (query.actor !== undefined && query.actor.length > 256)
      throw new InvalidArgumentError("actor", "must be at most 256 characters");
    const { since, until } = range(query);
    const after = query.cursor === undefined ? undefined : CURSOR.exec(query.cursor)?.[1];
    if (query.cursor !== undefined && after === undefined)
      throw new InvalidArgumentError("cursor", "must be a nextCursor this service answered");
    const limit =
      query.limit === undefined ? DEFAULT_AUDIT_PAGE : /^\d{1,4}$/.test(query.limit) ? Number(query.limit) : 0;
    if (limit < 1 || limit > MAX_AUDIT_PAGE)
      throw new InvalidArgumentError("limit", `must be an integer from 1 to ${MAX_AUDIT_PAGE}`);
    const page = await audit.auditPage({
      action: query.action as AuditAction | undefined,
      actor: query.actor,
      since,
      until,
      after: after === undefined ? undefined : Number(after),
      limit,
    });
    return { records: page.records, nextCursor: page.next === null ? null : `a${page.next}` };
  };
}
