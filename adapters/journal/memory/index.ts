/**
 * The trade journal in memory: for tests and for a service that may forget everything when it
 * stops. It passes the same conformance suite as SQLite and PostgreSQL
 * (test/adapters/journal/journal.contract.ts), except what only durable storage can do.
 *
 * Its ports, one object each over one store (store.ts), and every port's methods as its own
 * (Journal, adapters/shared/journal.ts).
 */
import type { TradeRecord } from "../../../core/index.js";
import { Journal } from "../../shared/journal.js";
import { MemoryApprovals } from "./approvals.js";
import { MemoryLeases } from "./leases.js";
import { MemoryNonces } from "./nonces.js";
import { MemoryQuotes } from "./quotes.js";
import { MemoryStore } from "./store.js";
import { MemoryTrades } from "./trades.js";
import { MemoryWatch } from "./watch.js";
import { MemoryOutbox } from "./webhooks.js";

export class MemoryJournal extends Journal {
  readonly #store = new MemoryStore();
  readonly ports = {
    trades: new MemoryTrades(this.#store),
    nonces: new MemoryNonces(this.#store),
    leases: new MemoryLeases(),
    quotes: new MemoryQuotes(),
    webhooks: new MemoryOutbox(this.#store.events, this.#store.audit),
    audit: this.#store.audit,
    watch: new MemoryWatch(this.#store),
    approvals: new MemoryApprovals(this.#store),
  };

  async close(): Promise<void> {}

  /** Every trade recorded, oldest first (for tests). */
  trades(): TradeRecord[] {
    return [...this.#store.trades.values()].map((stored) => this.#store.record(stored));
  }
}
