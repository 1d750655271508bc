/**
 * Approvals (ACCESS_FILE `approvals`, core/approvals.ts): a trade an approval rule matches is held
 * (`pending_approval`), nothing signed, until as many approver keys as its rules ask approve it,
 * one rejects it, or it expires. The trade journal keeps what its approval needs and has with the
 * trade (TradeRecord.approval), and makes each change in one write with its audit record.
 */
import type { AuditEntry } from "./audit.port.js";
import type { ApprovalDecision, TradeApproval, TradeRecord } from "./journal.port.js";

export type { ApprovalDecision, HeldQuote, TradeApproval } from "./journal.port.js";

/** What an approver decides. */
export type ApprovalVerdict = "approve" | "reject";

/**
 * What a decision did: `approved` (the last approval it needed: the caller runs it), `counted`
 * (an approval recorded, more needed), `rejected`, or `repeated` (the same approver's same decision
 * again: nothing changed, the same answer).
 */
export type DecisionOutcome = "approved" | "counted" | "rejected" | "repeated";

/** The journal's approvals, beside its trades (the same storage, the same rows). */
export interface ApprovalJournal {
  /**
   * `accepted` → `pending_approval`, with what its approval needs (`approval`, its lists empty),
   * recorded in the audit log (`trade.held`) in the same write.
   * @throws TradeTransitionError when the trade is not accepted (or has a transaction)
   */
  hold(id: string, approval: TradeApproval, audit: AuditEntry): Promise<void>;
  /**
   * Records `decision` on the held trade `id` (core/approvals.ts decideOn says what it does) and
   * its audit record, in one write, atomically across instances: of two approvals that each
   * complete it, exactly one answers `approved`. A held trade past its expiry is expired in that
   * write instead (audit `trade.approval_expired`), and the decision refused.
   * @throws TradeTransitionError when the trade is not held (decided, expired, or never held) and
   *   the decision is not a repetition; an unknown trade throws too
   */
  decideApproval(
    id: string,
    verdict: ApprovalVerdict,
    decision: ApprovalDecision,
  ): Promise<{ outcome: DecisionOutcome; record: TradeRecord }>;
  /**
   * Expires every held trade whose approval expired at `now` (`expired`, error `approval_expired`,
   * its room in the limits given back), each with its audit record in its write; and fails every
   * approved trade left unsigned since before `staleBefore` (its run was cut short: the process
   * that ran it stopped), nothing signed. Returns the ids expired and failed.
   */
  expireApprovals(now: Date, staleBefore: Date): Promise<{ expired: string[]; failed: string[] }>;
}
