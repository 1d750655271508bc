/**
 * A trade's states, what each of the journal's operations does to a trade in each of them, and the
 * rules that hold across them. The journals store what this module decides: the memory journal
 * asks `tradeVerdict`, the SQLite and PostgreSQL journals build their statements' conditions from
 * `TRADE_TRANSITIONS` (adapters/journal/transitions.ts), and the journal contract suite checks on
 * every (state, operation) pair that all three do what this module says.
 *
 * Adding a state is a change here (TRADE_STATUSES, and where it stands in each operation below: a
 * state left out of an operation fails to compile) plus a migration of the journals' CHECK
 * constraints on `trades.status`.
 */

/**
 * - `accepted`: validated and recorded, nothing signed yet;
 * - `signed`: its transaction is signed and recorded (wallet, nonce, hash, fees, deadline) and
 *   is about to be, or has been, broadcast; only the chain can tell which;
 * - `submitted`: a node accepted its transaction, which is not mined (or was mined in a block
 *   a reorg removed);
 * - `mined`: mined, with fewer confirmations than the service requires; receipt recorded;
 * - `confirmed`: mined with the required confirmations, with its receipt (a replacement's
 *   receipt when a re-priced replacement was the one mined);
 * - `failed`: refused with nothing paid (before or at broadcast, or its nonce was taken by a
 *   transaction the service did not sign for it), or reverted when mined; with the error;
 * - `expired`: its deadline passed unmined and its nonce was taken by a no-op; or, held for an
 *   approval, not approved in time (error `approval_expired`); nothing paid;
 * - `pending_approval`: an approval rule of the access file held it (core/approvals.ts): nothing
 *   signed, its room in the limits kept, waiting for its approvers;
 * - `approved`: approved as many times as its rules ask, and being run from "price and prove"
 *   (nothing signed yet: signed, it is `signed`);
 * - `rejected`: an approver rejected it; final, nothing paid;
 * - `cancelled`: its sender (or an admin) cancelled it (core/use-cases/trade-cancel.use-case.ts):
 *   at once when nothing of it was signed, else once the no-op at its nonce was mined with the
 *   required confirmations; final, nothing paid, its room in the limits given back.
 */
export const TRADE_STATUSES = [
  "accepted",
  "signed",
  "submitted",
  "mined",
  "confirmed",
  "failed",
  "expired",
  "pending_approval",
  "approved",
  "rejected",
  "cancelled",
] as const;

export type TradeStatus = (typeof TRADE_STATUSES)[number];

/** Where every trade starts (TradeJournal.open), and where one whose only transaction was given back returns. */
export const INITIAL_STATUS = "accepted" satisfies TradeStatus;

/**
 * The request has its answer. Only the chain's word moves a trade on from here (CHAIN_VERDICTS: a
 * reorg, a receipt, a revert, the no-op at its nonce), or its being signed again (`markSigned`).
 */
export const FINAL_STATUSES = [
  "confirmed",
  "failed",
  "expired",
  "rejected",
  "cancelled",
] as const satisfies readonly TradeStatus[];

/**
 * The states of a trade that may pay or has paid: what a spending limit counts (core/access). A
 * held trade keeps its room while it waits, and an approved one while it runs. A failed, expired
 * rejected or cancelled trade paid nothing and gives its room back; so does one forgotten (deleted).
 */
export const SPENDING_STATUSES = [
  "accepted",
  "signed",
  "submitted",
  "mined",
  "confirmed",
  "pending_approval",
  "approved",
] as const satisfies readonly TradeStatus[];

/** Every operation of the journals that changes a trade's status or deletes it, by its method's name. */
export type TradeOperation =
  | "markSigned"
  | "markSubmitted"
  | "markReorged"
  | "markMined"
  | "markConfirmed"
  | "markFailed"
  | "markExpired"
  | "discard"
  | "releaseSlot"
  | "forgetUnsigned"
  | "markHeld"
  | "markApproved"
  | "markRejected"
  | "expireApproval"
  | "markCancelled";

