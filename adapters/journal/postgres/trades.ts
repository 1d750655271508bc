/** The PostgreSQL journal's trades (TradeJournal, but `close`, which is the journal's). */
import { randomUUID } from "node:crypto";

import type pg from "pg";

import type {
  Broadcast,
  NewTrade,
  SignedTradeTx,
  TradeJournal,
  TradePage,
  TradePageQuery,
  TradeRecord,
  TradeSummaryQuery,
  TradeTotals,
  TransactionReceipt,
} from "../../../core/index.js";
import {
  amountColumns,
  BROADCAST_COLUMNS,
  type BroadcastRow,
  COLUMNS,
  insertBroadcast,
  type Row,
  toBroadcast,
  toRecord,
} from "./rows.js";
import { transaction } from "./store.js";
import { encodeReserves } from "../reservations.js";

export class PostgresTrades implements Omit<TradeJournal, "close"> {
  readonly #pool: pg.Pool;
  /** This instance's name: the owner of the trades it accepts (PostgresJournalOptions.instanceId). */
  readonly #instance: string;

  constructor(pool: pg.Pool, instance: string) {
    this.#pool = pool;
    this.#instance = instance;
  }

  async forgetUnsigned(staleAfterMs?: number): Promise<number> {
    // Another instance's, once its lease ran out; this one's own, once unchanged for staleAfterMs
    // (by the database's clock, as the leases; none of its own without a bound).
    const { rowCount } = await this.#pool.query(
      `DELETE FROM trades t WHERE t.status = 'accepted' AND t.tx_hash IS NULL
       AND (t.owner IS NULL OR (t.owner <> $1 AND NOT EXISTS (
         SELECT 1 FROM leases l WHERE l.name = 'instance:' || t.owner AND l.expires_at > clock_timestamp()))
         OR (t.owner = $1 AND t.updated_at < clock_timestamp() - make_interval(secs => $2::float8 / 1000)))`,
      [this.#instance, staleAfterMs ?? null],
    );
    return rowCount ?? 0;
  }

