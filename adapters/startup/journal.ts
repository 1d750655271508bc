/**
 * The journal step of the composition root: the trade journal opened (SQLite, or PostgreSQL
 * shared by several instances), metered when metrics are on, its upkeep on a timer (forgetting
 * trades nobody will sign, sweeping expired quotes, renewing this instance's webhook
 * registrations and failing the events nobody can deliver), and the webhook deliverer that
 * drains its outbox.
 */
import { join } from "node:path";

import type { Logger } from "pino";

import type { AppConfig } from "../config/env.js";
import { temporaryJournalDir } from "../dev-mode.js";
import { openJournal } from "../journal/index.js";
import type { ServiceMetrics } from "../observability/metrics.js";
import { WebhookDeliverer } from "../webhooks/deliverer.js";
import { wakingJournal } from "../webhooks/waking-journal.js";
import type { Shutdown } from "./shutdown.js";

/** How long after its expiry a quote is kept (a late trade naming it is told quote_expired), then swept: 10 minutes. */
const QUOTE_SWEEP_GRACE_MS = 600_000;

/**
 * How long an instance's webhook registrations outlive its last renewal (each upkeep beat): 10
 * minutes, or three beats if longer. The journal keeps writing a scope's events that long after
 * the last instance with its endpoint stopped, for the next one to deliver (a restart, a deploy).
 */
const WEBHOOK_REGISTRATION_TTL_MS = 600_000;

/**
 * How often held trades past their approval's expiry are expired (their room in the limits given
 * back): every second, one indexed read of the held trades due.
 */
const APPROVAL_SWEEP_MS = 1_000;

/**
 * An approved trade still unsigned this long after its approval was cut short (the process running
 * it stopped): failed, nothing paid. An approved trade is signed seconds after its approval (its
 * proof, its turn in the wallet's queue); 10 minutes, or a trade's lifetime if longer.
 */
const APPROVED_STALE_MS = 600_000;

/** At most this many orphaned webhook events failed per beat (one statement). */
const ORPHANS_PER_BEAT = 1_000;

/**
 * Finished webhook events past WEBHOOK_RETENTION_DAYS are deleted this many per statement (with
 * their attempts), up to SWEEP_PAGES_PER_BEAT statements a beat: a backlog (the first start
 * after an upgrade) goes at up to 100,000 events a beat without one long transaction.
 */
const SWEEP_PAGE = 1_000;
const SWEEP_PAGES_PER_BEAT = 100;

export type ServiceJournal = Awaited<ReturnType<typeof openJournal>>;

/**
 * Which scopes of this instance's endpoints also get the events about the wallets and the swap
 * (the keys that see every trade: admins, and `sees: ["*"]`): known once the access file is open,
 * which is after the journal; `register` then registers them at once rather than at the next beat.
 */
export interface WebhookWatchers {
  scopes: () => readonly string[];
  /** Set by the journal step when this instance has endpoints. */
  register?: () => Promise<void>;
}

/** The journal every other step uses: it also assigns the wallets' nonces (shared by every instance on PostgreSQL). */
export async function openServiceJournal(
  config: AppConfig,
  context: {
    instanceId: string;
    metrics: ServiceMetrics | undefined;
    log: Logger;
    shutdown: Shutdown;
    watchers?: WebhookWatchers;
  },
): Promise<ServiceJournal> {
  const { instanceId, metrics, log, shutdown } = context;
  let dataDir = config.journal.dataDir;
  if (config.chain.mode === "embedded" && config.journal.url === undefined) {
    const temporary = await temporaryJournalDir();
    shutdown.push(() => temporary.remove());
    dataDir = temporary.dir;
  }
  const opened = await openJournal({
    dataDir,
    instanceId,
    leaseMs: config.trade.leaseMs,
    ...(config.journal.url !== undefined ? { url: config.journal.url } : {}),
  });
  shutdown.push(() => opened.close());
  // With metrics on, every journal operation (a commit each) is timed.
  const metered = metrics === undefined ? opened : metrics.meteredJournal(opened);
  // With webhooks, each write that can add an event wakes the deliverer (set below).
  let wakeDeliverer = () => {};
  const journal = config.webhooks.endpoints.length === 0 ? metered : wakingJournal(metered, () => wakeDeliverer());
  const webhooks = await startWebhooks(journal, config, context);
  if (webhooks.deliverer !== undefined) wakeDeliverer = () => webhooks.deliverer!.wake();
  await keepUp(journal, config, log, shutdown, webhooks.upkeep);
  log.info(
    { journal: config.journal.url === undefined ? join(dataDir, "journal.sqlite") : "postgres" },
    "trade journal open",
  );
  metrics?.watchWebhooks(journal);
  return journal;
}

/**
 * Trades accepted and never signed by a process that is gone (a crash, or a dead instance) were
 * never paid: their Idempotency-Keys work again. Now, and every lease period after. So are this
 * process's own left unsigned for a whole trade lifetime (a discard the journal kept refusing):
 * a trade is signed moments after it is accepted (its fees, a preflight, its turn in the wallet's
 * queue), and forgetting one still on its way only makes it fail unpaid. Quotes that expired
 * QUOTE_SWEEP_GRACE_MS ago are deleted on the same beat (until then a late trade naming one is
 * told quote_expired rather than quote_not_found), and the webhook outbox is kept up
 * (startWebhooks' upkeep).
 */
