/**
 * GET /api/v1/audit: a page of the audit log (an admin key only), oldest first, as JSON, or as CSV
 * (with the next page in a Link header) when Accept asks for it. Each record is the chain's as
 * stored, `details` as its canonical JSON in the CSV, so that an export can be verified.
 */
import type { AuditListView, UseCases } from "../../../core/index.js";
import { type AcceptedKey, callerOf, type NodeServerRequest } from "../request/index.js";
import { acceptsCsv, CSV_CONTENT_TYPE, csvField } from "./trade-history-csv.js";

/** The columns of the audit log's CSV form, in order. */
export const AUDIT_CSV_COLUMNS = ["seq", "at", "actor", "action", "subject", "details", "prevHash", "hash"] as const;

/** A page of records as CSV (RFC 4180): a header line, then one record a line, CRLF-terminated. */
export function auditCsv(list: AuditListView): string {
  const lines = [AUDIT_CSV_COLUMNS.join(",")];
  for (const record of list.records) {
    const row = { ...record, details: JSON.stringify(record.details) };
    lines.push(AUDIT_CSV_COLUMNS.map((column) => csvField(row[column])).join(","));
  }
  return `${lines.join("\r\n")}\r\n`;
}

type AuditAnswer =
  | { status: number; body: unknown }
  | { status: number; text: string; contentType: string; headers?: Record<string, string> };

/** The route, for the route table; `queryOf` reads the query string as the table reads every route's. */
export function auditRoute(useCases: UseCases, queryOf: (req: NodeServerRequest) => Record<string, string>) {
  return {
    method: "GET" as const,
    authenticated: true as const,
    jsonBody: false,
    handle: async (req: NodeServerRequest, _body: unknown, key: AcceptedKey): Promise<AuditAnswer> => {
      const query = queryOf(req);
      const list = await useCases.audit(query, callerOf(key));
      if (!acceptsCsv(req.headers.accept)) return { status: 200, body: list };
      const headers: Record<string, string> = {};
      if (list.nextCursor !== null) {
        const next = new URLSearchParams({ ...query, cursor: list.nextCursor });
        headers.link = `</api/v1/audit?${next}>; rel="next"`;
      }
      return { status: 200, text: auditCsv(list), contentType: CSV_CONTENT_TYPE, headers };
    },
  };
}
