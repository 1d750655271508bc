/**
 * Approving held trades (docs/operations.md "Approvals"): the list of trades waiting for an
 * approval the caller may give (GET /api/v1/approvals?status=pending, gRPC ListApprovals), and an
 * approver's decision (POST /api/v1/trades/{id}/approve | reject, gRPC ApproveTrade, RejectTrade).
 * Who may decide: a key with the approver role (403 otherwise) that sees the key that sent the
 * trade (404 otherwise, as for reads), never that key itself (403). An approval that completes a
 * trade's starts its run in the background (trade-approved.ts); the decision is answered at once.
 */
import { authorizeApprover, authorizeDecision, isRequester, MAX_REASON_LENGTH } from "../approvals.js";
import { callerOf, visibilityOf } from "../access/authorize.js";
import type { Caller } from "../access/policy.js";
import { ApprovalConflictError, InvalidArgumentError } from "../errors.js";
import type { ApprovalJournal, ApprovalVerdict } from "../ports/approval.port.js";
import type { TradeJournal, TradeRecord } from "../ports/journal.port.js";
import { TradeTransitionError } from "../trade-states.js";
import type { TradeContext } from "./trade-context.js";
import { decodeCursor, encodeCursor, fields, parseLimit } from "./trade-history.use-case.js";
import { type PolicySource, TRADE_ID, tradeView, type TradeView } from "./trade-status.use-case.js";

/** A page of the trades waiting for the caller's approval, oldest held last (newest first, as the history). */
export interface ApprovalListView {
  trades: TradeView[];
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: string | null;
}

export type ListApprovalsUseCase = (query: unknown, context?: TradeContext) => Promise<ApprovalListView>;
/** `id`: the trade's id; `body`: the request's optional {"reason"}. Answers the trade as it is after the decision. */
export type DecideTradeUseCase = (id: unknown, body: unknown, context?: TradeContext) => Promise<TradeView>;

export interface ApprovalDeps {
  journal: TradeJournal;
  approvals: ApprovalJournal;
  policy?: PolicySource;
  /** Starts an approved trade's run, in the background (runApproved). */
  run(record: TradeRecord): void;
}

/**
 * The held trades the caller may approve: those of the keys it sees, but its own, and those it
 * approved already; `status` is "pending" (the default); `limit` and `cursor` as the history's.
 */
export function listApprovalsUseCase(journal: TradeJournal, policy?: PolicySource): ListApprovalsUseCase {
  return async (input, context = {}) => {
    const caller = callerOf(context);
    const current = policy?.();
    authorizeApprover(current, caller);
    const query = fields(input, ["status", "limit", "cursor"]);
    if (query.status !== undefined && query.status !== "pending")
      throw new InvalidArgumentError("status", "must be pending (the trades waiting for an approval)");
    const limit = parseLimit(query.limit);
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const visible = visibilityOf(current, caller);
    const page = await journal.page({ visible, status: "pending_approval", limit, after });
    const now = Date.now();
    const waiting = page.trades.filter((record) => mayGive(caller, record, now));
    return {
      trades: waiting.map((record) => tradeView(record, null)),
      nextCursor: page.next === null ? null : encodeCursor(page.next),
    };
  };
}

/** Whether the caller may still give the held trade an approval: not its own, not approved by it, not expired. */
function mayGive(caller: Caller, record: TradeRecord, now: number): boolean {
  const approval = record.approval;
  if (approval == null || isRequester(caller, record)) return false;
  return Date.parse(approval.expiresAt) > now && !approval.approvals.some((given) => given.by === caller.key?.name);
}

/** The decision's reason: an optional {"reason"} of at most MAX_REASON_LENGTH characters. */
function parseReason(body: unknown): string | null {
  if (body === undefined || body === null) return null;
  if (typeof body !== "object" || Array.isArray(body))
    throw new InvalidArgumentError("request", 'must be a JSON object, {"reason": "..."}, or no body');
  for (const key of Object.keys(body))
    if (key !== "reason")
      throw new InvalidArgumentError(
        /^[\w.-]{1,64}$/.test(key) ? key : "request",
        "is not a known field (only reason is)",
      );
  const reason = (body as { reason?: unknown }).reason;
  if (reason === undefined || reason === null) return null;
  if (typeof reason !== "string") throw new InvalidArgumentError("reason", "must be a string");
  if (reason.length > MAX_REASON_LENGTH)
    throw new InvalidArgumentError("reason", `must be at most ${MAX_REASON_LENGTH} characters`);
  return reason === "" ? null : reason;
}

/** An approver's decision (`verdict`) on a held trade. */
export function decideTradeUseCase(verdict: ApprovalVerdict, deps: ApprovalDeps): DecideTradeUseCase {
  return async (id, body, context = {}) => {
    const caller = callerOf(context);
    const current = deps.policy?.();
    authorizeApprover(current, caller);
    if (typeof id !== "string" || !TRADE_ID.test(id))
      throw new InvalidArgumentError(
        "id",
        "must be a trade's id (a UUID, as GET /api/v1/trades/{id} and the 202 name it)",
      );
    const reason = parseReason(body);
    const trade = authorizeDecision(current, caller, await deps.journal.get(id.toLowerCase()), id);
    const decision = { by: caller.key!.name, at: new Date().toISOString(), reason };
    let decided: Awaited<ReturnType<ApprovalJournal["decideApproval"]>>;
    try {
      decided = await deps.approvals.decideApproval(trade.id, verdict, decision);
    } catch (error) {
      if (!(error instanceof TradeTransitionError)) throw error;
      const now = (await deps.journal.get(trade.id).catch(() => undefined)) ?? trade;
      throw new ApprovalConflictError(trade.id, now.status, conflictDetail(now, caller, verdict));
    }
    if (decided.outcome === "approved") deps.run(decided.record);
    return tradeView(decided.record, null);
  };
}

/** What the conflict was: the caller's own other decision, or how the trade was decided. */
function conflictDetail(record: TradeRecord, caller: Caller, verdict: ApprovalVerdict): string | undefined {
  const name = caller.key?.name;
  if (verdict === "reject" && record.approval?.approvals.some((given) => given.by === name))
    return `and api key "${name}" approved it`;
  if (record.approval?.rejection) return `rejected by "${record.approval.rejection.by}"`;
  if (record.status === "expired") return "its approval expired";
  return record.approval == null ? "never held for an approval" : undefined;
}
