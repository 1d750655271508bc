/**
 * The deliverer: takes the outbox's due events (each trade's oldest pending one, under a lease),
 * POSTs each to its api key's endpoint with Standard Webhooks headers, and records the attempt.
 * Each endpoint is a lane of its own with its own limit of attempts in flight: events are claimed
 * for the lanes with room, and a lane's attempt ending makes room for the next, so an endpoint
 * that never answers holds up its own events only. Only the scopes of this deliverer's endpoints
 * are claimed: another scope's events are left to an instance that has its endpoint.
 * A 2xx delivers; anything else (another status, a redirect, no answer within the timeout, a
 * refused destination) is retried with exponential backoff and jitter until the retry window
 * (24 h by default) closes, and the event is then failed. The `webhook-id` is the event's id,
 * the same on every attempt and after a restart, so receivers can drop duplicates.
 */
import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";

import type { Logger } from "pino";

import { tradeView, type WebhookEvent, type WebhookOutbox, type WebhookOutcome } from "../../core/index.js";
import { resolveDestination, type Resolver, urlHost } from "./destination.js";
import { signWebhook, type WebhookSecret } from "./signature.js";

/** An api key's endpoint (WEBHOOKS_FILE). */
export interface WebhookEndpoint {
  url: URL;
  /** One, or two during a rotation: every message is signed with each. */
  secrets: readonly WebhookSecret[];
}

export interface RetryPolicy {
  /** The first retry's delay, before jitter. Default 1 s; each next one doubles. */
  baseMs: number;
  /** The longest delay between two attempts. Default 1 h. */
  maxDelayMs: number;
  /** How long after its creation (or a retry asked for) an event is retried before it is failed. Default 24 h. */
  windowMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { baseMs: 1_000, maxDelayMs: 3_600_000, windowMs: 86_400_000 };

export type DeliveryOutcome = "delivered" | "retried" | "failed";

export interface WebhookDelivererOptions {
  outbox: WebhookOutbox;
  /** By scope: the endpoint of each api key that has one. */
  endpoints: ReadonlyMap<string, WebhookEndpoint>;
  log: Logger;
  /** This deliverer's name in the outbox's leases (unique per process). */
  holder: string;
  /** WEBHOOK_ALLOW_PRIVATE: deliver to loopback, private and link-local addresses too. */
  allowPrivate: boolean;
  /** Each attempt's limit, from resolving the endpoint's name to the answer's last byte. Default 10 s. */
  timeoutMs?: number;
  /** How often the outbox is looked at when it had nothing due. Default 200 ms. */
  pollMs?: number;
  /** How long a claimed event is this deliverer's. Default 60 s: more than an attempt can take. */
  leaseMs?: number;
  /** Attempts in flight at once to one endpoint (each of a different trade). Default 32. */
  maxInFlight?: number;
  retry?: Partial<RetryPolicy>;
  /** Resolves destination host names (default: the system's resolver). */
  resolve?: Resolver;
  /** Told of each attempt's outcome (the metrics). */
  onOutcome?: (outcome: DeliveryOutcome, event: WebhookEvent) => void;
  random?: () => number;
}

/** The delay before the retry after `attempts` attempts: base × 2^(attempts-1), capped, then jittered to 50–100 %. */
export function retryDelay(attempts: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const exponential = Math.min(policy.maxDelayMs, policy.baseMs * 2 ** Math.min(attempts - 1, 40));
  return Math.round(exponential * (0.5 + random() * 0.5));
}

/**
 * The body of an event's message, with its type and time: the trade as GET /api/v1/trades/{hash}
 * shows it, or, for an event about a wallet or the swap, the state it reports (docs/SPEC.md §10.3).
 */
export function webhookBody(event: WebhookEvent): string {
  return JSON.stringify({
    type: event.type,
    timestamp: event.createdAt.toISOString(),
    data: event.trade === null ? event.data : tradeView(event.trade, null),
  });
}

/** An endpoint's lane: its attempts in flight. */
interface Lane {
  endpoint: WebhookEndpoint;
  inFlight: number;
}

export class WebhookDeliverer {
  readonly #o: Required<Omit<WebhookDelivererOptions, "resolve" | "onOutcome" | "retry">> &
    Pick<WebhookDelivererOptions, "resolve" | "onOutcome">;
  readonly #retry: RetryPolicy;
  /** By scope. */
  readonly #lanes: ReadonlyMap<string, Lane>;
  readonly #attempts = new Set<Promise<void>>();
  /**
   * Lookups under way, by host: the attempts to one host share one, so a name whose resolver
   * does not answer holds one of libuv's few threads (the system resolver's), not one per attempt.
   */
  readonly #lookups = new Map<string, Promise<{ address: string; family: number }>>();
  #running: Promise<void> | undefined;
  #closed = false;
  /** Set by wake(): the loop looks again rather than sleep, even when the wake came mid-claim. */
  #woken = false;
  #endSleep: (() => void) | undefined;

