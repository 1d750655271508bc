/**
 * The webhook outbox of the memory journal. Its events are kept in the journal's store
 * (store.ts), which calls `emit` in the same synchronous step as the change it reports, which is
 * what a transaction is in memory.
 */
import { randomBytes } from "node:crypto";

import type {
  AuditEntry,
  TradeRecord,
  WatchEvent,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookDeliveryQuery,
  WebhookEvent,
  WebhookEventType,
  WebhookOutbox,
  WebhookOutboxStats,
  WebhookScopes,
  WebhookOutcome,
} from "../../../core/index.js";
import { ORPHANED_EVENT_ERROR } from "../webhook-events.js";
import type { MemoryAudit } from "./audit.js";

interface StoredEvent extends WebhookDelivery {
  /** What an event about a wallet or the swap is about: its events go out in order, per scope; null for a trade's. */
  subject: string | null;
  leaseHolder: string | null;
  leaseUntil: number;
  /** When it was delivered or failed (ms since the epoch); null while pending. */
  finishedAt: number | null;
}

/** A Standard Webhooks message id: `msg_` and 32 hex digits (128 random bits). */
export function webhookEventId(): string {
  return `msg_${randomBytes(16).toString("hex")}`;
}

/** The outbox's events, and who registered which scopes for them. */
export class MemoryEvents {
  readonly list: StoredEvent[] = [];
  /** By scope: each holder's registration, live until then (ms since the epoch). */
  readonly registrations = new Map<string, Map<string, number>>();
  /** The registered scopes that get the events about the wallets and the swap: by scope, each holder's, live until then. */
  readonly watchers = new Map<string, Map<string, number>>();
  #seq = 0;

  /** Whether some holder's registration of `scope` is live. */
  registered(scope: string, now = Date.now()): boolean {
    for (const until of this.registrations.get(scope)?.values() ?? []) if (until > now) return true;
    return false;
  }

  /** Writes an event for `trade` (already changed) when a live registration holds its scope. */
  emit(trade: TradeRecord, type: WebhookEventType): void {
    if (!this.registered(trade.scope)) return;
    this.#push(
      { scope: trade.scope, tradeId: trade.id, subject: null, type, trade: structuredClone(trade), data: null },
      trade.updatedAt,
    );
  }

  /** Writes `event` once for each scope a live registration marks a watcher. */
  emitWatch(event: WatchEvent): void {
    const now = Date.now();
    for (const [scope, holders] of this.watchers) {
      if (![...holders.values()].some((until) => until > now)) continue;
      this.#push(
        {
          scope,
          tradeId: null,
          subject: event.subject,
          type: event.type,
          trade: null,
          data: structuredClone(event.data),
        },
        event.at,
      );
    }
  }

  #push(event: Pick<StoredEvent, "scope" | "tradeId" | "subject" | "type" | "trade" | "data">, at: Date): void {
    this.#seq += 1;
    this.list.push({
      seq: this.#seq,
      id: webhookEventId(),
      ...event,
      createdAt: at,
      status: "pending",
      attempts: 0,
      nextAttemptAt: at,
      windowStart: at,
      history: [],
      leaseHolder: null,
      leaseUntil: 0,
      finishedAt: null,
    });
  }
}

export class MemoryOutbox implements WebhookOutbox {
  readonly #events: MemoryEvents;
  readonly #audit: MemoryAudit;

  constructor(events: MemoryEvents, audit: MemoryAudit) {
    this.#events = events;
    this.#audit = audit;
  }

