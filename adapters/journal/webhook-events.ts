/**
 * Which webhook event a change of a trade's row makes, if any. The memory journal asks this
 * function; the SQLite and PostgreSQL journals ask the same question in their triggers
 * (sqlite/webhooks.ts, postgres/webhooks.ts), in SQL.
 */
import type { TradeRecord, TradeStatus, WebhookEventType } from "../../core/index.js";

/**
 * Why an event was failed without an attempt to send it: no running instance has its scope's
 * endpoint (its registrations lapsed), and its retry window closed (failOrphanedWebhookEvents).
 */
export const ORPHANED_EVENT_ERROR = "no running instance has a webhook endpoint for this api key";

export function webhookEventType(
  before: { status: TradeStatus; txHash: string | null },
  after: { status: TradeStatus; txHash: string | null },
  broadcasts: number,
): WebhookEventType | undefined {
  if (before.status === after.status) {
    // A new transaction at the trade's nonce (a fee bump, a re-send, the no-op at the deadline).
    const replaced =
      (after.status === "signed" || after.status === "submitted") &&
      before.txHash !== null &&
      after.txHash !== before.txHash &&
      broadcasts > 1;
    return replaced ? "trade.replaced" : undefined;
  }
  switch (after.status) {
    case "submitted":
      return before.status === "signed"
        ? "trade.submitted"
        : before.status === "accepted"
          ? undefined
          : "trade.reorged";
    case "mined":
    case "confirmed":
    case "failed":
    case "expired":
    case "pending_approval":
    case "approved":
    case "rejected":
    case "cancelled":
      return `trade.${after.status}`;
    default:
      return undefined;
  }
}

/** The states in which a cancel asked of a trade came too late: its own transaction took the nonce, or it ended otherwise. */
export const CANCEL_TOO_LATE: readonly TradeStatus[] = ["confirmed", "failed", "expired"];

/**
 * The second event a change makes, after webhookEventType's: `trade.cancel_failed` when a trade a
 * cancel was asked of ends other than cancelled (its own transaction mined and confirmed, or
 * reverted, first). The SQL journals' triggers ask the same (sqlite/webhooks.ts, postgres/webhooks.ts).
 */
export function cancelEventType(
  before: { status: TradeStatus },
  after: { status: TradeStatus; cancel?: unknown },
): WebhookEventType | undefined {
  if (after.cancel == null || before.status === after.status) return undefined;
  return CANCEL_TOO_LATE.includes(after.status) && !CANCEL_TOO_LATE.includes(before.status)
    ? "trade.cancel_failed"
    : undefined;
}

/** The trade of an event as the SQL triggers write it: times in ms since the epoch, fees as decimal text. */
export interface TradeSnapshot {
  id: string;
  scope: string;
  /** Absent from the snapshots written before the key's name was kept. */
  keyName?: string | null;
  idempotencyKey: string | null;
  requestHash: string;
  kind: TradeRecord["kind"];
  request: TradeRecord["request"];
  status: TradeStatus;
  wallet: string | null;
  nonce: number | string | null;
  deadline: number | string | null;
  txHash: string | null;
  broadcasts: Array<{
    hash: string;
    rawTx: string;
    maxFeePerGas: string | number;
    maxPriorityFeePerGas: string | number;
    noop: boolean | number;
    sentAt: number | string;
  }> | null;
  receipt: TradeRecord["receipt"];
  error: TradeRecord["error"];
  /** Absent from the snapshots written before the approvals (PostgreSQL's migration 15, SQLite's 14); null on a trade never held. */
  approval?: TradeRecord["approval"];
  /** Absent from the snapshots written before the cancels (PostgreSQL's migration 17, SQLite's 16); null without one. */
  cancel?: TradeRecord["cancel"];
  createdAt: number | string;
  updatedAt: number | string;
}

export function snapshotToRecord(s: TradeSnapshot): TradeRecord {
  const broadcasts = (s.broadcasts ?? []).map((b) => ({
    hash: b.hash,
    rawTx: b.rawTx,
    maxFeePerGas: BigInt(b.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(b.maxPriorityFeePerGas),
    noop: b.noop === true || b.noop === 1,
    sentAt: new Date(Number(b.sentAt)),
  }));
  return {
    id: s.id,
    scope: s.scope,
    keyName: s.keyName ?? null,
    idempotencyKey: s.idempotencyKey,
    requestHash: s.requestHash,
    kind: s.kind,
    request: s.request,
    status: s.status,
    wallet: s.wallet,
    nonce: s.nonce === null ? null : Number(s.nonce),
    txHash: s.txHash,
    rawTx: broadcasts.at(-1)?.rawTx ?? null,
    deadline: s.deadline === null ? null : Number(s.deadline),
    broadcasts,
    receipt: s.receipt,
    error: s.error,
    ...(s.approval != null && { approval: s.approval }),
    ...(s.cancel != null && { cancel: s.cancel }),
    createdAt: new Date(Number(s.createdAt)),
    updatedAt: new Date(Number(s.updatedAt)),
  };
}