/** The operations that record what the chain says of a trade's transactions. */
export const CHAIN_VERDICTS = [
  "markReorged",
  "markMined",
  "markConfirmed",
  "markFailed",
  "markExpired",
  "markCancelled",
] as const satisfies readonly TradeOperation[];

/**
 * What an operation does to one trade: `applies` (the trade moves to the operation's `to`, or is
 * deleted), `ignored` (the call succeeds and changes nothing) or `refused` (the call throws and
 * changes nothing).
 */
export type TradeVerdict = "applies" | "ignored" | "refused";

/** What an operation does, from each state. */
export interface TradeTransition {
  /** The status a trade it applies to is left in; null: the trade is deleted. */
  readonly to: TradeStatus | null;
  readonly applies: readonly TradeStatus[];
  readonly ignored: readonly TradeStatus[];
  readonly refused: readonly TradeStatus[];
  /**
   * Present when it applies only to a trade without a signed transaction (`txHash` null): what it
   * does to one with a transaction, whatever its status.
   */
  readonly whenSigned?: Exclude<TradeVerdict, "applies">;
  /**
   * Statuses of `applies` it applies from only when the trade has a signed transaction; from one
   * of them without a transaction it is refused.
   */
  readonly onlySigned?: readonly TradeStatus[];
  /**
   * Present when it leaves a trade a cancel was asked of (TradeRecord.cancel) in another status
   * than `to`: that status.
   */
  readonly whenCancelAsked?: TradeStatus;
  /**
   * Present when it leaves a trade its approvers approved (TradeRecord.approval), and no cancel
   * was asked of, in another status than `to`: that status.
   */
  readonly whenApproved?: TradeStatus;
}

/** A compile error naming the statuses a transition leaves out, so that a new state is placed in every operation. */
type EveryStatus<Placed> = [Exclude<TradeStatus, Placed>] extends [never]
  ? unknown
  : { "each state must be placed": Exclude<TradeStatus, Placed> };

/** A transition, checked to place every state, that keeps the status it leaves a trade in as its type. */
function transition<
  const To extends TradeStatus | null,
  const A extends readonly TradeStatus[],
  const I extends readonly TradeStatus[],
  const R extends readonly TradeStatus[],
>(
  rule: TradeTransition & { to: To; applies: A; ignored: I; refused: R } & EveryStatus<
      A[number] | I[number] | R[number]
    >,
): TradeTransition & { readonly to: To } {
  return rule;
}

/** Every state but `pending_approval`: where an approver's decision does not apply. */
const NOT_HELD = TRADE_STATUSES.filter(
  (status): status is Exclude<TradeStatus, "pending_approval"> => status !== "pending_approval",
);

/** The states a trade is in while held for, or given, its approval: nothing of it is signed. */
const AWAITING = ["pending_approval", "approved"] as const satisfies readonly TradeStatus[];

/**
 * What each operation does from each state. The rules they keep:
 * - a final state is left only on the chain's word (CHAIN_VERDICTS), or by being signed again;
 * - `expired` stays expired when the trade is then said to have failed: the no-op that took its
 *   nonce is its outcome (a receipt of its own transaction still makes it mined or confirmed);
 * - a trade with a signed transaction is never deleted: its money may have left the wallet;
 * - a trade held for an approval (`pending_approval`) or rejected is never signed: only an
 *   approved one is, and only an approver's decision or the expiry moves a held one on.
 */