async function keepUp(
  journal: ServiceJournal,
  config: AppConfig,
  log: Logger,
  shutdown: Shutdown,
  webhookUpkeep: () => Promise<void>,
): Promise<void> {
  const staleAfterMs = config.trade.lifetimeS * 1000;
  const forget = async () => {
    const forgotten = await journal.forgetUnsigned(staleAfterMs);
    if (forgotten > 0)
      log.warn(
        { trades: forgotten },
        "forgot trades a stopped process accepted and never signed, or left unsigned for a trade's lifetime (nothing was paid); their Idempotency-Keys work again",
      );
  };
  await forget();
  const sweepQuotes = () => journal.sweepQuotes(new Date(Date.now() - QUOTE_SWEEP_GRACE_MS));
  const sweeper = setInterval(() => {
    void forget().catch((error: unknown) => log.warn({ err: error }, "could not forget unsigned trades"));
    void sweepQuotes().catch((error: unknown) => log.warn({ err: error }, "could not sweep expired quotes"));
    void webhookUpkeep().catch((error: unknown) => log.warn({ err: error }, "could not keep the webhook outbox up"));
  }, config.trade.leaseMs);
  sweeper.unref();
  shutdown.push(async () => clearInterval(sweeper));
  keepApprovals(journal, config, log, shutdown);
}

/** Held trades past their expiry expired, and approved ones whose run was cut short failed, every APPROVAL_SWEEP_MS. */
function keepApprovals(journal: ServiceJournal, config: AppConfig, log: Logger, shutdown: Shutdown): void {
  const staleMs = Math.max(APPROVED_STALE_MS, config.trade.lifetimeS * 1000);
  let busy = false;
  const sweep = async () => {
    if (busy) return; // the previous sweep is still at work
    busy = true;
    try {
      const now = Date.now();
      const { expired, failed } = await journal.expireApprovals(new Date(now), new Date(now - staleMs));
      if (expired.length > 0)
        log.info({ trades: expired }, "held trades not approved in time expired (approval_expired); nothing was paid");
      if (failed.length > 0)
        log.warn(
          { trades: failed },
          "approved trades whose run was cut short before they were signed failed; nothing was paid",
        );
    } finally {
      busy = false;
    }
  };
  const sweeper = setInterval(() => {
    void sweep().catch((error: unknown) => log.warn({ err: error }, "could not expire held trades"));
  }, APPROVAL_SWEEP_MS);
  sweeper.unref();
  shutdown.push(async () => clearInterval(sweeper));
}

/**
 * Webhooks: this instance registers the scopes of its own endpoints (never touching another
 * instance's), so from now on the journal writes an event with each change of their trades, in
 * the change's own transaction; the deliverer sends the events of those scopes only (closed
 * before the journal). An instance without endpoints registers nothing and delivers nothing.
 * The upkeep, on every instance: the registrations renewed, the events of a scope that no
 * running instance has an endpoint for failed once their retry window has closed, and the events
 * delivered or failed over WEBHOOK_RETENTION_DAYS ago deleted, a page at a time.
 */
async function startWebhooks(
  journal: ServiceJournal,
  config: AppConfig,
  context: {
    instanceId: string;
    metrics: ServiceMetrics | undefined;
    log: Logger;
    shutdown: Shutdown;
    watchers?: WebhookWatchers;
  },
): Promise<{ deliverer: WebhookDeliverer | undefined; upkeep: () => Promise<void> }> {
  const { instanceId, metrics, log, shutdown, watchers } = context;
  const endpoints = new Map(config.webhooks.endpoints.map(({ apiKeyId, ...endpoint }) => [apiKeyId, endpoint]));
  const scopes = [...endpoints.keys()];
  const ttlMs = Math.max(WEBHOOK_REGISTRATION_TTL_MS, 3 * config.trade.leaseMs);
  const register = () => journal.registerWebhookScopes(instanceId, scopes, ttlMs, watchers?.scopes() ?? []);
  if (watchers !== undefined && scopes.length > 0) watchers.register = register;
  let busy = false;
  const upkeep = async () => {
    if (busy) return; // the previous beat's is still at work
    busy = true;
    try {
      if (scopes.length > 0) await register();
      const windowStartBefore = new Date(Date.now() - config.webhooks.retryWindowMs);
      const failed = await journal.failOrphanedWebhookEvents(windowStartBefore, ORPHANS_PER_BEAT);
      if (failed > 0)
        log.warn(
          { events: failed },
          "failed webhook events whose retry window closed while no running instance had their api key's endpoint",
        );
      const finishedBefore = new Date(Date.now() - config.webhooks.retentionMs);
      let deleted = 0;
      for (let page = 0; page < SWEEP_PAGES_PER_BEAT; page++) {
        const swept = await journal.sweepWebhookEvents(finishedBefore, SWEEP_PAGE);
        deleted += swept;
        if (swept < SWEEP_PAGE) break;
      }
      if (deleted > 0)
        log.info({ events: deleted }, "deleted webhook events delivered or failed over WEBHOOK_RETENTION_DAYS ago");
    } finally {
      busy = false;
    }
  };
  if (scopes.length === 0) return { deliverer: undefined, upkeep };
  await register();
  const deliverer = new WebhookDeliverer({
    outbox: journal,
    endpoints,
    log: log.child({ component: "webhooks" }),
    holder: instanceId,
    allowPrivate: config.webhooks.allowPrivate,
    retry: { windowMs: config.webhooks.retryWindowMs },
    ...(metrics === undefined ? {} : { onOutcome: (outcome) => metrics.webhookOutcome(outcome) }),
  });
  deliverer.start();
  shutdown.push(() => deliverer.close());
  log.info({ endpoints: endpoints.size }, "webhook deliverer started");
  return { deliverer, upkeep };
}
