/**
 * The deliverer: takes the outbox's due events (each trade's oldest pending one, under a lease),
 * POSTs each to its api key's endpoint with Standard Webhooks headers, and records the attempt.
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
  /** Each attempt's limit, connection to last byte. Default 10 s. */
  timeoutMs?: number;
  /** How often the outbox is looked at when it had nothing due. Default 200 ms. */
  pollMs?: number;
  /** How long a claimed event is this deliverer's. Default 60 s: more than an attempt can take. */
  leaseMs?: number;
  /** Events claimed at once (and delivered concurrently, one per trade). Default 32. */
  batchSize?: number;
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

/** The body of an event's message: the trade as GET /api/v1/trades/{hash} shows it, with the event's type and time. */
export function webhookBody(event: WebhookEvent): string {
  return JSON.stringify({
    type: event.type,
    timestamp: event.createdAt.toISOString(),
    data: tradeView(event.trade, null),
  });
}

export class WebhookDeliverer {
  readonly #o: Required<Omit<WebhookDelivererOptions, "resolve" | "onOutcome" | "retry">> &
    Pick<WebhookDelivererOptions, "resolve" | "onOutcome">;
  readonly #retry: RetryPolicy;
  #running: Promise<void> | undefined;
  #closed = false;
  #wake: (() => void) | undefined;

  constructor(options: WebhookDelivererOptions) {
    this.#o = {
      timeoutMs: 10_000,
      pollMs: 200,
      leaseMs: 60_000,
      batchSize: 32,
      random: Math.random,
      ...options,
    };
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
  }

  start(): void {
    this.#running ??= this.#loop();
  }

  /** Looks at the outbox now rather than at the next poll. */
  wake(): void {
    this.#wake?.();
  }

  /** Stops claiming; the attempts under way finish (each within the timeout). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#wake?.();
    await this.#running;
  }

  /** Claims what is due and delivers it; returns how many events were claimed. */
  async deliverDue(): Promise<number> {
    const events = await this.#o.outbox.claimWebhookEvents(this.#o.holder, this.#o.batchSize, this.#o.leaseMs);
    await Promise.all(events.map((event) => this.#deliver(event)));
    return events.length;
  }

  async #loop(): Promise<void> {
    while (!this.#closed) {
      let claimed = 0;
      try {
        claimed = await this.deliverDue();
      } catch (error) {
        this.#o.log.warn({ err: error }, "could not read the webhook outbox");
      }
      if (claimed === 0 && !this.#closed) await this.#sleep(this.#o.pollMs);
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }

  async #deliver(event: WebhookEvent): Promise<void> {
    const { log } = this.#o;
    const fields = { webhookId: event.id, tradeId: event.tradeId, type: event.type };
    const endpoint = this.#o.endpoints.get(event.scope);
    const at = new Date();
    let statusCode: number | null = null;
    let error: string | null = null;
    if (endpoint === undefined) {
      error = "no webhook endpoint for this api key";
    } else {
      try {
        statusCode = await this.#post(endpoint, event);
        if (statusCode < 200 || statusCode > 299) error = `answered HTTP ${statusCode}`;
      } catch (cause) {
        error = (cause as Error).message;
      }
    }
    const attempts = event.attempts + 1;
    let outcome: WebhookOutcome;
    if (error === null) outcome = { status: "delivered" };
    else {
      const next = Date.now() + retryDelay(attempts, this.#retry, this.#o.random);
      outcome =
        endpoint !== undefined && next <= event.windowStart.getTime() + this.#retry.windowMs
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
    const where = endpoint === undefined ? {} : { endpoint: endpoint.url.origin };
    if (outcome.status === "delivered") log.debug({ ...fields, ...where, attempts }, "webhook delivered");
    else if (outcome.status === "pending")
      log.warn(
        { ...fields, ...where, attempts, statusCode, reason: error, retryAt: outcome.nextAttemptAt.toISOString() },
        "webhook not delivered; will retry",
      );
    else log.error({ ...fields, ...where, attempts, statusCode, reason: error }, "webhook failed: no more retries");
  }

  /** One POST: the destination checked and pinned, no redirect followed, the whole exchange within the timeout. */
  async #post(endpoint: WebhookEndpoint, event: WebhookEvent): Promise<number> {
    const { url } = endpoint;
    const destination = await resolveDestination(url, {
      allowPrivate: this.#o.allowPrivate,
      ...(this.#o.resolve === undefined ? {} : { resolve: this.#o.resolve }),
    });
    const body = webhookBody(event);
    const timestamp = Math.floor(Date.now() / 1000);
    const pinned: LookupFunction = (_host, options, callback) => {
      if (options.all) callback(null, [destination]);
      else callback(null, destination.address, destination.family);
    };
    const timeoutMs = this.#o.timeoutMs;
    return new Promise<number>((resolve, reject) => {
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
      const timer = setTimeout(() => request.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
      request.on("response", (response) => {
        // The answer's body is read (and dropped) within the same timeout, then the connection closes.
        response.resume();
        response.on("end", () => {
          clearTimeout(timer);
          resolve(response.statusCode ?? 0);
        });
        response.on("error", (cause) => {
          clearTimeout(timer);
          reject(cause);
        });
      });
      request.on("error", (cause: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(new Error(cause.code === undefined ? cause.message : `${cause.code}: could not reach the endpoint`));
      });
      request.end(body);
    });
  }
}