export const TRADE_TRANSITIONS = {
  // Signed, or signed again at another nonce (the node refused the first, so nothing of it was
  // broadcast): from every state a trade may pay from, since a trade the monitor judged failed or
  // expired while its first nonce was refused is signed again, and the chain's later word decides.
  markSigned: transition({
    to: "signed",
    applies: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "expired", "approved"],
    ignored: [],
    // A cancelled trade is never signed again: its sender was told nothing is paid.
    refused: ["pending_approval", "rejected", "cancelled"],
    // A failed or expired trade is signed again only over its own first signature; one that never
    // had a transaction (an approved trade failed as interrupted while its run went on) stays
    // failed: its client was told nothing was paid, and its room was given back.
    onlySigned: ["failed", "expired"],
  }),
  // A node holds its transaction. Late news for a trade the chain already spoke of: nothing.
  markSubmitted: transition({
    to: "submitted",
    applies: ["signed"],
    ignored: ["accepted", "submitted", "mined", "confirmed", "failed", "expired", ...AWAITING, "rejected", "cancelled"],
    refused: [],
  }),
  // A reorg took its block away: only a mined trade has a block to lose.
  markReorged: transition({
    to: "submitted",
    applies: ["mined", "confirmed"],
    ignored: ["accepted", "signed", "submitted", "failed", "expired", ...AWAITING, "rejected", "cancelled"],
    refused: [],
  }),
  // A receipt is the chain's word, whatever was recorded before (a trade failed for a nonce found
  // taken, then found mined after all, is corrected). A trade never signed has no receipt.
  markMined: transition({
    to: "mined",
    applies: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "expired", "cancelled"],
    ignored: [],
    refused: [...AWAITING, "rejected"],
  }),
  markConfirmed: transition({
    to: "confirmed",
    applies: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "expired", "cancelled"],
    ignored: [],
    refused: [...AWAITING, "rejected"],
  }),
  // Expired stays expired: its no-op took the nonce, and that is its outcome. An approved trade
  // that cannot run (the price moved past its minimum, its quote expired) fails, nothing signed.
  markFailed: transition({
    to: "failed",
    applies: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "approved"],
    ignored: ["expired", "cancelled"],
    refused: ["pending_approval", "rejected"],
  }),
  markExpired: transition({
    to: "expired",
    applies: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "expired"],
    // A cancelled trade's no-op took its nonce: it stays cancelled.
    ignored: ["cancelled"],
    refused: [...AWAITING, "rejected"],
  }),
  // Refused before anything was signed: forgotten, so a retry with its key runs afresh. Never a
  // trade with a signed transaction (every trade signed, submitted, mined or confirmed has one),
  // nor one an approval rule held: its outcome is its approvers' (and the audit log's).
  discard: transition({
    to: null,
    applies: ["accepted", "failed", "expired"],
    // A trade cancelled before it was signed keeps its record: its run, refused, passes over it.
    ignored: ["cancelled"],
    refused: ["signed", "submitted", "mined", "confirmed", ...AWAITING, "rejected"],
    whenSigned: "refused",
  }),
  // Its slot's only transaction can never be mined: back to accepted, in the same write as the
  // slot, so it is never signed without a transaction. Once a node took it, the chain decides. A
  // trade a cancel was asked of while its send was on its way is cancelled instead (it is never
  // signed again: given back, its run would forget it, and a retry with its key would pay it). An
  // approved trade goes back to approved, which its run fails (accepted, it would be forgotten).
  releaseSlot: transition({
    to: INITIAL_STATUS,
    whenCancelAsked: "cancelled",
    whenApproved: "approved",
    applies: ["signed"],
    ignored: ["accepted", "submitted", "mined", "confirmed", "failed", "expired", ...AWAITING, "rejected", "cancelled"],
    refused: [],
  }),
  // Accepted and never signed by a process that is gone (or left so too long): forgotten. A held
  // trade is not: it waits for its approvers, or its expiry.
  forgetUnsigned: transition({
    to: null,
    applies: ["accepted"],
    ignored: ["signed", "submitted", "mined", "confirmed", "failed", "expired", ...AWAITING, "rejected", "cancelled"],
    refused: [],
    whenSigned: "ignored",
  }),
  // An approval rule matched it: held, nothing signed, its room in the limits kept.
  markHeld: transition({
    to: "pending_approval",
    applies: ["accepted"],
    ignored: [],
    refused: ["signed", "submitted", "mined", "confirmed", "failed", "expired", ...AWAITING, "rejected", "cancelled"],
    whenSigned: "refused",
  }),
  // An approval given: recorded on a held trade, which is approved once it has as many as its
  // rules ask (before that it stays pending_approval, the approval recorded).
  markApproved: transition({
    to: "approved",
    applies: ["pending_approval"],
    ignored: [],
    refused: NOT_HELD,
  }),
  // Rejected by an approver: final, nothing paid, its room given back.
  markRejected: transition({
    to: "rejected",
    applies: ["pending_approval"],
    ignored: [],
    refused: NOT_HELD,
  }),
  // Not approved within its rule's expiresAfter: expired (approval_expired), its room given back. A
  // sweep: it passes over every trade not held.
  expireApproval: transition({
    to: "expired",
    applies: ["pending_approval"],
    ignored: NOT_HELD,
    refused: [],
  }),
  // Cancelled by its sender or an admin (trade-cancel.use-case.ts): at once when nothing of it is
  // signed (accepted, held or approved: a run still on its way is then refused at markSigned, so
  // nothing of it is broadcast); with a transaction, only on the chain's word, the no-op at its
  // nonce mined with the required confirmations (from wherever the chain's earlier word left it,
  // as markExpired). A rejected trade stays rejected; a cancelled one, cancelled.
  markCancelled: transition({
    to: "cancelled",
    applies: ["accepted", "signed", "submitted", "mined", "confirmed", "failed", "expired", ...AWAITING],
    ignored: ["cancelled"],
    refused: ["rejected"],
  }),
} satisfies { readonly [O in TradeOperation]: TradeTransition };

