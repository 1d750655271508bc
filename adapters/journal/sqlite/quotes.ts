/**
 * The SQLite journal's quotes (QuoteStore): their statements and rows (their table: migration 5,
 * migrations.ts). Amounts are decimal text (they pass 2^63); times are ms since the epoch.
 */
import type { DatabaseSync, SQLOutputValue } from "node:sqlite";

import type { QuoteStore, StoredQuote, TradeKind } from "../../../core/index.js";
import type { SqliteStore } from "./store.js";

export class SqliteQuotes implements QuoteStore {
  readonly #store: SqliteStore;
  #sql: ReturnType<typeof quoteStatements> | undefined;

  constructor(store: SqliteStore) {
    this.#store = store;
  }

  get #quotes(): ReturnType<typeof quoteStatements> {
    this.#sql ??= quoteStatements(this.#store.db);
    return this.#sql;
  }

  saveQuote(quote: StoredQuote): Promise<void> {
    return this.#store.write(() => {
      this.#quotes.insert.run(...quoteRow(quote));
    });
  }

  async getQuote(id: string): Promise<StoredQuote | undefined> {
    const row = this.#quotes.byId.get(id);
    return row === undefined ? undefined : toQuote(row);
  }

  consumeQuote(id: string, scope: string, tradeId: string, now: Date): Promise<boolean> {
    return this.#store.write(() => Number(this.#quotes.consume.run(tradeId, id, scope, now.getTime()).changes) === 1);
  }

  releaseQuote(id: string, tradeId: string): Promise<void> {
    return this.#store.write(() => {
      this.#quotes.release.run(id, tradeId);
    });
  }

  sweepQuotes(before: Date): Promise<number> {
    return this.#store.write(() => Number(this.#quotes.sweep.run(before.getTime()).changes));
  }
}

/** Prepared once, when the journal first handles a quote. */
function quoteStatements(db: DatabaseSync) {
  return {
    insert: db.prepare(
      `INSERT INTO quotes (id, scope, kind, wallet, destinatary, stable, amount, min_out, expires_at, created_at, trade_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`,
    ),
    byId: db.prepare("SELECT * FROM quotes WHERE id = ?"),
    // One conditional write: of several trades naming the quote, exactly one changes the row.
    consume: db.prepare(
      "UPDATE quotes SET trade_id = ? WHERE id = ? AND scope = ? AND trade_id IS NULL AND expires_at > ?",
    ),
    release: db.prepare("UPDATE quotes SET trade_id = NULL WHERE id = ? AND trade_id = ?"),
    sweep: db.prepare("DELETE FROM quotes WHERE expires_at < ?"),
  };
}

/** The row values of `quote`, in the insert's order. */
function quoteRow(quote: StoredQuote): Array<string | number | null> {
  return [
    quote.id,
    quote.scope,
    quote.kind,
    quote.wallet,
    quote.destinatary,
    quote.stable,
    quote.amount.toString(),
    quote.minOut.toString(),
    quote.expiresAt.getTime(),
    quote.createdAt.getTime(),
  ];
}

function toQuote(row: Record<string, SQLOutputValue>): StoredQuote {
  return {
    id: String(row.id),
    scope: String(row.scope),
    kind: String(row.kind) as TradeKind,
    wallet: String(row.wallet),
    destinatary: row.destinatary === null ? null : String(row.destinatary),
    stable: String(row.stable),
    amount: BigInt(String(row.amount)),
    minOut: BigInt(String(row.min_out)),
    expiresAt: new Date(Number(row.expires_at)),
    createdAt: new Date(Number(row.created_at)),
    tradeId: row.trade_id === null ? null : String(row.trade_id),
  };
}
