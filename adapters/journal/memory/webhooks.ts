/**
 * The webhook outbox of the memory journal. Its events are kept in the journal's store
 * (store.ts), which calls `emit` in the same synchronous step as the change it reports, which is
 * what a transaction is in memory.
 */
import { randomBytes } from "node:crypto";

import type {
  TradeRecord,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookDeliveryQuery,
  WebhookEvent,
  WebhookEventType,
  WebhookOutbox,
  WebhookOutboxStats,
  WebhookOutcome,
} from "../../../core/index.js";

interface StoredEvent extends WebhookDelivery {
  leaseHolder: string | null;
  leaseUntil: number;
}

/** A Standard Webhooks message id: `msg_` and 32 hex digits (128 random bits). */
export function webhookEventId(): string {
  return `msg_${randomBytes(16).toString("hex")}`;
}

/** The outbox's events, and the scopes that have them. */
export class MemoryEvents {
  readonly list: StoredEvent[] = [];
  scopes = new Set<string>();
  #seq = 0;

  /** Writes an event for `trade` (already changed) when its scope has webhooks. */
  emit(trade: TradeRecord, type: WebhookEventType): void {
    if (!this.scopes.has(trade.scope)) return;
    this.#seq += 1;
    this.list.push({
      seq: this.#seq,
      id: webhookEventId(),
      scope: trade.scope,
      tradeId: trade.id,
      type,
      trade: structuredClone(trade),
      createdAt: trade.updatedAt,
      status: "pending",
      attempts: 0,
      nextAttemptAt: trade.updatedAt,
      windowStart: trade.updatedAt,
      history: [],
      leaseHolder: null,
      leaseUntil: 0,
    });
  }
}

export class MemoryOutbox implements WebhookOutbox {
  readonly #events: MemoryEvents;

  constructor(events: MemoryEvents) {
    this.#events = events;
  }

  async setWebhookScopes(scopes: readonly string[]): Promise<void> {
    this.#events.scopes = new Set(scopes);
  }

  async claimWebhookEvents(
    holder: string,
    limits: ReadonlyMap<string, number>,
    leaseMs: number,
  ): Promise<WebhookEvent[]> {
    const now = Date.now();
    const heads = new Map<string, StoredEvent>();
    for (const event of this.#events.list)
      if (event.status === "pending" && !heads.has(event.tradeId)) heads.set(event.tradeId, event);
    const taken = new Map<string, number>();
    const claimed: WebhookEvent[] = [];
    for (const event of [...heads.values()].sort((a, b) => a.seq - b.seq)) {
      const count = taken.get(event.scope) ?? 0;
      if (count >= (limits.get(event.scope) ?? 0)) continue;
      if (event.nextAttemptAt.getTime() > now || (event.leaseHolder !== null && event.leaseUntil > now)) continue;
      event.leaseHolder = holder;
      event.leaseUntil = now + leaseMs;
      taken.set(event.scope, count + 1);
      claimed.push(view(event, false));
    }
    return claimed;
  }

  async recordWebhookAttempt(
    id: string,
    holder: string,
    attempt: WebhookAttempt,
    outcome: WebhookOutcome,
  ): Promise<boolean> {
    const event = this.#events.list.find((e) => e.id === id);
    if (event?.leaseHolder !== holder) return false;
    event.history.push({ ...attempt });
    event.attempts += 1;
    event.status = outcome.status;
    if (outcome.status === "pending") event.nextAttemptAt = outcome.nextAttemptAt;
    event.leaseHolder = null;
    event.leaseUntil = 0;
    return true;
  }

  async listWebhookDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage> {
    const matching = this.#events.list
      .filter(
        (e) =>
          e.scope === query.scope &&
          (query.status === undefined || e.status === query.status) &&
          (query.before === undefined || e.seq < query.before),
      )
      .sort((a, b) => b.seq - a.seq);
    const page = matching.slice(0, query.limit);
    return {
      deliveries: page.map((e) => view(e, true) as WebhookDelivery),
      next: matching.length > query.limit ? (page.at(-1)?.seq ?? null) : null,
    };
  }

  async retryWebhookDelivery(
    scope: string,
    id: string,
    now: Date,
  ): Promise<WebhookDelivery | "not_failed" | undefined> {
    const event = this.#events.list.find((e) => e.id === id && e.scope === scope);
    if (event === undefined) return undefined;
    if (event.status !== "failed") return "not_failed";
    Object.assign(event, { status: "pending", nextAttemptAt: now, windowStart: now });
    return view(event, true) as WebhookDelivery;
  }

  async webhookStats(): Promise<WebhookOutboxStats> {
    const pending = this.#events.list.filter((e) => e.status === "pending");
    return { pending: pending.length, oldestPendingAt: pending[0]?.createdAt ?? null };
  }
}

function view(event: StoredEvent, withHistory: boolean): WebhookEvent | WebhookDelivery {
  const { leaseHolder: _holder, leaseUntil: _until, history, ...rest } = event;
  return structuredClone(withHistory ? { ...rest, history } : rest);
}