  async registerWebhookScopes(
    holder: string,
    scopes: readonly string[],
    ttlMs: number,
    watchers: readonly string[] = [],
  ): Promise<void> {
    const now = Date.now();
    const watching = new Set(watchers.filter((scope) => scopes.includes(scope)));
    register(this.#events.registrations, holder, new Set(scopes), now, ttlMs);
    register(this.#events.watchers, holder, watching, now, ttlMs);
  }

  async failOrphanedWebhookEvents(windowStartBefore: Date, limit: number): Promise<number> {
    const now = Date.now();
    let failed = 0;
    for (const event of this.#events.list) {
      if (failed >= limit) break;
      if (event.status !== "pending" || event.windowStart >= windowStartBefore) continue;
      if ((event.leaseHolder !== null && event.leaseUntil > now) || this.#events.registered(event.scope, now)) continue;
      event.history.push({ at: new Date(now), statusCode: null, error: ORPHANED_EVENT_ERROR });
      Object.assign(event, {
        status: "failed",
        attempts: event.attempts + 1,
        leaseHolder: null,
        leaseUntil: 0,
        finishedAt: now,
      });
      failed += 1;
    }
    return failed;
  }

  async claimWebhookEvents(
    holder: string,
    limits: ReadonlyMap<string, number>,
    leaseMs: number,
  ): Promise<WebhookEvent[]> {
    const now = Date.now();
    const heads = new Map<string, StoredEvent>();
    for (const event of this.#events.list) {
      // One trade's events in order; and one watched subject's, per scope.
      const stream = event.tradeId ?? `${event.scope}|${event.subject}`;
      if (event.status === "pending" && !heads.has(stream)) heads.set(stream, event);
    }
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
    event.finishedAt = outcome.status === "pending" ? null : attempt.at.getTime();
    event.leaseHolder = null;
    event.leaseUntil = 0;
    return true;
  }

  async listWebhookDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage> {
    const matching = this.#events.list
      .filter(
        (e) =>
          (query.scopes === "all" || query.scopes.includes(e.scope)) &&
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
    scopes: WebhookScopes,
    id: string,
    now: Date,
    audit?: AuditEntry,
  ): Promise<WebhookDelivery | "not_failed" | undefined> {
    const event = this.#events.list.find((e) => e.id === id && (scopes === "all" || scopes.includes(e.scope)));
    if (event === undefined) return undefined;
    if (event.status !== "failed") return "not_failed";
    if (audit !== undefined) this.#audit.appendNow(audit);
    Object.assign(event, { status: "pending", nextAttemptAt: now, windowStart: now, finishedAt: null });
    return view(event, true) as WebhookDelivery;
  }

  async webhookStats(): Promise<WebhookOutboxStats> {
    const pending = this.#events.list.filter((e) => e.status === "pending");
    return { pending: pending.length, oldestPendingAt: pending[0]?.createdAt ?? null };
  }

  async sweepWebhookEvents(finishedBefore: Date, limit: number): Promise<number> {
    const page = this.#events.list
      .filter((e) => e.status !== "pending" && e.finishedAt !== null && e.finishedAt < finishedBefore.getTime())
      .sort((a, b) => a.finishedAt! - b.finishedAt!)
      .slice(0, limit);
    const gone = new Set(page);
    const kept = this.#events.list.filter((e) => !gone.has(e));
    this.#events.list.splice(0, this.#events.list.length, ...kept);
    return page.length;
  }
}

/**
 * `holder`'s registrations in `registrations` made those of `scopes`, live for `ttlMs` from `now`;
 * its others dropped, and others' lapsed ones forgotten.
 */
function register(
  registrations: Map<string, Map<string, number>>,
  holder: string,
  scopes: ReadonlySet<string>,
  now: number,
  ttlMs: number,
): void {
  for (const [scope, holders] of registrations) {
    for (const [other, until] of holders)
      if (other === holder ? !scopes.has(scope) : until <= now) holders.delete(other);
    if (holders.size === 0) registrations.delete(scope);
  }
  for (const scope of scopes) {
    const holders = registrations.get(scope) ?? new Map<string, number>();
    holders.set(holder, now + ttlMs);
    registrations.set(scope, holders);
  }
}

function view(event: StoredEvent, withHistory: boolean): WebhookEvent | WebhookDelivery {
  const {
    leaseHolder: _holder,
    leaseUntil: _until,
    finishedAt: _finished,
    subject: _subject,
    history,
    ...rest
  } = event;
  return structuredClone(withHistory ? { ...rest, history } : rest);
}
