import type { TradeKind, TradeRequest, TransactionReceipt } from "../types.js";
import type { TradeStatus } from "../trade-states.js";
import type { LimitCheck, LimitUse, Spend } from "../access/authorize.js";
import type { LimitPer } from "../access/policy.js";
import type { Visibility } from "../access/policy.js";
import type { Broadcast, Reservation } from "./nonce.port.js";
import type { AuditEntry, AuditNote } from "./audit.port.js";

/**
 * Where a journalled trade stands: its states, and what each of the journal's operations does
 * from each of them, are the trade model's (core/trade-states.ts).
 */
export type { TradeStatus };

/** One approver's decision: the approver key's name, when (RFC 3339), and its reason, if it gave one. */
export interface ApprovalDecision {
  by: string;
  at: string;
  reason: string | null;
}

/** A quote's terms, copied into a held trade that named it: the approved trade executes under them. */
export interface HeldQuote {
  quoteId: string;
  /** The least it may pay out, in the output's base units, as decimal text. */
  minOut: string;
  /** When the quote expires (RFC 3339): approved after that, the trade fails (quote_expired). */
  expiresAt: string;
}

/** What a held trade's approval needs and has, kept with the trade from when it was held (ApprovalJournal, approval.port.ts). */
export interface TradeApproval {
  /** The names of the rules that held it. */
  rules: string[];
  /** How many distinct approver keys must approve it: the most any of its rules asks. */
  required: number;
  /** When it was held, and when it expires unapproved (the earliest expiry of its rules), RFC 3339. */
  heldAt: string;
  expiresAt: string;
  /** The quote it named, its terms as they were when it was held; null without one. */
  quote: HeldQuote | null;
  /** The approvals given, oldest first. */
  approvals: ApprovalDecision[];
  /** The rejection, once an approver rejected it. */
  rejection: ApprovalDecision | null;
  /** When it had all its approvals (RFC 3339): its deadline counts from then. */
  approvedAt: string | null;
}

/**
 * A cancel asked of a trade (POST /api/v1/trades/{id}/cancel): who asked (the key's name in the
 * access file, or its id without one) and when (RFC 3339). Kept with the trade from the request
 * on, so that a restart still sees it through: its outcome and its no-op are read from the trade
 * (tradeView, trade-status.use-case.ts).
 */
export interface TradeCancel {
  requestedBy: string;
  requestedAt: string;
}

