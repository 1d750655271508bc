/** The PostgreSQL journal's quotes (QuoteStore): their SQL and rows (their table: migration 4, migrations.ts). */
import type pg from "pg";

import type { QuoteStore, StoredQuote, TradeKind } from "../../../core/index.js";

export class PostgresQuotes implements QuoteStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async saveQuote(quote: StoredQuote): Promise<void> {
    await this.#pool.query(QUOTE_SQL.insert, quoteParams(quote));
  }

  async getQuote(id: string): Promise<StoredQuote | undefined> {
    const { rows } = await this.#pool.query(QUOTE_SQL.byId, [id]);
    return rows[0] === undefined ? undefined : toQuote(rows[0] as Record<string, unknown>);
  }

  async consumeQuote(id: string, scope: string, tradeId: string, now: Date): Promise<boolean> {
    return (await this.#pool.query(QUOTE_SQL.consume, [tradeId, id, scope, now])).rowCount === 1;
  }

  async releaseQuote(id: string, tradeId: string): Promise<void> {
    await this.#pool.query(QUOTE_SQL.release, [id, tradeId]);
  }

  async sweepQuotes(before: Date): Promise<number> {
    return (await this.#pool.query(QUOTE_SQL.sweep, [before])).rowCount ?? 0;
  }
}

const QUOTE_SQL = {
  insert: `INSERT INTO quotes (id, scope, kind, wallet, destinatary, stable, amount, min_out, expires_at, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
  byId: "SELECT * FROM quotes WHERE id = $1",
  // One conditional UPDATE: of several trades naming the quote, on any instance, exactly one changes the row.
  consume: "UPDATE quotes SET trade_id = $1 WHERE id = $2 AND scope = $3 AND trade_id IS NULL AND expires_at > $4",
  release: "UPDATE quotes SET trade_id = NULL WHERE id = $1 AND trade_id = $2",
  sweep: "DELETE FROM quotes WHERE expires_at < $1",
} as const;

/** The insert's parameters. */
function quoteParams(quote: StoredQuote): unknown[] {
  return [
    quote.id,
    quote.scope,
    quote.kind,
    quote.wallet,
    quote.destinatary,
    quote.stable,
    quote.amount.toString(),
    quote.minOut.toString(),
    quote.expiresAt,
    quote.createdAt,
  ];
}

function toQuote(row: Record<string, unknown>): StoredQuote {
  return {
    id: String(row.id),
    scope: String(row.scope),
    kind: String(row.kind) as TradeKind,
    wallet: String(row.wallet),
    destinatary: row.destinatary === null ? null : String(row.destinatary),
    stable: String(row.stable),
    amount: BigInt(String(row.amount)),
    minOut: BigInt(String(row.min_out)),
    expiresAt: new Date(row.expires_at as Date),
    createdAt: new Date(row.created_at as Date),
    tradeId: row.trade_id === null ? null : String(row.trade_id),
  };
}