  async open(trade: NewTrade): Promise<{ created: boolean; record: TradeRecord }> {
    const id = randomUUID();
    // Retried only if the existing record is discarded between the two statements.
    for (let attempt = 0; attempt < 5; attempt++) {
      // Of concurrent inserts with one key, PostgreSQL lets exactly one through; the others wait
      // for it to commit, then do nothing, and read its row.
      const inserted = await this.#pool.query<Row>(
        `INSERT INTO trades (id, scope, idempotency_key, request_hash, kind, request, status, owner)
         VALUES ($1, $2, $3, $4, $5, $6, 'accepted', $7)
         ON CONFLICT (scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING ${COLUMNS}`,
        [
          id,
          trade.scope,
          trade.idempotencyKey,
          trade.requestHash,
          trade.kind,
          JSON.stringify(trade.request),
          this.#instance,
        ],
      );
      if (inserted.rows[0]) return { created: true, record: toRecord(inserted.rows[0], []) };
      const existing = await this.#pool.query<Row>(
        `SELECT ${COLUMNS} FROM trades WHERE scope = $1 AND idempotency_key = $2`,
        [trade.scope, trade.idempotencyKey],
      );
      const record = existing.rows[0] && (await this.get(existing.rows[0].id));
      if (record) return { created: false, record };
    }
    throw new Error("trade journal: the record for this idempotency key keeps being discarded; try again");
  }

  async markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    const wallet = tx.wallet.toLowerCase();
    await transaction(this.#pool, async (client) => {
      const { rowCount } = await client.query("SELECT 1 FROM trades WHERE id = $1 FOR UPDATE", [id]);
      if (rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
      // Signed again (the node refused the first nonce, so nothing of it was broadcast): the old slot goes.
      await client.query(
        "DELETE FROM broadcasts b USING nonce_slots s WHERE s.trade_id = $1 AND b.wallet = s.wallet AND b.nonce = s.nonce",
        [id],
      );
      await client.query("DELETE FROM nonce_slots WHERE trade_id = $1", [id]);
      await client.query(
        "INSERT INTO nonce_slots (wallet, nonce, purpose, trade_id, deadline, state, reserves) VALUES ($1, $2, 'trade', $3, $4, 'pending', $5)",
        [wallet, tx.nonce, id, tx.deadline, encodeReserves(tx.reserves, tx.txHash)],
      );
      await insertBroadcast(client, wallet, tx.nonce, {
        hash: tx.txHash,
        rawTx: tx.rawTx,
        maxFeePerGas: tx.maxFeePerGas,
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
        noop: false,
        sentAt: new Date(),
      });
      await client.query(
        `UPDATE trades SET status = 'signed', wallet = $2, nonce = $3, tx_hash = $4, raw_tx = $5, deadline = $6,
         native_usd = $7, updated_at = clock_timestamp() WHERE id = $1`,
        [id, tx.wallet, tx.nonce, tx.txHash, tx.rawTx, tx.deadline, tx.nativeUsd?.toString() ?? null],
      );
    });
  }

  async markSubmitted(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query(
      "UPDATE trades SET status = 'submitted', updated_at = clock_timestamp() WHERE id = $1 AND status = 'signed'",
      [id],
    );
    if (rowCount === 0) await this.#expectTrade(id);
  }

  async markReorged(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `WITH t AS (
         UPDATE trades SET status = 'submitted', receipt = NULL, amount_in = NULL, amount_out = NULL, gas_wei = NULL,
         gas_usd = NULL, updated_at = clock_timestamp() WHERE id = $1 AND status IN ('mined', 'confirmed') RETURNING id
       )
       UPDATE nonce_slots s SET state = 'pending', mined_hash = NULL, block_number = NULL, block_hash = NULL, updated_at = clock_timestamp()
       FROM t WHERE s.trade_id = t.id AND s.state <> 'final'`,
      [id],
    );
    if (rowCount === 0) await this.#expectTrade(id);
  }

  async markMined(id: string, receipt: TransactionReceipt): Promise<void> {
    await this.#mined(id, "mined", receipt);
  }

  async markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    await this.#mined(id, "confirmed", receipt);
  }

  async markFailed(id: string, error: { code: string; message: string }): Promise<void> {
    // An expired trade stays expired: its no-op took the nonce, and that is its outcome.
    const { rowCount } = await this.#pool.query(
      "UPDATE trades SET status = 'failed', error = $2, updated_at = clock_timestamp() WHERE id = $1 AND status <> 'expired'",
      [id, JSON.stringify({ code: error.code, message: error.message })],
    );
    if (rowCount === 0) await this.#expectTrade(id);
  }

  async markExpired(id: string, error: { code: string; message: string }): Promise<void> {
    await this.#updateOne(id, "status = 'expired', error = $2", [
      JSON.stringify({ code: error.code, message: error.message }),
    ]);
  }

  async discard(id: string): Promise<void> {
    // Never deletes a trade with a signed transaction: its money may have left the wallet.
    const deleted = await this.#pool.query("DELETE FROM trades WHERE id = $1 AND tx_hash IS NULL", [id]);
    if (deleted.rowCount === 0 && (await this.get(id))) {
      throw new Error(`trade ${id} has a signed transaction and cannot be discarded`);
    }
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const [{ rows }, broadcasts] = await Promise.all([
      this.#pool.query<Row>(`SELECT ${COLUMNS} FROM trades WHERE id = $1`, [id]),
      this.#pool.query<BroadcastRow>(
        `SELECT ${BROADCAST_COLUMNS} FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
         WHERE s.trade_id = $1 ORDER BY b.seq`,
        [id],
      ),
    ]);
    return rows[0] ? toRecord(rows[0], broadcasts.rows.map(toBroadcast)) : undefined;
  }

  async findByHash(txHash: string): Promise<TradeRecord | undefined> {
    const { rows } = await this.#pool.query<{ id: string }>(
      `SELECT s.trade_id AS id FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
       WHERE b.hash = $1 AND s.trade_id IS NOT NULL
       UNION ALL SELECT id FROM trades WHERE tx_hash = $1 LIMIT 1`,
      [txHash.toLowerCase()],
    );
    return rows[0] ? this.get(rows[0].id) : undefined;
  }

  /**
   * Reads the rows in the order of one of the history indexes (migration 3), from the cursor on.
   * Positions are in microseconds, as created_at holds them.
   */
  async page(query: TradePageQuery): Promise<TradePage> {
    const values: unknown[] = [query.scope];
    const where = ["scope = $1"];
    const param = (value: unknown) => `$${values.push(value)}`;
    if (query.status !== undefined) where.push(`status = ${param(query.status)}`);
    if (query.kind !== undefined) where.push(`kind = ${param(query.kind)}`);
    if (query.since !== undefined) where.push(`created_at >= ${param(query.since)}`);
    if (query.until !== undefined) where.push(`created_at < ${param(query.until)}`);
    if (query.after !== undefined) {
      const at = `('epoch'::timestamptz + ${param(query.after.createdAtUs.toString())}::bigint * interval '1 microsecond')`;
      where.push(`created_at <= ${at} AND (created_at < ${at} OR id < ${param(query.after.id)})`);
    }
    const { rows } = await this.#pool.query<Row & { created_us: string }>(
      `SELECT ${COLUMNS}, (extract(epoch FROM created_at) * 1000000)::bigint::text AS created_us
       FROM trades WHERE ${where.join(" AND ")} ORDER BY created_at DESC, id DESC LIMIT ${param(query.limit + 1)}`,
      values,
    );
    const trades = rows.slice(0, query.limit);
    const broadcasts = new Map<string, Broadcast[]>();
    if (trades.length > 0) {
      const found = await this.#pool.query<BroadcastRow & { trade_id: string }>(
        `SELECT s.trade_id, ${BROADCAST_COLUMNS} FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
         WHERE s.trade_id = ANY($1) ORDER BY b.seq`,
        [trades.map((row) => row.id)],
      );
      for (const row of found.rows) {
        const list = broadcasts.get(row.trade_id) ?? [];
        list.push(toBroadcast(row));
        broadcasts.set(row.trade_id, list);
      }
    }
    const last = trades.at(-1);
    return {
      trades: trades.map((row) => toRecord(row, broadcasts.get(row.id) ?? [])),
      next:
        rows.length > query.limit && last !== undefined ? { createdAtUs: BigInt(last.created_us), id: last.id } : null,
    };
  }

  /** One aggregate; NUMERIC sums are exact. */
  async summary(query: TradeSummaryQuery): Promise<TradeTotals[]> {
    const values: unknown[] = [query.scope];
    const where = ["scope = $1"];
    if (query.since !== undefined) where.push(`created_at >= $${values.push(query.since)}`);
    if (query.until !== undefined) where.push(`created_at < $${values.push(query.until)}`);
    const executed = "FILTER (WHERE status IN ('mined', 'confirmed'))";
    const { rows } = await this.#pool.query<{
      kind: TradeTotals["kind"];
      stable: string;
      count: number;
      executed: number;
      amount_in: string;
      amount_out: string;
      gas_wei: string;
      gas_usd: string | null;
    }>(
      // One executed trade without its gas in USD makes the group's unknown (TradeTotals.gasUsd).
      `SELECT kind, lower(request->>'usdAddress') AS stable, count(*)::int AS count, count(*) ${executed}::int AS executed,
         coalesce(sum(amount_in) ${executed}, 0)::text AS amount_in,
         coalesce(sum(amount_out) ${executed}, 0)::text AS amount_out,
         coalesce(sum(gas_wei) ${executed}, 0)::text AS gas_wei,
         CASE WHEN count(*) FILTER (WHERE status IN ('mined', 'confirmed') AND gas_usd IS NULL) > 0 THEN NULL
           ELSE coalesce(sum(gas_usd) ${executed}, 0)::text END AS gas_usd
       FROM trades WHERE ${where.join(" AND ")}
       GROUP BY 1, 2 ORDER BY kind COLLATE "C", lower(request->>'usdAddress') COLLATE "C"`,
      values,
    );
    return rows.map((row) => ({
      kind: row.kind,
      stable: row.stable ?? "",
      count: row.count,
      executed: row.executed,
      amountIn: BigInt(row.amount_in),
      amountOut: BigInt(row.amount_out),
      gasWei: BigInt(row.gas_wei),
      gasUsd: row.gas_usd === null ? null : BigInt(row.gas_usd),
    }));
  }

  async #mined(id: string, status: "mined" | "confirmed", receipt: TransactionReceipt): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `WITH t AS (
         UPDATE trades SET status = $2, receipt = $3, tx_hash = $4, amount_in = $7, amount_out = $8, gas_wei = $9,
         gas_usd = $9 * native_usd, error = NULL, updated_at = clock_timestamp() WHERE id = $1 RETURNING id
       ), s AS (
         UPDATE nonce_slots s SET state = 'mined', mined_hash = lower($4), block_number = $5, block_hash = $6, updated_at = clock_timestamp()
         FROM t WHERE s.trade_id = t.id AND s.state <> 'final'
       )
       SELECT 1 FROM t`,
      [
        id,
        status,
        JSON.stringify(receipt),
        receipt.transactionHash,
        receipt.blockNumber,
        receipt.blockHash,
        ...amountColumns(receipt),
      ],
    );
    if (rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
  }

  async #expectTrade(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query("SELECT 1 FROM trades WHERE id = $1", [id]);
    if (rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
  }

  async #updateOne(id: string, set: string, values: unknown[]): Promise<void> {
    const updated = await this.#pool.query(`UPDATE trades SET ${set}, updated_at = clock_timestamp() WHERE id = $1`, [
      id,
      ...values,
    ]);
    if (updated.rowCount !== 1) throw new Error(`trade ${id} is not in the journal`);
  }
}
