import type { AuditEntry } from "./audit.port.js";
import type { TradeRecord } from "./journal.port.js";
import type { WatchData, WatchEventType } from "./watch.port.js";

/** Every change of a trade's state a client can be told of, in the Standard Webhooks `type` field. */
export const WEBHOOK_EVENT_TYPES = [
  "trade.submitted",
  "trade.replaced",
  "trade.mined",
  "trade.confirmed",
  "trade.reorged",
  "trade.failed",
  "trade.expired",
  // Approvals (ACCESS_FILE approvals): held, approved (its last approval given), rejected; each
  // event's trade has its approval, naming the approvers and the rejecting approver.
  "trade.pending_approval",
  "trade.approved",
  "trade.rejected",
  // A trade cancelled (nothing paid), and a cancel too late (the trade's own transaction took its nonce).
  "trade.cancelled",
  "trade.cancel_failed",
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/**
 * Where an event's delivery stands: `pending` until a receiver answered 2xx (`delivered`) or
 * its retries ran out (`failed`; a retry asked for makes it `pending` again).
 */
export type WebhookDeliveryStatus = "pending" | "delivered" | "failed";

export const WEBHOOK_DELIVERY_STATUSES: readonly WebhookDeliveryStatus[] = ["pending", "delivered", "failed"];

/** One try at delivering an event: the receiver's HTTP status, or why there was none. */
export interface WebhookAttempt {
  at: Date;
  /** The receiver's HTTP status; null when no answer came (refused, timed out, unreachable). */
  statusCode: number | null;
  /** Why the attempt did not deliver, without secrets; null for a 2xx. */
  error: string | null;
}

/**
 * An event of the transactional outbox: written by the journal in the same transaction as the
 * trade's change it reports, for the trades of a scope with a webhook endpoint; or, about a
 * wallet or the swap (core/ports/watch.port.ts), for each watcher scope, with no trade.
 */
export interface WebhookEvent {
  /** Order of writing: the deliverer sends one trade's (or one watched subject's) events in this order. */
  seq: number;
  /** The Standard Webhooks `webhook-id` (`msg_…`), the same on every attempt. */
  id: string;
  scope: string;
  /** The trade it reports a change of; null for an event about a wallet or the swap. */
  tradeId: string | null;
  type: WebhookEventType | WatchEventType;
  /** The trade as it was right after the change; null for an event about a wallet or the swap. */
  trade: TradeRecord | null;
  /** The wallet's or the swap's state an event about them reports; null for a trade's event. */
  data: WatchData | null;
  /** When the change happened (the trade's updatedAt). */
  createdAt: Date;
  status: WebhookDeliveryStatus;
  /** Attempts made so far. */
  attempts: number;
  /** Not tried again before this. */
  nextAttemptAt: Date;
  /** Retries stop this long after this: the event's creation, or the last retry asked for. */
  windowStart: Date;
}

/** An event with every attempt made, oldest first (GET /api/v1/webhooks/deliveries). */
export interface WebhookDelivery extends WebhookEvent {
  history: WebhookAttempt[];
}

/** What an attempt leaves the event as. */
export type WebhookOutcome =
  | { status: "delivered" }
  | { status: "pending"; nextAttemptAt: Date }
  | { status: "failed" };

/**
 * Which scopes' deliveries a caller reads (the ids of the keys it sees, core/access visibilityOf),
 * or "all" (an admin).
 */
export type WebhookScopes = readonly string[] | "all";

/** A page of the deliveries of the scopes a caller sees, newest first: `before` is the previous page's `next`. */
export interface WebhookDeliveryQuery {
  scopes: WebhookScopes;
  status?: WebhookDeliveryStatus | undefined;
  /** Only events written before this one (its seq). */
  before?: number | undefined;
  limit: number;
}

export interface WebhookDeliveryPage {
  deliveries: WebhookDelivery[];
  /** The last event's seq when more follow, else null. */
  next: number | null;
}

/** The outbox's depth, for the metrics. */
export interface WebhookOutboxStats {
  pending: number;
  /** When the oldest pending event was written; null when none is pending. */
  oldestPendingAt: Date | null;
}

/**
 * The webhook outbox, kept by the trade journal (memory, SQLite, PostgreSQL) beside the trades.
 * The journal writes an event with each change of a trade of a scope some instance has an
 * endpoint for (see `registerWebhookScopes`); the deliverers claim them, one trade's in order,
 * under a lease, each only the scopes it has an endpoint for.
 */
export interface WebhookOutbox {
  /**
   * Registers `holder` (an instance) as having an endpoint for each of `scopes`, for `ttlMs` from
   * now. While any holder's registration of a scope is live, the journal writes an event with
   * each change of that scope's trades. Replaces `holder`'s own registrations (a scope it no
   * longer has is dropped) and forgets others' that have lapsed; never touches another holder's
   * live registration. A holder renews its registrations well within `ttlMs`. The scopes among
   * `watchers` (keys that see every trade: an admin, or `sees: ["*"]`) also get the events about
   * the wallets and the swap (core/ports/watch.port.ts) while the registration is live.
   */
  registerWebhookScopes(
    holder: string,
    scopes: readonly string[],
    ttlMs: number,
    watchers?: readonly string[],
  ): Promise<void>;
  /**
   * Fails up to `limit` pending events, not leased, whose retry window started before
   * `windowStartBefore` (so it has closed) and whose scope no live registration holds, each with
   * an attempt saying so: events nobody can deliver do not stay pending forever, and an event
   * some instance has the endpoint for is left to it. Returns how many were failed.
   */
  failOrphanedWebhookEvents(windowStartBefore: Date, limit: number): Promise<number>;
  /**
   * Leases to `holder` for `leaseMs` pending events due now of the scopes in `limits`, at most
   * each scope's limit (oldest first): for each trade (and each watched subject of the scope),
   * only its oldest pending event, and only if no other holder's lease on it is running. Events of other scopes are left to the holders that
   * ask for them (those with their endpoint). Of several deliverers claiming at once, each event
   * goes to one.
   */
  claimWebhookEvents(holder: string, limits: ReadonlyMap<string, number>, leaseMs: number): Promise<WebhookEvent[]>;
  /**
   * Records an attempt and what it leaves the event as, and ends `holder`'s lease. Returns false
   * (and records nothing) when the lease is no longer `holder`'s.
   */
  recordWebhookAttempt(id: string, holder: string, attempt: WebhookAttempt, outcome: WebhookOutcome): Promise<boolean>;
  /** A page of the scopes' deliveries, newest first, with their attempts. */
  listWebhookDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage>;
  /**
   * Makes a failed event of one of the scopes pending again, due now, with a new retry window.
   * Returns the event, "not_failed" when it is not failed, or undefined when the scopes have no such event.
   * With `audit`, the retry is recorded in the audit log in the same transaction, only when it is made.
   */
  retryWebhookDelivery(
    scopes: WebhookScopes,
    id: string,
    now: Date,
    audit?: AuditEntry,
  ): Promise<WebhookDelivery | "not_failed" | undefined>;
  webhookStats(): Promise<WebhookOutboxStats>;
  /**
   * Deletes up to `limit` events delivered or failed before `finishedBefore`, oldest first, with
   * their attempts; pending events (a failed one retried included) are kept. Returns how many
   * were deleted: fewer than `limit` once none is left.
   */
  sweepWebhookEvents(finishedBefore: Date, limit: number): Promise<number>;
}
