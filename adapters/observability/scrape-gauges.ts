/**
 * The gauges read at each scrape rather than set as things happen: the exchange wallets and the
 * chain's head (WalletSource), and the webhook outbox. ServiceMetrics.watch and watchWebhooks
 * register them on its registry (metrics.ts).
 */
import { Gauge, type Registry } from "prom-client";

import type { WalletSource } from "../chain/index.js";
import { PREFIX } from "./prefix.js";

/** What the webhook gauges read: the outbox's depth and the time of its oldest pending event. */
export interface WebhookOutboxStats {
  webhookStats(): Promise<{ pending: number; oldestPendingAt: Date | null }>;
}

/** The webhook outbox's depth and the age of its oldest pending event, read at each scrape. */
export function watchWebhookOutbox(registry: Registry, outbox: WebhookOutboxStats): void {
  let last: { at: number; stats: ReturnType<typeof outbox.webhookStats> } | undefined;
  const stats = () => {
    const now = performance.now();
    if (last === undefined || now - last.at > 1000) last = { at: now, stats: outbox.webhookStats() };
    return last.stats;
  };
  new Gauge({
    name: `${PREFIX}webhook_queue_depth`,
    help: "Webhook events waiting to be delivered (pending).",
    registers: [registry],
    async collect() {
      this.reset();
      await stats().then(
        (s) => this.set(s.pending),
        () => {},
      );
    },
  });
  new Gauge({
    name: `${PREFIX}webhook_oldest_pending_age_seconds`,
    help: "How long the oldest pending webhook event has waited (0 when none waits).",
    registers: [registry],
    async collect() {
      this.reset();
      const now = Date.now();
      await stats().then(
        (s) => this.set(s.oldestPendingAt === null ? 0 : (now - s.oldestPendingAt.getTime()) / 1000),
        () => {},
      );
    },
  });
}

/**
 * Gauges read from `source` at each scrape: unconfirmed nonces, balances, the head's age. A
 * read that fails (the chain unreachable) leaves its gauges empty for that scrape; the rest
 * of the metrics are still served.
 */
export function watchWalletSource(registry: Registry, source: WalletSource): void {
  const registers = [registry];
  // Both nonce gauges come from one journal read per scrape (reused for a second).
  let unconfirmed: { at: number; rows: ReturnType<WalletSource["unconfirmed"]> } | undefined;
  const readUnconfirmed = () => {
    const now = performance.now();
    if (unconfirmed === undefined || now - unconfirmed.at > 1000) unconfirmed = { at: now, rows: source.unconfirmed() };
    return unconfirmed.rows;
  };
  const read = async <T>(gauge: Gauge, fetch: () => Promise<T>, fill: (value: T) => void) => {
    gauge.reset();
    try {
      fill(await fetch());
    } catch {
      // left empty: the scrape shows the gauge without samples
    }
  };
  new Gauge({
    name: `${PREFIX}wallet_unconfirmed_nonces`,
    help: "Nonces sent and not yet confirmed, by wallet.",
    labelNames: ["wallet"],
    registers,
    async collect() {
      await read(this, readUnconfirmed, (rows) => {
        for (const { wallet, count } of rows) this.set({ wallet }, count);
      });
    },
  });
  new Gauge({
    name: `${PREFIX}wallet_oldest_unconfirmed_age_seconds`,
    help: "How long the oldest unconfirmed nonce has waited, by wallet (0 when none waits).",
    labelNames: ["wallet"],
    registers,
    async collect() {
      const now = Date.now();
      await read(this, readUnconfirmed, (rows) => {
        for (const { wallet, oldestSince } of rows)
          this.set({ wallet }, oldestSince === undefined ? 0 : (now - oldestSince.getTime()) / 1000);
      });
    },
  });
  new Gauge({
    name: `${PREFIX}wallet_balance`,
    help: "Exchange wallets' balances in whole units (ether, tokens, stable coins), by wallet and asset.",
    labelNames: ["wallet", "asset"],
    registers,
    async collect() {
      await read(
        this,
        () => source.balances(),
        (rows) => {
          for (const { wallet, asset, amount } of rows) this.set({ wallet, asset }, amount);
        },
      );
    },
  });
  new Gauge({
    name: `${PREFIX}chain_head_age_seconds`,
    help: "Age of the latest block the node reports.",
    registers,
    async collect() {
      await read(
        this,
        () => source.headTimestamp(),
        (timestamp) => this.set(Math.max(0, Date.now() / 1000 - timestamp)),
      );
    },
  });
}
