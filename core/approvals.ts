/**
 * Approvals, as the domain decides them (docs/operations.md "Approvals"): which rules of the access
 * policy hold a trade, what its approval then needs, what an approver's decision does to it, who
 * may decide, and what the audit log and the trade's record say of each step. Pure: the journals
 * make each change in one write (ApprovalJournal, core/ports/approval.port.ts), asking decideOn.
 */
import { sees, visibilityOf } from "./access/authorize.js";
import type { AccessPolicy, ApprovalRule, Caller } from "./access/policy.js";
import { actorOf } from "./audit.js";
import { PermissionDeniedError, TradeNotFoundError } from "./errors.js";
import type { ApprovalDecision, ApprovalVerdict, DecisionOutcome, TradeApproval } from "./ports/approval.port.js";
import { type AuditEntry, SERVICE_ACTOR } from "./ports/audit.port.js";
import type { TradeRecord } from "./ports/journal.port.js";
import type { TradeStatus } from "./trade-states.js";
import type { QuoteTerms } from "./types.js";

/** The longest reason an approver may give, in characters. */
export const MAX_REASON_LENGTH = 500;

/**
 * The rules of `policy` that hold a trade sent under `keyName` that counts `usd` against the
 * limits (LIMIT_USD_DECIMALS): each rule of that key (or of every key) it counts more than.
 */
export function holdingRules(
  policy: AccessPolicy | undefined,
  keyName: string | undefined,
  usd: bigint,
): ApprovalRule[] {
  const rules = policy?.approvals;
  if (rules === undefined || rules.length === 0) return [];
  return rules.filter(
    (rule) => (rule.keys === undefined || (keyName !== undefined && rule.keys.has(keyName))) && usd > rule.aboveUsd,
  );
}

/**
 * What a trade held by `rules` at `now` (ms) needs: the most approvers any of them asks, until
 * the earliest of their expiries; with the quote it named, its terms copied.
 */
export function newApproval(rules: readonly ApprovalRule[], now: number, quote?: QuoteTerms): TradeApproval {
  const expiresAt = Math.min(...rules.map((rule) => now + rule.expiresAfterMs));
  return {
    rules: rules.map((rule) => rule.name),
    required: Math.max(...rules.map((rule) => rule.approvers)),
    heldAt: new Date(now).toISOString(),
    expiresAt: new Date(expiresAt).toISOString(),
    quote:
      quote === undefined
        ? null
        : {
            quoteId: quote.quoteId,
            minOut: quote.minOut.toString(),
            expiresAt: new Date(quote.expiresAt).toISOString(),
          },
    approvals: [],
    rejection: null,
    approvedAt: null,
  };
}

/** What a decision does to a trade, as decideOn finds it. */
export type DecisionStep =
  /** The trade moves to `status` (or stays pending with one more approval) with `approval`. */
  | { kind: "applies"; outcome: Exclude<DecisionOutcome, "repeated">; status: TradeStatus; approval: TradeApproval }
  /** The same approver's same decision, already recorded: nothing changes. */
  | { kind: "repeated" }
  /** Held past its expiry: it expires now, and the decision is refused. */
  | { kind: "expired" }
  /** Not held, or this approver decided otherwise before: refused (409). */
  | { kind: "refused" };

/**
 * What `verdict` by `decision.by` does to a trade. The same approver repeating its decision gets
 * the same answer, whatever the trade became since; any other decision on a trade no longer held
 * (approved, rejected, expired), or an approver going back on its own, is refused.
 */
export function decideOn(
  trade: { status: TradeStatus; approval?: TradeApproval | null | undefined },
  verdict: ApprovalVerdict,
  decision: ApprovalDecision,
): DecisionStep {
  const approval = trade.approval;
  if (approval === undefined || approval === null) return { kind: "refused" };
  const approvedBefore = approval.approvals.some((given) => given.by === decision.by);
  if (verdict === "approve" ? approvedBefore : approval.rejection?.by === decision.by) return { kind: "repeated" };
  if (trade.status !== "pending_approval" || approvedBefore) return { kind: "refused" };
  if (Date.parse(approval.expiresAt) <= Date.parse(decision.at)) return { kind: "expired" };
  if (verdict === "reject")
    return { kind: "applies", outcome: "rejected", status: "rejected", approval: { ...approval, rejection: decision } };
  const approvals = [...approval.approvals, decision];
  const done = approvals.length >= approval.required;
  return {
    kind: "applies",
    outcome: done ? "approved" : "counted",
    status: done ? "approved" : "pending_approval",
    approval: { ...approval, approvals, approvedAt: done ? decision.at : null },
  };
}

