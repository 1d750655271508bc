/** The memory journal's quotes (QuoteStore). */
import type { QuoteStore, StoredQuote } from "../../../core/index.js";

export class MemoryQuotes implements QuoteStore {
  readonly #quotes = new Map<string, StoredQuote>();

  async saveQuote(quote: StoredQuote): Promise<void> {
    this.#quotes.set(quote.id, { ...quote });
  }

  async getQuote(id: string): Promise<StoredQuote | undefined> {
    const quote = this.#quotes.get(id);
    return quote && { ...quote };
  }

  async consumeQuote(id: string, scope: string, tradeId: string, now: Date): Promise<boolean> {
    const quote = this.#quotes.get(id);
    if (quote?.scope !== scope || quote.tradeId !== null || quote.expiresAt <= now) return false;
    quote.tradeId = tradeId;
    return true;
  }

  async releaseQuote(id: string, tradeId: string): Promise<void> {
    const quote = this.#quotes.get(id);
    if (quote?.tradeId === tradeId) quote.tradeId = null;
  }

  async sweepQuotes(before: Date): Promise<number> {
    let swept = 0;
    for (const [id, quote] of this.#quotes) {
      if (quote.expiresAt < before && this.#quotes.delete(id)) swept++;
    }
    return swept;
  }
}
