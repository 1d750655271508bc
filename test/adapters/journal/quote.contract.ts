/**
 * The quotes' part of the journal conformance suite (journal.contract.ts runs it on memory,
 * SQLite and PostgreSQL): saved and read back exactly, used once across instances, given back,
 * and swept once expired.
 */
import { expect } from "chai";

import type { Journal } from "../../../adapters/journal/index.js";
import type { StoredQuote } from "../../../core/index.js";

export interface QuoteContractContext {
  /** This test's journal. */
  journal(): Journal;
  /** A second instance on the same storage when the backend allows it, else the same one. */
  peer(): Promise<Journal>;
}

let serial = 0;

/** A quote expiring `inMs` from now; override fields to vary it. */
export function storedQuote(overrides: Partial<StoredQuote> = {}, inMs = 30_000): StoredQuote {
  serial += 1;
  const now = Date.now();
  return {
    id: `q_${serial.toString(16).padStart(32, "0")}`,
    scope: "api-key-hash-1",
    kind: "sell",
    wallet: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    destinatary: "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
    stable: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    amount: 2n ** 70n + 1n, // beyond 2^64: kept exactly
    minOut: 12_437_500n,
    expiresAt: new Date(now + inMs),
    createdAt: new Date(now),
    tradeId: null,
    ...overrides,
  };
}

export function describeQuoteContract(context: QuoteContractContext): void {
  describe("quotes", function () {
    it("keeps a quote exactly as saved, and answers undefined for an unknown id", async function () {
      const quote = storedQuote({ destinatary: null });
      await context.journal().saveQuote(quote);
      expect(await context.journal().getQuote(quote.id)).to.deep.equal(quote);
      expect(await context.journal().getQuote("q_ffffffffffffffffffffffffffffffff")).to.equal(undefined);
    });

    it("lets exactly one of 20 concurrent trades use a quote, across instances", async function () {
      const quote = storedQuote();
      await context.journal().saveQuote(quote);
      const other = await context.peer();
      const now = new Date();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? context.journal() : other).consumeQuote(quote.id, quote.scope, `trade-${i}`, now),
        ),
      );
      expect(results.filter(Boolean)).to.have.length(1);
      const winner = `trade-${results.indexOf(true)}`;
      expect((await other.getQuote(quote.id))?.tradeId).to.equal(winner);
    });

    it("refuses to use a quote for another scope, or once expired", async function () {
      const quote = storedQuote({}, 1_000);
      await context.journal().saveQuote(quote);
      expect(await context.journal().consumeQuote(quote.id, "another-scope", "t1", new Date())).to.equal(false);
      expect(await context.journal().consumeQuote(quote.id, quote.scope, "t1", quote.expiresAt)).to.equal(false);
      expect(await context.journal().consumeQuote("q_nothing", quote.scope, "t1", new Date())).to.equal(false);
      expect((await context.journal().getQuote(quote.id))?.tradeId).to.equal(null);
    });

    it("gives a quote back only for the trade that used it", async function () {
      const quote = storedQuote();
      await context.journal().saveQuote(quote);
      expect(await context.journal().consumeQuote(quote.id, quote.scope, "t1", new Date())).to.equal(true);
      await context.journal().releaseQuote(quote.id, "t2");
      expect((await context.journal().getQuote(quote.id))?.tradeId).to.equal("t1");
      await context.journal().releaseQuote(quote.id, "t1");
      expect((await context.journal().getQuote(quote.id))?.tradeId).to.equal(null);
      expect(await context.journal().consumeQuote(quote.id, quote.scope, "t2", new Date())).to.equal(true);
    });

    it("sweeps the quotes that expired before the given time, and keeps the rest", async function () {
      const expired = storedQuote({}, -60_000);
      const later = storedQuote({}, -50_000);
      const live = storedQuote();
      for (const quote of [expired, later, live]) await context.journal().saveQuote(quote);
      expect(await context.journal().sweepQuotes(new Date(Date.now() - 55_000))).to.equal(1);
      expect(await context.journal().sweepQuotes(new Date())).to.equal(1);
      expect(await context.journal().getQuote(expired.id)).to.equal(undefined);
      expect(await context.journal().getQuote(later.id)).to.equal(undefined);
      expect(await context.journal().getQuote(live.id)).to.deep.equal(live);
    });
  });
}
