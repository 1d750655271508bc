/** The memory journal's approvals (ApprovalJournal): each change and its audit record in one synchronous step. */
import {
  type ApprovalDecision,
  type ApprovalJournal,
  type ApprovalVerdict,
  type AuditEntry,
  approvalExpiredEntry,
  approvalExpiredError,
  decideOn,
  decisionEntry,
  type DecisionOutcome,
  INTERRUPTED_ERROR,
  interruptedEntry,
  rejectedError,
  TRADE_TRANSITIONS,
  type TradeApproval,
  type TradeRecord,
  TradeTransitionError,
  tradeVerdict,
} from "../../../core/index.js";
import type { MemoryStore, StoredTrade } from "./store.js";

export class MemoryApprovals implements ApprovalJournal {
  readonly #store: MemoryStore;

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  async hold(id: string, approval: TradeApproval, audit: AuditEntry): Promise<void> {
    const stored = this.#store.trade(id);
    const verdict = tradeVerdict("markHeld", stored);
    if (verdict === "refused") throw new TradeTransitionError("markHeld", id, stored);
    if (verdict === "ignored") return;
    this.#store.audit.appendNow(audit);
    this.#store.update(stored, { status: TRADE_TRANSITIONS.markHeld.to, approval: structuredClone(approval) });
  }

  async decideApproval(
    id: string,
    verdict: ApprovalVerdict,
    decision: ApprovalDecision,
  ): Promise<{ outcome: DecisionOutcome; record: TradeRecord }> {
    const stored = this.#store.trade(id);
    const step = decideOn(stored, verdict, decision);
    const operation = verdict === "approve" ? "markApproved" : "markRejected";
    switch (step.kind) {
      case "repeated":
        return { outcome: "repeated", record: this.#store.record(stored) };
      case "expired":
        this.#expire(stored);
        throw new TradeTransitionError(operation, id, stored);
      case "refused":
        throw new TradeTransitionError(operation, id, stored);
    }
    this.#store.audit.appendNow(decisionEntry(id, step.outcome, decision, step.approval));
    this.#store.update(stored, {
      status: step.status,
      approval: structuredClone(step.approval),
      ...(step.outcome === "rejected" && { error: rejectedError(decision) }),
    });
    return { outcome: step.outcome, record: this.#store.record(stored) };
  }

  async expireApprovals(now: Date, staleBefore: Date): Promise<{ expired: string[]; failed: string[] }> {
    const expired: string[] = [];
    const failed: string[] = [];
    for (const stored of this.#store.trades.values()) {
      const approval = stored.approval;
      if (approval == null) continue;
      if (stored.status === "pending_approval" && Date.parse(approval.expiresAt) <= now.getTime()) {
        this.#expire(stored);
        expired.push(stored.id);
      } else if (stored.status === "approved" && stored.updatedAt.getTime() < staleBefore.getTime()) {
        this.#store.audit.appendNow(interruptedEntry(stored.id));
        this.#store.update(stored, { status: TRADE_TRANSITIONS.markFailed.to, error: { ...INTERRUPTED_ERROR } });
        failed.push(stored.id);
      }
    }
    return { expired, failed };
  }

  /** A held trade past its expiry: expired (approval_expired), with its audit record, its room given back. */
  #expire(stored: StoredTrade): void {
    const approval = stored.approval!;
    this.#store.audit.appendNow(approvalExpiredEntry(stored.id, approval));
    this.#store.update(stored, {
      status: TRADE_TRANSITIONS.expireApproval.to,
      error: approvalExpiredError(approval),
    });
  }
}
