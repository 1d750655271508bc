import { InvalidArgumentError, WebhookDeliveryNotFailedError, WebhookDeliveryNotFoundError } from "../errors.js";
import {
  WEBHOOK_DELIVERY_STATUSES,
  type WebhookDelivery,
  type WebhookDeliveryStatus,
  type WebhookEventType,
  type WebhookOutbox,
} from "../ports/webhook.port.js";
import type { WatchEventType } from "../ports/watch.port.js";
import { authorizeDeliveryRetry, callerOf, visibilityOf } from "../access/authorize.js";
import { type AccessPolicy, type Caller, keyIdOf } from "../access/policy.js";
import { deliveryRetriedEntry } from "../audit.js";
import type { TradeContext } from "./trade-context.js";
import type { PolicySource } from "./trade-status.use-case.js";

/** One webhook event's delivery as GET /api/v1/webhooks/deliveries shows it. */
export interface WebhookDeliveryView {
  /** The `webhook-id` every attempt carried. */
  id: string;
  type: WebhookEventType | WatchEventType;
  /** The trade it reports; null for an event about a wallet or the swap. */
  tradeId: string | null;
  /** The trade's transaction hash when the event was written; an outside transaction's own (when known); else null. */
  transactionHash: string | null;
  status: WebhookDeliveryStatus;
  createdAt: string;
  /** When it is tried next; null unless pending. */
  nextAttemptAt: string | null;
  /** Every attempt, oldest first: when, the receiver's HTTP status (null: no answer), and why it did not deliver. */
  attempts: Array<{ at: string; statusCode: number | null; error: string | null }>;
}

export interface WebhookDeliveryListView {
  deliveries: WebhookDeliveryView[];
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: string | null;
}

export type ListWebhookDeliveriesUseCase = (
  query: { status?: unknown; cursor?: unknown; limit?: unknown },
  context?: TradeContext,
) => Promise<WebhookDeliveryListView>;

export type RetryWebhookDeliveryUseCase = (id: unknown, context?: TradeContext) => Promise<WebhookDeliveryView>;

export const DEFAULT_DELIVERY_PAGE = 50;
export const MAX_DELIVERY_PAGE = 200;
const CURSOR = /^d([1-9][0-9]{0,15})$/;
const DELIVERY_ID = /^msg_[0-9a-f]{32}$/;

/** The caller's deliveries, newest first, optionally only those of one status. */
export function listWebhookDeliveriesUseCase(
  outbox: WebhookOutbox,
  policy?: PolicySource,
): ListWebhookDeliveriesUseCase {
  return async (query, context = {}) => {
    const { status, cursor, limit = String(DEFAULT_DELIVERY_PAGE) } = query;
    if (status !== undefined && !WEBHOOK_DELIVERY_STATUSES.includes(status as WebhookDeliveryStatus))
      throw new InvalidArgumentError("status", `must be one of ${WEBHOOK_DELIVERY_STATUSES.join(", ")}`);
    const before = cursor === undefined ? undefined : CURSOR.exec(String(cursor))?.[1];
    if (cursor !== undefined && before === undefined)
      throw new InvalidArgumentError("cursor", "must be a nextCursor this service answered");
    const size = Number(limit);
    if (!Number.isInteger(size) || size < 1 || size > MAX_DELIVERY_PAGE)
      throw new InvalidArgumentError("limit", `must be an integer from 1 to ${MAX_DELIVERY_PAGE}`);
    const visible = visibilityOf(policy?.(), callerOf(context));
    const page = await outbox.listWebhookDeliveries({
      scopes: visible === "all" ? "all" : visible.ids,
      status: status as WebhookDeliveryStatus | undefined,
      before: before === undefined ? undefined : Number(before),
      limit: size,
    });
    return { deliveries: page.deliveries.map(deliveryView), nextCursor: page.next === null ? null : `d${page.next}` };
  };
}

/**
 * Sends a failed delivery of the caller's again: pending, due now, with a new retry window. With
 * `audited`, the retry is recorded in the audit log in the write that makes it pending.
 */
export function retryWebhookDeliveryUseCase(
  outbox: WebhookOutbox,
  now = () => new Date(),
  policy?: PolicySource,
  audited = false,
): RetryWebhookDeliveryUseCase {
  return async (id, context = {}) => {
    const caller = callerOf(context);
    // A trader retries its own deliveries (under any of its hashes); an admin anyone's; a viewer none.
    authorizeDeliveryRetry(caller);
    if (typeof id !== "string" || !DELIVERY_ID.test(id)) throw new WebhookDeliveryNotFoundError(String(id));
    const scopes = caller.key?.roles.has("admin") ? "all" : ownIds(policy?.(), caller);
    const audit = audited ? deliveryRetriedEntry(caller, id) : undefined;
    const retried = await outbox.retryWebhookDelivery(scopes, id, now(), audit);
    if (retried === undefined) throw new WebhookDeliveryNotFoundError(id);
    if (retried === "not_failed") throw new WebhookDeliveryNotFailedError(id);
    return deliveryView(retried);
  };
}

export function deliveryView(delivery: WebhookDelivery): WebhookDeliveryView {
  return {
    id: delivery.id,
    type: delivery.type,
    tradeId: delivery.tradeId,
    transactionHash: delivery.trade?.txHash ?? outsideHash(delivery.data),
    status: delivery.status,
    createdAt: delivery.createdAt.toISOString(),
    nextAttemptAt: delivery.status === "pending" ? delivery.nextAttemptAt.toISOString() : null,
    attempts: delivery.history.map((a) => ({ at: a.at.toISOString(), statusCode: a.statusCode, error: a.error })),
  };
}

/** The hash of the outside transaction an event's data reports, if it does. */
function outsideHash(data: WebhookDelivery["data"]): string | null {
  const transaction = data?.transaction;
  if (transaction === null || typeof transaction !== "object" || Array.isArray(transaction)) return null;
  const hash = (transaction as { hash?: unknown }).hash;
  return typeof hash === "string" ? hash : null;
}

/** The ids of the caller's own key: the one it sent, and its other hashes under the same name (a rotation). */
function ownIds(policy: AccessPolicy | undefined, caller: Caller): string[] {
  const ids = new Set([caller.id]);
  const own = policy?.keys.find((key) => key.name === caller.key?.name);
  if (own !== undefined) ids.add(own.id);
  for (const hash of own?.sha256 ?? []) ids.add(keyIdOf(hash));
  return [...ids];
}