export interface TradeRecord {
  id: string;
  /** Who sent it: a hash of the api key, never the key. Idempotency keys are scoped by it. */
  scope: string;
  /** The access file's name of the key that sent it, recorded when it was accepted; null without an access file. */
  keyName: string | null;
  idempotencyKey: string | null;
  /** Hash of the kind and the request body, to tell a retry from a different request under the same key. */
  requestHash: string;
  kind: TradeKind;
  request: TradeRequest;
  status: TradeStatus;
  wallet: string | null;
  nonce: number | null;
  /** The hash that counts: the mined transaction's once mined, else the latest broadcast's. */
  txHash: string | null;
  /** The latest signed transaction, hex. */
  rawTx: string | null;
  /** Unix time (seconds) after which the trade's call reverts on chain; null until signed. */
  deadline: number | null;
  /** Every transaction broadcast at the trade's nonce, oldest first. */
  broadcasts: Broadcast[];
  receipt: TransactionReceipt | null;
  error: { code: string; message: string } | null;
  /** What its approval needs and has, once an approval rule held it (ApprovalJournal.hold); absent or null otherwise. */
  approval?: TradeApproval | null;
  /** The cancel asked of it, once one was; absent or null otherwise. */
  cancel?: TradeCancel | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewTrade {
  scope: string;
  /** The access file's name of the key that sends it, when the service has an access file. */
  keyName?: string | undefined;
  idempotencyKey: string | null;
  requestHash: string;
  kind: TradeKind;
  request: TradeRequest;
}

/** A trade's transaction as signed, recorded before it is broadcast. */
export interface SignedTradeTx {
  wallet: string;
  nonce: number;
  txHash: string;
  rawTx: string;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  /** Unix seconds: the `deadline` in its calldata. */
  deadline: number;
  /**
   * The native coin's USD price read when it was signed (NATIVE_USD_DECIMALS, core/trade-amounts.ts),
   * kept with the trade for its gas in USD once mined; absent when the service has no such price
   * (no native-coin feed, or its answer failed the feed policy).
   */
  nativeUsd?: bigint;
  /** What it holds back until it is final (NonceLedger.reservations), kept with its slot. */
  reserves?: readonly Reservation[];
}

/** Where a trade stands in the history's order: its creation time in microseconds since the epoch, then its id. */
export interface TradePosition {
  createdAtUs: bigint;
  id: string;
}

/** A page of the trades the caller sees (core/access/authorize.ts visibilityOf), newest first: (createdAt, id) descending. */
export interface TradePageQuery {
  visible: Visibility;
  status?: TradeStatus | undefined;
  kind?: TradeKind | undefined;
  /** createdAt at or after this. */
  since?: Date | undefined;
  /** createdAt before this. */
  until?: Date | undefined;
  /** How many trades at most (the use case keeps it within 1..500). */
  limit: number;
  /** Only trades after this position in the order (the previous page's `next`). */
  after?: TradePosition | undefined;
}

export interface TradePage {
  trades: TradeRecord[];
  /** The last trade's position when more trades follow, else null. */
  next: TradePosition | null;
}

/** The trades the caller sees, created in [since, until); either bound may be left open. */
export interface TradeSummaryQuery {
  visible: Visibility;
  since?: Date | undefined;
  until?: Date | undefined;
}

/**
 * The trades of one kind against one stable coin. `count` counts every trade in the range;
 * the amounts and the gas are those of the `executed` ones (mined or confirmed), read from
 * their receipts (core/trade-amounts.ts), in base units and wei.
 */
export interface TradeTotals {
  kind: TradeKind;
  /** The request's usdAddress, lower-case. */
  stable: string;
  count: number;
  executed: number;
  amountIn: bigint;
  amountOut: bigint;
  gasWei: bigint;
  /**
   * The executed trades' gas in USD, each at the native coin's price it was signed at:
   * Σ gasWei × nativeUsd, exact, at GAS_USD_DECIMALS (core/trade-amounts.ts). Null when any
   * executed trade of the group has none (signed without the price): a partial sum would
   * understate the cost. 0 when none executed.
   */
  gasUsd: bigint | null;
  /** How many of the `count` trades are in each status (only the statuses some are in). */
  statuses: Partial<Record<TradeStatus, number>>;
}

/**
 * The durable trade journal. Every accepted trade is recorded before its transaction is
 * broadcast, so a crash never loses track of money that left the wallet. Its transactions
 * are the trade's nonce slot in the NonceLedger (nonce.port.ts), which the same storage holds.
 * Implementations: in memory (tests), SQLite (one process) and PostgreSQL (several instances
 * sharing one journal). From which states each `mark…`, `discard` and `forgetUnsigned` applies,
 * and whether it ignores or refuses a trade in any other, is the trade model's
 * (TRADE_TRANSITIONS, core/trade-states.ts); a refusal throws a TradeTransitionError. Closing it
 * is the storage's business (the journal that holds every port).
 */
export interface TradeJournal {
  /**
   * Records a new trade, or, when (scope, idempotencyKey) already exists, returns that record
   * instead. Atomic across instances: of two concurrent opens with one key, exactly one creates.
   * A null idempotencyKey always creates. With `spending`, a trade it creates is counted against
   * the limits in the same atomic step, and refused (nothing recorded) when one has no room; a
   * record it finds is answered as it is, never counted again. With `audit`, a trade it creates is
   * recorded in the audit log (its subject the new trade's id) in the same transaction; a record
   * it finds, or a refusal, writes nothing.
   * @throws SpendingLimitError naming the limit, with when the window frees enough room
   */
  open(trade: NewTrade, spending?: Spending, audit?: AuditNote): Promise<{ created: boolean; record: TradeRecord }>;
  /**
   * Counts a trade it created under `spending` at `usd` instead (a sell's payout, once proven),
   * checked against `checks` as `open` checked it, atomically; nothing changes when a limit has no
   * room for the new amount.
   * @throws SpendingLimitError naming the limit
   */
  respend(id: string, usd: bigint, checks: readonly LimitCheck[]): Promise<void>;
  /** What each check's limit has used in its window now, in order: a quote's view, nothing counted or written. */
  spendingUse(checks: readonly LimitCheck[]): Promise<LimitUse[]>;
  /**
   * The `count` scopes of (per, window) that have used the most (`by` USD or trades), each with
   * what it had used when last brought up to date: at least its use now (spends only leave a
   * window), exact for the scopes `spendingUse` reads. The metrics' highest use of a limit.
   */
  spendingLeaders(per: LimitPer, windowMs: number, by: "usd" | "trades", count: number): Promise<SpendingLeader[]>;
  /**
   * `accepted` → `signed`, with the wallet's nonce slot for the trade and its first broadcast,
   * in one write that is durable before the transaction is broadcast. Signing again at another
   * nonce (the node refused the first nonce, so nothing of it was broadcast) moves the slot.
   */
  markSigned(id: string, tx: SignedTradeTx): Promise<void>;
  /** `signed` → `submitted`: a node holds its transaction. Does nothing in any other state. */
  markSubmitted(id: string): Promise<void>;
  /** `mined` or `confirmed` → `submitted`, its receipt (and the amounts and gas read from it) cleared: a reorg took its block away. */
  markReorged(id: string): Promise<void>;
  /**
   * → `mined` with its receipt (fewer confirmations than required); the slot is mined too. The
   * amounts and the gas are read from the receipt, and the gas in USD at the `nativeUsd` it was
   * signed with (SignedTradeTx), when it had one.
   */
  markMined(id: string, receipt: TransactionReceipt): Promise<void>;
  /** → `confirmed` with its receipt; the slot is mined too. */
  markConfirmed(id: string, receipt: TransactionReceipt): Promise<void>;
  /**
   * → `failed` with the error; an `expired` trade stays expired (its no-op took the nonce: that is
   * its outcome). With `audit`, recorded in the same write, only when the trade is failed by it
   * (an approved trade refused before it was signed).
   */
  markFailed(id: string, error: { code: string; message: string }, audit?: AuditEntry): Promise<void>;
  /** → `expired`, with the error saying why; its no-op took the nonce. */
  markExpired(id: string, error: { code: string; message: string }): Promise<void>;
  /**
   * Records a cancel asked of a trade `signed` or `submitted` that has none yet, before any no-op
   * is signed for it; a trade in any other state, or with a cancel already, is left as it is.
   * With `audit`, its record is appended in the same write, only when this cancel is recorded.
   * @returns the trade as it is after (with the first cancel asked, when one was), or undefined
   *   when the journal does not know it
   */
  requestCancel(id: string, cancel: TradeCancel, audit?: AuditEntry): Promise<TradeRecord | undefined>;
  /**
   * → `cancelled` with the error saying why (TRADE_TRANSITIONS.markCancelled). Without `cancel`: the
   * chain's word, its no-op mined with the required confirmations. With `cancel` (asked now): only a
   * trade without a signed transaction (one signed meanwhile is left as it is), and `cancel` is
   * recorded with it unless it has one already. With `audit`, its record is appended in the same
   * write, only when the trade is cancelled by it.
   * @returns whether the trade is cancelled after it
   */
  markCancelled(
    id: string,
    error: { code: string; message: string },
    cancel?: TradeCancel,
    audit?: AuditEntry,
  ): Promise<boolean>;
  /**
   * Deletes a trade refused before anything was signed, so a retry with its key runs afresh. With
   * `audit`, the refusal is recorded in the same transaction, only when the trade is deleted.
   */
  discard(id: string, audit?: AuditEntry): Promise<void>;
  /**
   * Deletes the trades that were accepted and never signed by a process that is gone (a previous
   * run of this one, or an instance sharing the journal whose lease ran out), and, given
   * `staleAfterMs`, this process's own trades left `accepted` (unchanged) for longer than that (a
   * discard that kept failing): nothing of them was, or can now be, paid, so their
   * Idempotency-Keys work again. Each is recorded in the audit log (`trade.forgotten`, by the
   * service) in the same transaction. Returns how many.
   *
   * Forgetting a trade that was still on its way is safe for money: its `markSigned` then fails,
   * and a transaction whose record cannot be written is never sent (TradeHooks.onSigned).
   */
  forgetUnsigned(staleAfterMs?: number): Promise<number>;
  get(id: string): Promise<TradeRecord | undefined>;
  /** The trade that broadcast `txHash` (any of its broadcasts), if any. */
  findByHash(txHash: string): Promise<TradeRecord | undefined>;
  /**
   * A page of the trades visible to the caller, newest first, filtered. Keyset pagination: a page asked
   * `after` the previous page's `next` continues exactly where it ended, whatever was added
   * since (new trades sort before it), so no trade is shown twice or skipped.
   */
  page(query: TradePageQuery): Promise<TradePage>;
  /** The visible trades' totals per kind and stable coin, ordered by kind then stable. */
  summary(query: TradeSummaryQuery): Promise<TradeTotals[]>;
}

/** A limit scope's value (a key's name, a wallet, a destinatary, "*") with what it used (TradeJournal.spendingLeaders). */
export interface SpendingLeader extends LimitUse {
  value: string;
}

/**
 * What a trade counts against the access policy's spending limits, and the limits it must fit
 * (core/access/authorize.ts). The journal counts it, with every trade in each limit's rolling
 * window that may pay or has paid (accepted, signed, submitted, mined, confirmed; a failed or
 * expired trade, or one forgotten, gives its room back), and refuses it when a limit has no room,
 * atomically with the trade's first write: across instances sharing the journal, two trades never
 * both take the last room.
 */
export interface Spending {
  spend: Spend;
  checks: readonly LimitCheck[];
}
