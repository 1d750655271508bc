/**
 * The wallet watch's metrics (adapters/chain/watch/): the outside transactions counted as they
 * are recorded, and gauges read from its last reading at each scrape (no call to the node):
 *
 * - `token_service_wallet_outside_transactions_total{wallet}`: transactions mined from the wallet
 *   that the service never signed (counted by the instance that recorded each);
 * - `token_service_wallet_paused{wallet}`: 1 while the wallet is paused (OUTSIDE_TX_POLICY=pause);
 * - `token_service_wallet_balance_low{wallet, asset}` and `token_service_swap_reserves_low{asset}`:
 *   1 while the alarm is raised (below the threshold, until back at 120 % of it);
 * - `token_service_wallet_balance_threshold{wallet, asset}` and
 *   `token_service_swap_reserves_threshold{asset}`: the thresholds, in whole units (WATCH_*_MIN);
 * - `token_service_swap_reserves{asset}`: the swap's reserves of each coin, in whole units;
 * - `token_service_wallet_trades_left{wallet}`: how many trades of typical gas the wallet's native
 *   balance pays for at the fees trades are signed with now;
 * - `token_service_watch_reading_age_seconds`: how old the watch's last reading is.
 * Assets are named as `token_service_wallet_balance` names them: ETH for the native coin.
 */
import { Counter, Gauge, type Registry } from "prom-client";

import type { WatchObserver, WatchState } from "../chain/index.js";
import { PREFIX } from "./prefix.js";

/** The native coin as the balance gauge names it. */
const assetLabel = (asset: string) => (asset === "native" ? "ETH" : asset);

/** Whole units, as a gauge holds them (a double: exact enough for a graph and a threshold). */
const whole = (units: bigint, decimals: number) => Number(units) / 10 ** decimals;

export class WatchMetrics {
  readonly #registry: Registry;
  readonly #outside: Counter;
  /** Counts an outside transaction recorded by this instance. */
  readonly observer: WatchObserver;

  constructor(registry: Registry) {
    this.#registry = registry;
    this.#outside = new Counter({
      name: `${PREFIX}wallet_outside_transactions_total`,
      help: "Transactions mined from an exchange wallet that this service never signed, by wallet.",
      labelNames: ["wallet"],
      registers: [registry],
    });
    this.observer = { outsideTransaction: (wallet) => this.#outside.inc({ wallet }) };
  }

  /** The gauges, read from the watch's last reading at each scrape; empty without a watch. */
  watch(source: () => WatchState | undefined): void {
    const registers = [this.#registry];
    // Each wallet's counter from 0, so that rate() and increase() see its first outside transaction.
    for (const wallet of source()?.wallets ?? []) this.#outside.inc({ wallet: wallet.wallet }, 0);
    const gauge = (name: string, help: string, labelNames: string[], fill: (g: Gauge, s: WatchState) => void) =>
      new Gauge({
        name: `${PREFIX}${name}`,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          const state = source();
          if (state !== undefined) fill(this, state);
        },
      });
    gauge("wallet_paused", "1 while the wallet is paused after an outside transaction.", ["wallet"], (g, s) => {
      for (const w of s.wallets) g.set({ wallet: w.wallet }, w.pause === undefined ? 0 : 1);
    });
    gauge("wallet_balance_low", "1 while the wallet's balance alarm is raised.", ["wallet", "asset"], (g, s) => {
      for (const w of s.wallets)
        for (const b of w.balances)
          if (b.threshold !== undefined) g.set({ wallet: w.wallet, asset: assetLabel(b.asset) }, b.low ? 1 : 0);
    });
    gauge(
      "wallet_balance_threshold",
      "The wallet's balance threshold (WATCH_*_MIN), whole units.",
      ["wallet", "asset"],
      (g, s) => {
        for (const w of s.wallets)
          for (const b of w.balances)
            if (b.threshold !== undefined)
              g.set({ wallet: w.wallet, asset: assetLabel(b.asset) }, whole(b.threshold.min, b.decimals));
      },
    );
    gauge(
      "wallet_trades_left",
      "Trades of typical gas the wallet's native balance pays for at today's fees.",
      ["wallet"],
      (g, s) => {
        for (const w of s.wallets) if (w.tradesLeft !== undefined) g.set({ wallet: w.wallet }, w.tradesLeft);
      },
    );
    gauge("swap_reserves", "The swap's reserves of each stable coin, whole units.", ["asset"], (g, s) => {
      for (const r of s.reserves) g.set({ asset: r.asset }, whole(r.units, r.decimals));
    });
    gauge("swap_reserves_low", "1 while the swap's reserves alarm is raised.", ["asset"], (g, s) => {
      for (const r of s.reserves) if (r.threshold !== undefined) g.set({ asset: r.asset }, r.low ? 1 : 0);
    });
    gauge(
      "swap_reserves_threshold",
      "The swap's reserves threshold (WATCH_RESERVES_*_MIN), whole units.",
      ["asset"],
      (g, s) => {
        for (const r of s.reserves)
          if (r.threshold !== undefined) g.set({ asset: r.asset }, whole(r.threshold.min, r.decimals));
      },
    );
    gauge("watch_reading_age_seconds", "How old the wallet watch's last reading is.", [], (g, s) => {
      if (s.at !== undefined) g.set(Math.max(0, (Date.now() - s.at.getTime()) / 1000));
    });
  }
}