/**
 * The status `operation` leaves a trade it applies to in: `whenCancelAsked` for a trade a cancel
 * was asked of, `whenApproved` for one its approvers approved, else `to`.
 */
export function tradeStatusAfter(
  operation: Exclude<TradeOperation, "discard" | "forgetUnsigned">,
  trade: { cancel?: unknown; approval?: unknown },
): TradeStatus {
  const rule: TradeTransition = TRADE_TRANSITIONS[operation];
  return (
    (trade.cancel != null ? rule.whenCancelAsked : undefined) ??
    (trade.approval != null ? rule.whenApproved : undefined) ??
    (rule.to as TradeStatus)
  );
}

/** What `operation` does to a trade in its present state. */
export function tradeVerdict(
  operation: TradeOperation,
  trade: { status: TradeStatus; txHash: string | null },
): TradeVerdict {
  const rule = TRADE_TRANSITIONS[operation];
  if (rule.whenSigned !== undefined && trade.txHash !== null) return rule.whenSigned;
  if (rule.onlySigned?.includes(trade.status) && trade.txHash === null) return "refused";
  if (rule.applies.includes(trade.status)) return "applies";
  return rule.ignored.includes(trade.status) ? "ignored" : "refused";
}

/** Why a journal refused `operation` on a trade: the trade model refuses it from where the trade stands. */
export class TradeTransitionError extends Error {
  readonly operation: TradeOperation;
  readonly tradeId: string;
  readonly status: TradeStatus;

  constructor(operation: TradeOperation, tradeId: string, trade: { status: TradeStatus; txHash: string | null }) {
    const rule: TradeTransition = TRADE_TRANSITIONS[operation];
    const signed = trade.txHash !== null && rule.whenSigned === "refused";
    const unsigned = trade.txHash === null && rule.onlySigned?.includes(trade.status) === true;
    const why = signed
      ? "has a signed transaction"
      : unsigned
        ? `is ${trade.status} without a signed transaction`
        : `is ${trade.status}`;
    super(`trade ${tradeId} ${why}: ${operation} does not apply`);
    this.name = "TradeTransitionError";
    this.operation = operation;
    this.tradeId = tradeId;
    this.status = trade.status;
  }
}
