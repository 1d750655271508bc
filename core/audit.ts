/**
 * What the audit log records of a trade and of a delivery retried (the entries; the chain is the
 * journal's, core/ports/audit.port.ts): who, what, about what, and the code and the rule or limit
 * that decided a refusal. Malformed requests and unknown keys are never recorded: they are
 * refused before anything here runs, and recording them would let anyone grow the chain.
 */
import type { Caller } from "./access/policy.js";
import {
  ApprovalConflictError,
  DomainError,
  PermissionDeniedError,
  SpendingLimitError,
  TradeNotFoundError,
} from "./errors.js";
import type { ApprovalVerdict } from "./ports/approval.port.js";
import { type AuditEntry, type AuditNote, type AuditValue, SERVICE_ACTOR } from "./ports/audit.port.js";
import type { OutsideTransaction, WalletPause } from "./ports/watch.port.js";
import type { TradeKind, TradeRequest } from "./types.js";

/** The actor of a caller's request: its key's name in the access file, or its id without one. */
export function actorOf(caller: Caller): string {
  return caller.key?.name ?? caller.id;
}

/** The trade as asked: its kind and the request's fields as sent (amounts as the caller wrote them). */
function tradeDetails(kind: TradeKind, request: TradeRequest, quoteId: string | null): Record<string, AuditValue> {
  return {
    kind,
    userAddress: request.userAddress,
    destinatary: request.destinatary,
    amount: request.amount,
    usdAddress: request.usdAddress,
    ...(quoteId === null ? {} : { quoteId }),
  };
}

/** `trade.accepted`, but its subject: the journal gives it the id of the trade it creates. */
export function acceptedEntry(
  caller: Caller,
  kind: TradeKind,
  request: TradeRequest,
  quoteId: string | null,
): AuditNote {
  return { actor: actorOf(caller), action: "trade.accepted", details: tradeDetails(kind, request, quoteId) };
}

/**
 * The code and the rule or limit that refused it: a role, scope or the denylist
 * (PermissionDeniedError), a spending limit (SpendingLimitError), or another domain error after
 * it was accepted (the chain would revert it, funds, fees, a quote's terms). Anything else is a
 * fault, recorded as `internal` without its message (which is only logged).
 */
export function refusalDetails(error: unknown): Record<string, AuditValue> {
  if (!(error instanceof DomainError)) return { code: "internal", message: "internal error" };
  const details: Record<string, AuditValue> = { code: error.code, message: error.message };
  if (error instanceof PermissionDeniedError) details.rule = error.rule;
  if (error instanceof SpendingLimitError) details.limit = error.limit;
  return details;
}

/**
 * `trade.refused`: before it was recorded (`subject` null, the trade as asked in its details), or
 * after it was accepted and before anything was signed (`subject` its id; its record is discarded
 * in the same write).
 */
export function refusedEntry(
  caller: Caller,
  error: unknown,
  trade: { kind: TradeKind; request: TradeRequest; quoteId: string | null; id: string | null },
): AuditEntry {
  return {
    actor: actorOf(caller),
    action: "trade.refused",
    subject: trade.id,
    details: { ...refusalDetails(error), ...tradeDetails(trade.kind, trade.request, trade.quoteId) },
  };
}

/** `trade.forgotten`: accepted, never signed, and forgotten by the journal's upkeep (TradeJournal.forgetUnsigned). */
export function forgottenEntry(id: string): AuditEntry {
  return {
    actor: SERVICE_ACTOR,
    action: "trade.forgotten",
    subject: id,
    details: {
      reason: "accepted and never signed by a process that is gone, or for a trade's lifetime; nothing was paid",
    },
  };
}

/** `delivery.retried`: a failed webhook delivery sent again by hand, in the write that makes it pending. */
export function deliveryRetriedEntry(caller: Caller, deliveryId: string): AuditEntry {
  return {
    actor: actorOf(caller),
    action: "delivery.retried",
    subject: deliveryId,
    details: { by: caller.key?.roles.has("admin") === true ? "admin" : "owner" },
  };
}

/** Whether an error refuses an approver's decision by authority or because the trade is decided (not a malformed request). */
export function refusesDecision(error: unknown): boolean {
  return (
    error instanceof PermissionDeniedError ||
    error instanceof TradeNotFoundError ||
    error instanceof ApprovalConflictError
  );
}

/**
 * `approval.refused`: a decision on a held trade refused (no approver role, the requester's own,
 * a trade the key does not see or that does not exist, one already decided); its subject the id
 * asked, when it is one.
 */
export function decisionRefusedEntry(
  caller: Caller,
  verdict: ApprovalVerdict,
  subject: string | null,
  error: unknown,
): AuditEntry {
  return {
    actor: actorOf(caller),
    action: "approval.refused",
    subject,
    details: { verdict, ...refusalDetails(error) },
  };
}

/**
 * `wallet.outside_transaction`: a transaction mined from an exchange wallet that the service never
 * signed, recorded with the event it makes (WatchJournal.recordOutsideTransaction). Its subject is
 * the wallet; `paused` whether the wallet is paused for it (OUTSIDE_TX_POLICY=pause).
 */
export function outsideTransactionEntry(tx: OutsideTransaction, paused: boolean): AuditEntry {
  return {
    actor: SERVICE_ACTOR,
    action: "wallet.outside_transaction",
    subject: tx.wallet,
    details: {
      nonce: tx.nonce,
      hash: tx.hash,
      to: tx.to,
      value: tx.value === null ? null : tx.value.toString(),
      blockNumber: tx.blockNumber,
      paused,
    },
  };
}

/** `wallet.resumed`: an admin ended a wallet's pause, in the write that ends it. */
export function walletResumedEntry(caller: Caller, pause: WalletPause): AuditEntry {
  return {
    actor: actorOf(caller),
    action: "wallet.resumed",
    subject: pause.wallet,
    details: { pausedSince: pause.since.toISOString(), nonce: pause.nonce, hash: pause.hash },
  };
}

/**
 * `trade.cancel_requested` / `trade.sped_up`: the sender or an admin asked to cancel the trade, or
 * to re-price its transaction; `details` say what was done: the trade's nonce, the transaction it
 * replaced and the replacement's hash (null when nothing was signed: cancelled at once with nothing
 * signed, or left to the lifecycle monitor), and its fees in wei.
 */
export function replacementEntry(
  caller: Caller,
  action: "trade.cancel_requested" | "trade.sped_up",
  tradeId: string,
  details: {
    status: string;
    nonce: number | null;
    previousHash: string | null;
    hash: string | null;
    maxFeePerGas: string | null;
    maxPriorityFeePerGas: string | null;
    outcome: string;
  },
): AuditEntry {
  return { actor: actorOf(caller), action, subject: tradeId, details: { ...details } };
}

/** `replacement.refused`: a cancel or a speed-up refused (not a malformed request); its subject the id asked. */
export function replacementRefusedEntry(
  caller: Caller,
  what: "cancel" | "speed-up",
  subject: string,
  error: unknown,
): AuditEntry {
  return {
    actor: actorOf(caller),
    action: "replacement.refused",
    subject,
    details: { what, ...refusalDetails(error) },
  };
}
