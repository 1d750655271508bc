import { InvalidArgumentError, TradeNotFoundError } from "../errors.js";
import type { TradeJournal, TradeRecord, TradeStatus } from "../ports/journal.port.js";
import type { TradeApproval } from "../ports/approval.port.js";
import type { TradePort } from "../ports/trade.port.js";
import type { TradeKind, TradeRequest, TransactionReceipt } from "../types.js";
import { callerOf, sees, visibilityOf } from "../access/authorize.js";
import type { AccessPolicy } from "../access/policy.js";
import type { TradeContext } from "./trade-context.js";
import { mayBeCorrected, settle } from "./settlement.js";

/** One transaction broadcast for a trade, with its fees in wei as decimal text. */
export interface BroadcastView {
  hash: string;
  maxFeePerGas: string;
  maxPriorityFeePerGas: string;
  /** A 0-value transfer to the wallet itself that freed the nonce once the deadline passed. */
  noop: boolean;
  sentAt: string;
}

/** A trade as the journal knows it (GET /api/v1/trades/{id or transactionHash}, gRPC GetTrade). */
export interface TradeView {
  id: string;
  kind: TradeKind;
  status: TradeStatus;
  /** The access file's name of the key that sent it (recorded when it was accepted); null without one. */
  apiKeyName: string | null;
  request: TradeRequest;
  wallet: string | null;
  nonce: number | null;
  /** Unix seconds after which the trade can no longer execute; null before it was signed. */
  deadline: number | null;
  /** The hash that counts: the mined transaction's once mined, else the latest broadcast's. */
  transactionHash: string | null;
  /** Every transaction broadcast at the trade's nonce, oldest first. */
  transactions: BroadcastView[];
  /** Blocks on top of (and including) the one that holds it; null when not mined or the chain cannot be asked. */
  confirmations: number | null;
  /** The receipt (web3.js 1.x shape) once mined; null before. */
  receipt: TransactionReceipt | null;
  error: { code: string; message: string } | null;
  createdAt: string;
  updatedAt: string;
  /**
   * Only on a trade an approval rule held (ACCESS_FILE `approvals`): what its approval needs and
   * has, by whom, and when it expires. Absent on every other trade.
   */
  approval?: TradeApproval;
  /**
   * Only on a trade a cancel was asked of (POST /api/v1/trades/{id}/cancel): who asked, when, its
   * outcome so far and the no-op at the trade's nonce. Absent on every other trade.
   */
  cancel?: CancelView;
}

/**
 * A cancel's record and its outcome so far: `pending` while the trade's nonce is open; `done` once
 * the trade is cancelled (nothing paid); `too_late` once the trade's own transaction took its
 * nonce (mined, confirmed, or reverted) or the trade ended otherwise before the no-op did.
 */
export interface CancelView {
  requestedBy: string;
  requestedAt: string;
  outcome: "pending" | "done" | "too_late";
  /** The latest no-op broadcast at the trade's nonce; null while none is. */
  noopHash: string | null;
}

/** The outcome so far of a cancel asked of `record` (it is read from the trade's state: it survives a restart). */
export function cancelOutcome(record: Pick<TradeRecord, "status">): CancelView["outcome"] {
  switch (record.status) {
    case "cancelled":
      return "done";
    case "mined":
    case "confirmed":
    case "failed":
    case "expired":
    case "rejected":
      return "too_late";
    default:
      return "pending";
  }
}

/** The access policy in force, for what a caller may read (absent: every key reads its own trades). */
export type PolicySource = () => AccessPolicy | undefined;

/**
 * `reference`: the trade's id, or any transaction hash it broadcast; `field`: the field a malformed
 * one is refused under (gRPC's, which names it), else `transactionHash` for what starts with 0x
 * and `id` for anything else.
 */
export type TradeStatusUseCase = (
  reference: unknown,
  context?: TradeContext,
  field?: "id" | "transactionHash",
) => Promise<TradeView>;

const TX_HASH = /^0x[0-9a-fA-F]{64}$/;
/** A trade's id, as every journal makes them: a UUID. */
export const TRADE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Looks a trade up by its id or by any hash it broadcast (a held trade has none yet). A caller
 * sees only the trades sent with its own key (and, for a viewer or an approver, those of the keys
 * it `sees`): any other is "not found", as an unknown one is. An unsettled (or confirmed) trade is
 * asked about on the chain first, so the view is current; if the chain cannot be asked, the
 * journal's view is answered with `confirmations` null.
 */
export function tradeStatusUseCase(journal: TradeJournal, trade: TradePort, policy?: PolicySource): TradeStatusUseCase {
  return async (reference, context = {}, field) => {
    const byId = typeof reference === "string" && TRADE_ID.test(reference);
    if (typeof reference !== "string" || (!byId && !TX_HASH.test(reference))) {
      const named = field ?? (typeof reference === "string" && reference.startsWith("0x") ? "transactionHash" : "id");
      throw named === "transactionHash"
        ? new InvalidArgumentError("transactionHash", "must be 0x followed by 64 hex digits")
        : new InvalidArgumentError("id", "must be a trade's id (a UUID) or a transaction hash (0x and 64 hex digits)");
    }
    const found = byId ? await journal.get(reference.toLowerCase()) : await journal.findByHash(reference.toLowerCase());
    if (found === undefined || !sees(visibilityOf(policy?.(), callerOf(context)), found))
      throw new TradeNotFoundError(reference, byId ? "id" : "transactionHash");
    let record = found;
    let confirmations: number | null = null;
    if (record.broadcasts.length > 0 && (record.status !== "failed" || mayBeCorrected(record))) {
      const settled = await settle(journal, trade, record).catch(() => undefined);
      if (settled !== undefined) {
        record = settled.record;
        if (settled.resolution?.state === "mined") confirmations = settled.resolution.confirmations;
        // Journalled as mined, but its block left the canonical chain: shown as the chain has it.
        if (settled.resolution?.state === "pending" && (record.status === "mined" || record.status === "confirmed")) {
          record = { ...record, status: "submitted", receipt: null };
        }
      }
    }
    return tradeView(record, confirmations);
  };
}

/** A journal record as the trade views show it; `confirmations` as the chain told, or null. */
export function tradeView(record: TradeRecord, confirmations: number | null): TradeView {
  return {
    id: record.id,
    kind: record.kind,
    status: record.status,
    apiKeyName: record.keyName,
    request: record.request,
    wallet: record.wallet,
    nonce: record.nonce,
    deadline: record.deadline,
    transactionHash: record.txHash,
    transactions: record.broadcasts.map((b) => ({
      hash: b.hash,
      maxFeePerGas: b.maxFeePerGas.toString(),
      maxPriorityFeePerGas: b.maxPriorityFeePerGas.toString(),
      noop: b.noop,
      sentAt: b.sentAt.toISOString(),
    })),
    confirmations,
    receipt: record.receipt,
    error: record.error,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
    ...(record.approval != null && { approval: record.approval }),
    ...(record.cancel != null && {
      cancel: {
        requestedBy: record.cancel.requestedBy,
        requestedAt: record.cancel.requestedAt,
        outcome: cancelOutcome(record),
        noopHash: record.broadcasts.filter((b) => b.noop).at(-1)?.hash ?? null,
      },
    }),
  };
}
