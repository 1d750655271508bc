/**
 * The trade journal in memory: for tests and for a service that may forget everything when it
 * stops. It passes the same conformance suite as SQLite and PostgreSQL
 * (test/adapters/journal/journal.contract.ts), except what only durable storage can do.
 *
 * One object with every port's methods: those of its parts, one part per port, over one store
 * (store.ts; how the parts make one journal: ../parts.ts).
 */
import type { TradeRecord } from "../../../core/index.js";
import { type CoversPorts, delegateToParts, type JournalPorts, type PartsOf } from "../parts.js";
import { MemoryLeases } from "./leases.js";
import { MemoryNonces } from "./nonces.js";
import { MemoryQuotes } from "./quotes.js";
import { MemoryStore } from "./store.js";
import { MemoryTrades } from "./trades.js";
import { MemoryOutbox } from "./webhooks.js";

/** Its parts, one per port: each method of theirs is one of the journal's (delegateToParts, below). */
const PARTS = {
  trades: MemoryTrades,
  nonces: MemoryNonces,
  leases: MemoryLeases,
  quotes: MemoryQuotes,
  webhooks: MemoryOutbox,
};
type Parts = PartsOf<typeof PARTS>;
// Every port method is some part's: a missing one fails to compile.
true satisfies CoversPorts<Parts>;

/** Every port the journal implements, by its parts. */
export interface MemoryJournal extends JournalPorts {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the ports' methods are its parts', put on its prototype by delegateToParts (below)
export class MemoryJournal {
  readonly #store = new MemoryStore();
  protected readonly parts: Parts = {
    trades: new MemoryTrades(this.#store),
    nonces: new MemoryNonces(this.#store),
    leases: new MemoryLeases(),
    quotes: new MemoryQuotes(),
    webhooks: new MemoryOutbox(this.#store.events),
  };

  async close(): Promise<void> {}

  /** Every trade recorded, oldest first (for tests). */
  trades(): TradeRecord[] {
    return [...this.#store.trades.values()].map((stored) => this.#store.record(stored));
  }
}

delegateToParts(MemoryJournal, PARTS);