  constructor(options: WebhookDelivererOptions) {
    this.#o = {
      timeoutMs: 10_000,
      pollMs: 200,
      leaseMs: 60_000,
      maxInFlight: 32,
      random: Math.random,
      ...options,
    };
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
    this.#lanes = new Map([...options.endpoints].map(([scope, endpoint]) => [scope, { endpoint, inFlight: 0 }]));
  }

  start(): void {
    this.#running ??= this.#loop();
  }

  /** Looks at the outbox now rather than at the next poll. */
  wake(): void {
    this.#woken = true;
    this.#endSleep?.();
  }

  /** Stops claiming; the attempts under way finish (each within the timeout). */
  async close(): Promise<void> {
    this.#closed = true;
    this.wake();
    await this.#running;
    await Promise.all(this.#attempts);
  }

  /** Claims what is due for the endpoints with room and delivers it; returns how many events were claimed. */
  async deliverDue(): Promise<number> {
    const started = await this.#claim();
    await Promise.all(started);
    return started.length;
  }

  /** Claims what is due for each lane with room, and starts each attempt without waiting for it. */
  async #claim(): Promise<Array<Promise<void>>> {
    const limits = new Map<string, number>();
    for (const [scope, lane] of this.#lanes)
      if (lane.inFlight < this.#o.maxInFlight) limits.set(scope, this.#o.maxInFlight - lane.inFlight);
    if (limits.size === 0) return [];
    const events = await this.#o.outbox.claimWebhookEvents(this.#o.holder, limits, this.#o.leaseMs);
    return events.map((event) => {
      const lane = this.#lanes.get(event.scope)!; // only the lanes' scopes were claimed
      lane.inFlight += 1;
      const attempt = this.#deliver(event, lane.endpoint).finally(() => {
        lane.inFlight -= 1;
        this.#attempts.delete(attempt);
        // Room in the lane, and the trade's next event may be due.
        if (!this.#closed) this.wake();
      });
      this.#attempts.add(attempt);
      return attempt;
    });
  }

  async #loop(): Promise<void> {
    while (!this.#closed) {
      this.#woken = false;
      let started = 0;
      let failed = false;
      try {
        started = (await this.#claim()).length;
      } catch (error) {
        failed = true;
        this.#o.log.warn({ err: error }, "could not read the webhook outbox");
      }
      if (this.#closed) break;
      if (failed || (started === 0 && !this.#woken)) await this.#sleep(this.#o.pollMs);
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#endSleep = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#endSleep = done;
    });
  }

  async #deliver(event: WebhookEvent, endpoint: WebhookEndpoint): Promise<void> {
    const { log } = this.#o;
    const fields = { webhookId: event.id, tradeId: event.tradeId, type: event.type, endpoint: endpoint.url.origin };
    const at = new Date();
    let statusCode: number | null = null;
    let error: string | null = null;
    try {
      statusCode = await this.#post(endpoint, event);
      if (statusCode < 200 || statusCode > 299) error = `answered HTTP ${statusCode}`;
    } catch (cause) {
      error = (cause as Error).message;
    }
    const attempts = event.attempts + 1;
    let outcome: WebhookOutcome;
    if (error === null) outcome = { status: "delivered" };
    else {
      const next = Date.now() + retryDelay(attempts, this.#retry, this.#o.random);
      outcome =
        next <= event.windowStart.getTime() + this.#retry.windowMs
          ? { status: "pending", nextAttemptAt: new Date(next) }
          : { status: "failed" };
    }
    const recorded = await this.#o.outbox
      .recordWebhookAttempt(event.id, this.#o.holder, { at, statusCode, error }, outcome)
      .catch((cause: unknown) => {
        log.warn({ ...fields, err: cause }, "could not record a webhook attempt; it will be sent again");
        return false;
      });
    if (!recorded) return;
    const kind: "delivered" | "retried" | "failed" = outcome.status === "pending" ? "retried" : outcome.status;
    this.#o.onOutcome?.(kind, event);
    if (outcome.status === "delivered") log.debug({ ...fields, attempts }, "webhook delivered");
    else if (outcome.status === "pending")
      log.warn(
        { ...fields, attempts, statusCode, reason: error, retryAt: outcome.nextAttemptAt.toISOString() },
        "webhook not delivered; will retry",
      );
    else log.error({ ...fields, attempts, statusCode, reason: error }, "webhook failed: no more retries");
  }

  /**
   * One POST: the destination resolved, checked and pinned, no redirect followed; the whole of it,
   * resolving the name included, within the timeout.
   */
  async #post(endpoint: WebhookEndpoint, event: WebhookEvent): Promise<number> {
    const timeoutMs = this.#o.timeoutMs;
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), timeoutMs);
    try {
      const host = urlHost(endpoint.url);
      const lookup = this.#lookup(endpoint.url);
      const destination = await untilAborted(lookup, deadline.signal, () => {
        // The next attempt asks again rather than wait on this one.
        if (this.#lookups.get(host) === lookup) this.#lookups.delete(host);
        return new Error(`${host} did not resolve within ${timeoutMs / 1000} s`);
      });
      return await this.#request(endpoint, event, destination, deadline.signal);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The address to send to, checked: the lookup under way for the URL's host, else a new one. */
  #lookup(url: URL): Promise<{ address: string; family: number }> {
    const host = urlHost(url);
    let lookup = this.#lookups.get(host);
    if (lookup === undefined) {
      lookup = resolveDestination(url, {
        allowPrivate: this.#o.allowPrivate,
        ...(this.#o.resolve === undefined ? {} : { resolve: this.#o.resolve }),
      }).finally(() => {
        if (this.#lookups.get(host) === lookup) this.#lookups.delete(host);
      });
      this.#lookups.set(host, lookup);
    }
    return lookup;
  }

  /** The POST to the resolved address, cut when `deadline` aborts. */
  #request(
    endpoint: WebhookEndpoint,
    event: WebhookEvent,
    destination: { address: string; family: number },
    deadline: AbortSignal,
  ): Promise<number> {
    const { url } = endpoint;
    const body = webhookBody(event);
    const timestamp = Math.floor(Date.now() / 1000);
    const pinned: LookupFunction = (_host, options, callback) => {
      if (options.all) callback(null, [destination]);
      else callback(null, destination.address, destination.family);
    };
    const timeoutMs = this.#o.timeoutMs;
    return new Promise<number>((resolve, reject) => {
      if (deadline.aborted) {
        reject(new Error(`no answer within ${timeoutMs / 1000} s`));
        return;
      }
      const request = (url.protocol === "https:" ? https : http).request({
        protocol: url.protocol,
        hostname: urlHost(url),
        port: url.port === "" ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: "POST",
        agent: false,
        lookup: pinned,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "user-agent": "token-trading-service-webhooks",
          "webhook-id": event.id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signWebhook(endpoint.secrets, event.id, timestamp, body),
        },
      });
      const cut = () => request.destroy(new Error(`no answer within ${timeoutMs / 1000} s`));
      deadline.addEventListener("abort", cut, { once: true });
      const settled = () => deadline.removeEventListener("abort", cut);
      request.on("response", (response) => {
        // The answer's body is read (and dropped) within the same timeout, then the connection closes.
        response.resume();
        response.on("end", () => {
          settled();
          resolve(response.statusCode ?? 0);
        });
        response.on("error", (cause) => {
          settled();
          reject(cause);
        });
      });
      request.on("error", (cause: NodeJS.ErrnoException) => {
        settled();
        reject(new Error(cause.code === undefined ? cause.message : `${cause.code}: could not reach the endpoint`));
      });
      request.end(body);
    });
  }
}

/** `promise`, or a rejection with `reason()` once `signal` aborts (the promise itself runs on, unheard). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, reason: () => Error): Promise<T> {
  if (signal.aborted) return Promise.reject(reason());
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(reason());
    signal.addEventListener("abort", abort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", abort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", abort);
        reject(error);
      },
    );
  });
}