/**
 * Whether the caller may approve or reject: a key with the approver role. Without an access file
 * no key holds a role, and no rule holds a trade.
 * @throws PermissionDeniedError naming the key and the role it needs
 */
export function authorizeApprover(policy: AccessPolicy | undefined, caller: Caller): void {
  const key = caller.key;
  if (policy === undefined || key === undefined)
    throw new PermissionDeniedError(
      "trades are approved with an approver key of the access file, and this service runs without ACCESS_FILE",
    );
  if (!key.roles.has("approver"))
    throw new PermissionDeniedError(
      `api key "${key.name}" may not approve or reject trades: its roles are ${[...key.roles].join(", ")} (it needs approver)`,
    );
}

/**
 * Whether the approver may decide on `trade`: it must see the key that sent it (`sees`; a trade it
 * does not see is not found, as for reads), and never be that key.
 * @throws TradeNotFoundError, or PermissionDeniedError for the requester's own trade
 */
export function authorizeDecision(
  policy: AccessPolicy | undefined,
  caller: Caller,
  trade: TradeRecord | undefined,
  id: string,
): TradeRecord {
  if (trade === undefined || !sees(visibilityOf(policy, caller), trade)) throw new TradeNotFoundError(id, "id");
  if (isRequester(caller, trade))
    throw new PermissionDeniedError(
      `api key "${caller.key?.name ?? caller.id}" may not approve or reject its own trade: another approver must`,
    );
  return trade;
}

/** Whether the caller is the key that sent the trade (by name, or by the id of its key). */
export function isRequester(caller: Caller, trade: { keyName: string | null; scope: string }): boolean {
  return (caller.key !== undefined && trade.keyName === caller.key.name) || trade.scope === caller.id;
}

/** The error a held trade that expired is recorded with, and answered to a keyed retry. */
export function approvalExpiredError(approval: TradeApproval): { code: string; message: string } {
  return {
    code: "approval_expired",
    message:
      `approval expired: the trade was not approved by ${approval.expiresAt} (${approval.approvals.length} of ` +
      `${approval.required} approvals, rules ${approval.rules.join(", ")}); nothing was signed or paid`,
  };
}

/** The error a rejected trade is recorded with. */
export function rejectedError(decision: ApprovalDecision): { code: string; message: string } {
  return {
    code: "trade_rejected",
    message: `trade rejected by approver "${decision.by}"${decision.reason === null ? "" : ` (${decision.reason})`}; nothing was signed or paid`,
  };
}

/** The error an approved trade is failed with when the process running it stopped before it was signed. */
export const INTERRUPTED_ERROR = {
  code: "approval_interrupted",
  message:
    "the approved trade's run was cut short before anything was signed (the service running it stopped); nothing was paid: send it again",
};

/** `trade.held`: the requester's trade, held by `approval`'s rules. */
export function heldEntry(caller: Caller, id: string, approval: TradeApproval): AuditEntry {
  return {
    actor: actorOf(caller),
    action: "trade.held",
    subject: id,
    details: {
      rules: approval.rules,
      required: approval.required,
      expiresAt: approval.expiresAt,
      ...(approval.quote === null ? {} : { quoteId: approval.quote.quoteId }),
    },
  };
}

/** `trade.approved` (one approval given, `final` when it was the last it needed) or `trade.rejected`, by the approver. */
export function decisionEntry(
  id: string,
  outcome: Exclude<DecisionOutcome, "repeated">,
  decision: ApprovalDecision,
  approval: TradeApproval,
): AuditEntry {
  return {
    actor: decision.by,
    action: outcome === "rejected" ? "trade.rejected" : "trade.approved",
    subject: id,
    details: {
      approvals: approval.approvals.length,
      required: approval.required,
      ...(outcome === "rejected" ? {} : { final: outcome === "approved" }),
      reason: decision.reason,
    },
  };
}

/** `trade.approval_expired`: not approved in time, by the service. */
export function approvalExpiredEntry(id: string, approval: TradeApproval): AuditEntry {
  return {
    actor: SERVICE_ACTOR,
    action: "trade.approval_expired",
    subject: id,
    details: {
      rules: approval.rules,
      approvals: approval.approvals.length,
      required: approval.required,
      expiresAt: approval.expiresAt,
    },
  };
}

/** `trade.refused`, by the service: an approved trade whose run was cut short, failed with nothing signed. */
export function interruptedEntry(id: string): AuditEntry {
  return {
    actor: SERVICE_ACTOR,
    action: "trade.refused",
    subject: id,
    details: { code: INTERRUPTED_ERROR.code, message: INTERRUPTED_ERROR.message },
  };
}
