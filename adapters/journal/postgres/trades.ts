/** The PostgreSQL journal's trades (TradeJournal, but `close`, which is the journal's). */
import { randomUUID } from "node:crypto";

import type pg from "pg";

import {
  type AuditEntry,
  type AuditNote,
  type Broadcast,
  forgottenEntry,
  INITIAL_STATUS,
  TRADE_STATUSES,
  type NewTrade,
  type SignedTradeTx,
  type LimitCheck,
  type LimitPer,
  type LimitUse,
  type SpendingLeader,
  type Spending,
  type TradeJournal,
  type TradeOperation,
  type TradePage,
  type TradePageQuery,
  type TradeCancel,
  type TradeRecord,
  type TradeStatus,
  type TradeSummaryQuery,
  type TradeTotals,
  type TransactionReceipt,
} from "../../../core/index.js";
import {
  amountColumns,
  BROADCAST_COLUMNS,
  type BroadcastRow,
  COLUMNS,
  dropSlotsOf,
  insertBroadcast,
  type Row,
  toBroadcast,
  toRecord,
  visibleWhere,
} from "./rows.js";
import { appendAudit, auditAppendCall } from "./audit.js";
import { cancelAsked, markCancelled, requestCancel } from "./cancels.js";
import { admitSpend, insertCounted, spendingUse } from "./spending.js";
import { transaction } from "./store.js";
import { encodeReserves } from "../reservations.js";
import { applies, decide, statusAfter } from "../transitions.js";

/** A trade's status and transaction, as the trade model reads them (../transitions.ts). */
interface StateRow {
  status: TradeStatus;
  tx_hash: string | null;
}

const stateOf = (row: StateRow | undefined) => row && { status: row.status, txHash: row.tx_hash };

/** Inserts a trade, or nothing when its (scope, idempotency key) is taken. */
const INSERT_TRADE = `INSERT INTO trades (id, scope, key_name, idempotency_key, request_hash, kind, request, status, owner)
  VALUES ($1, $2, $3, $4, $5, $6, $7, '${INITIAL_STATUS}', $8)
  ON CONFLICT (scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING ${COLUMNS}`;

/**
 * Each change of a trade's status is made only where the trade model says its operation applies
 * (`applies`, ../transitions.ts), in the statement that makes it.
 */
export class PostgresTrades implements TradeJournal {
  readonly #pool: pg.Pool;
  /** This instance's name: the owner of the trades it accepts (PostgresJournalOptions.instanceId). */
  readonly #instance: string;

  constructor(pool: pg.Pool, instance: string) {
    this.#pool = pool;
    this.#instance = instance;
  }

  async forgetUnsigned(staleAfterMs?: number): Promise<number> {
    // Another instance's, once its lease ran out; this one's own, once unchanged for staleAfterMs
    // (by the database's clock, as the leases; none of its own without a bound). Each recorded in
    // the audit log in the same transaction.
    const forgettable = `${applies("forgetUnsigned", "t")}
      AND (t.owner IS NULL OR (t.owner <> $1 AND NOT EXISTS (
        SELECT 1 FROM leases l WHERE l.name = 'instance:' || t.owner AND l.expires_at > clock_timestamp()))
        OR (t.owner = $1 AND t.updated_at < clock_timestamp() - make_interval(secs => $2::float8 / 1000)))`;
    return transaction(this.#pool, async (client) => {
      // Their spends' scope locks first, all in one order (spend-locks.ts): the delete's trigger
      // would take them trade by trade.
      const { rows: found } = await client.query<{ id: string }>(`SELECT t.id FROM trades t WHERE ${forgettable}`, [
        this.#instance,
        staleAfterMs ?? null,
      ]);
      if (found.length === 0) return 0;
      const ids = found.map((row) => row.id);
      await client.query("SELECT spend_lock_trades($1)", [ids]);
      const { rows } = await client.query<{ id: string }>(
        `DELETE FROM trades t WHERE t.id = ANY($3) AND ${forgettable} RETURNING t.id`,
        [this.#instance, staleAfterMs ?? null, ids],
      );
      for (const { id } of rows) await appendAudit(client, forgottenEntry(id));
      return rows.length;
    });
  }

  async open(
    trade: NewTrade,
    spending?: Spending,
    audit?: AuditNote,
  ): Promise<{ created: boolean; record: TradeRecord }> {
    const id = randomUUID();
    // Retried only if the existing record is discarded between the two statements.
    for (let attempt = 0; attempt < 5; attempt++) {
      // Of concurrent inserts with one key, PostgreSQL lets exactly one through; the others wait
      // for it to commit, then do nothing, and read its row. With spending limits, the insert and
      // the limits' check are one statement (insertCounted): a refusal takes the insert back. With
      // `audit`, its record is appended in the same statement, last (a trade found writes none).
      const parameters = this.#insertParameters(id, trade);
      const entry = audit === undefined ? undefined : { ...audit, subject: id };
      const created =
        spending !== undefined
          ? await insertCounted<Row>(this.#pool, INSERT_TRADE, parameters, spending, entry)
          : entry === undefined
            ? (await this.#pool.query<Row>(INSERT_TRADE, parameters)).rows[0]
            : await this.#insertAudited(parameters, entry);
      if (created) return { created: true, record: toRecord(created, []) };
      const existing = await this.#pool.query<Row>(
        `SELECT ${COLUMNS} FROM trades WHERE scope = $1 AND idempotency_key = $2`,
        [trade.scope, trade.idempotencyKey],
      );
      const record = existing.rows[0] && (await this.get(existing.rows[0].id));
      if (record) return { created: false, record };
    }
    throw new Error("trade journal: the record for this idempotency key keeps being discarded; try again");
  }

  async respend(id: string, usd: bigint, checks: readonly LimitCheck[]): Promise<void> {
    await transaction(this.#pool, (client) => admitSpend(client, id, { usd }, checks));
  }

  spendingUse(checks: readonly LimitCheck[]): Promise<LimitUse[]> {
    return spendingUse(this.#pool, checks);
  }

  async spendingLeaders(
    per: LimitPer,
    windowMs: number,
    by: "usd" | "trades",
    count: number,
  ): Promise<SpendingLeader[]> {
    const { rows } = await this.#pool.query<{ value: string; usd: string; trades: string }>(
      // Ordered by the counters' own columns: the text aliases of the select list would order as text.
      `SELECT c.value, c.usd::text AS usd, c.trades::text AS trades FROM spend_counters c
       WHERE c.per = $1 AND c.window_ms = $2 ORDER BY ${by === "usd" ? "c.usd" : "c.trades"} DESC LIMIT $3`,
      [per, windowMs, count],
    );
    return rows.map((row) => ({ value: row.value, usd: BigInt(row.usd), trades: Number(row.trades) }));
  }

  /** INSERT_TRADE and the trade's audit record, in one statement. */
  async #insertAudited(parameters: unknown[], entry: AuditEntry): Promise<Row | undefined> {
    const append = auditAppendCall(entry, parameters.length + 1);
    const { rows } = await this.#pool.query<Row>({
      name: "trade-open-audited",
      text: `WITH t AS (${INSERT_TRADE}) SELECT t.*, ${append.sql} AS audit FROM t`,
      values: [...parameters, ...append.values],
    });
    return rows[0];
  }

  /** INSERT_TRADE's parameters for the trade `id`. */
  #insertParameters(id: string, trade: NewTrade): unknown[] {
    return [
      id,
      trade.scope,
      trade.keyName ?? null,
      trade.idempotencyKey,
      trade.requestHash,
      trade.kind,
      JSON.stringify(trade.request),
      this.#instance,
    ];
  }

  async markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    const wallet = tx.wallet.toLowerCase();
    await transaction(this.#pool, async (client) => {
      const { rows } = await client.query<StateRow & { cancelling: boolean }>(
        "SELECT status, tx_hash, cancel IS NOT NULL AS cancelling FROM trades WHERE id = $1 FOR UPDATE",
        [id],
      );
      if (!decide("markSigned", id, stateOf(rows[0]))) return;
      if (rows[0]!.cancelling) throw cancelAsked(id);
      // Signed again: what is left of its old slot goes (its first was released: nothing of it can be mined).
      await dropSlotsOf(client, id);
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
        `UPDATE trades SET status = ${statusAfter("markSigned")}, wallet = $2, nonce = $3, tx_hash = $4, raw_tx = $5, deadline = $6,
         native_usd = $7, updated_at = clock_timestamp() WHERE id = $1`,
        [id, tx.wallet, tx.nonce, tx.txHash, tx.rawTx, tx.deadline, tx.nativeUsd?.toString() ?? null],
      );
    });
  }

  async markSubmitted(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `UPDATE trades SET status = ${statusAfter("markSubmitted")}, updated_at = clock_timestamp()
       WHERE id = $1 AND ${applies("markSubmitted")}`,
      [id],
    );
    if (rowCount === 0) await this.#missed("markSubmitted", id);
  }

  async markReorged(id: string): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `WITH t AS (
         UPDATE trades SET status = ${statusAfter("markReorged")}, receipt = NULL, amount_in = NULL, amount_out = NULL,
         gas_wei = NULL, gas_usd = NULL, updated_at = clock_timestamp() WHERE id = $1 AND ${applies("markReorged")} RETURNING id
       ), s AS (
         UPDATE nonce_slots s SET state = 'pending', mined_hash = NULL, block_number = NULL, block_hash = NULL,
         updated_at = clock_timestamp() FROM t WHERE s.trade_id = t.id AND s.state <> 'final'
       )
       SELECT 1 FROM t`,
      [id],
    );
    if (rowCount === 0) await this.#missed("markReorged", id);
  }

  async markMined(id: string, receipt: TransactionReceipt): Promise<void> {
    await this.#mined(id, "markMined", receipt);
  }

  async markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    await this.#mined(id, "markConfirmed", receipt);
  }

  async markFailed(id: string, error: { code: string; message: string }, audit?: AuditEntry): Promise<void> {
    await this.#ended(id, "markFailed", error, audit);
  }

  async markExpired(id: string, error: { code: string; message: string }): Promise<void> {
    await this.#ended(id, "markExpired", error);
  }

  requestCancel(id: string, cancel: TradeCancel, audit?: AuditEntry): Promise<TradeRecord | undefined> {
    return requestCancel(this.#pool, id, cancel, (trade) => this.get(trade), audit);
  }

  markCancelled(...cancelled: Parameters<TradeJournal["markCancelled"]>): Promise<boolean> {
    return markCancelled(this.#pool, ...cancelled);
  }

  async discard(id: string, audit?: AuditEntry): Promise<void> {
    const remove = `DELETE FROM trades WHERE id = $1 AND ${applies("discard")}`;
    const deleted =
      audit === undefined
        ? await this.#pool.query(remove, [id])
        : await transaction(this.#pool, async (client) => {
            const result = await client.query(remove, [id]);
            if (result.rowCount !== 0) await appendAudit(client, audit);
            return result;
          });
    if (deleted.rowCount !== 0) return;
    const trade = stateOf(
      (await this.#pool.query<StateRow>("SELECT status, tx_hash FROM trades WHERE id = $1", [id])).rows[0],
    );
    if (trade !== undefined) decide("discard", id, trade); // an unknown trade: nothing to forget
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
    const values: unknown[] = [];
    const param = (value: unknown) => `$${values.push(value)}`;
    const where = [visibleWhere(query.visible, param)];
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
    const values: unknown[] = [];
    const where = [visibleWhere(query.visible, (value) => `$${values.push(value)}`)];
    if (query.since !== undefined) where.push(`created_at >= $${values.push(query.since)}`);
    if (query.until !== undefined) where.push(`created_at < $${values.push(query.until)}`);
    const executed = "FILTER (WHERE status IN ('mined', 'confirmed'))";
    const { rows } = await this.#pool.query<
      {
        kind: TradeTotals["kind"];
        stable: string;
        count: number;
        executed: number;
        amount_in: string;
        amount_out: string;
        gas_wei: string;
        gas_usd: string | null;
      } & Record<string, number>
    >(
      // One executed trade without its gas in USD makes the group's unknown (TradeTotals.gasUsd).
      `SELECT kind, lower(request->>'usdAddress') AS stable, count(*)::int AS count, count(*) ${executed}::int AS executed,
         coalesce(sum(amount_in) ${executed}, 0)::text AS amount_in,
         coalesce(sum(amount_out) ${executed}, 0)::text AS amount_out,
         coalesce(sum(gas_wei) ${executed}, 0)::text AS gas_wei,
         CASE WHEN count(*) FILTER (WHERE status IN ('mined', 'confirmed') AND gas_usd IS NULL) > 0 THEN NULL
           ELSE coalesce(sum(gas_usd) ${executed}, 0)::text END AS gas_usd,
         ${TRADE_STATUSES.map((status) => `count(*) FILTER (WHERE status = '${status}')::int AS "s:${status}"`).join(", ")}
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
      statuses: Object.fromEntries(
        TRADE_STATUSES.filter((status) => row[`s:${status}`]! > 0).map((status) => [status, row[`s:${status}`]!]),
      ),
    }));
  }

  async #mined(id: string, operation: "markMined" | "markConfirmed", receipt: TransactionReceipt): Promise<void> {
    // With the outcome, a sell's spend becomes what it paid, $7 (spend_paid, spend-paid.ts).
    const { rowCount } = await this.#pool.query(
      `WITH t AS (
         UPDATE trades SET status = ${statusAfter(operation)}, receipt = $2, tx_hash = $3, amount_in = $6, amount_out = $7,
         gas_wei = $8, gas_usd = $8 * native_usd, error = NULL, updated_at = clock_timestamp()
         WHERE id = $1 AND ${applies(operation)} RETURNING id
       ), s AS (
         UPDATE nonce_slots s SET state = 'mined', mined_hash = lower($3), block_number = $4, block_hash = $5, updated_at = clock_timestamp()
         FROM t WHERE s.trade_id = t.id AND s.state <> 'final'
       )
       SELECT 1 FROM t CROSS JOIN LATERAL spend_paid(t.id, $7)`,
      [
        id,
        JSON.stringify(receipt),
        receipt.transactionHash,
        receipt.blockNumber,
        receipt.blockHash,
        ...amountColumns(receipt),
      ],
    );
    if (rowCount !== 1) await this.#missed(operation, id);
  }

  /** With `audit`, its record appended in the same transaction, last, when the trade changed. */
  async #ended(
    id: string,
    operation: "markFailed" | "markExpired",
    error: { code: string; message: string },
    audit?: AuditEntry,
  ) {
    const update = `UPDATE trades SET status = ${statusAfter(operation)}, error = $2, updated_at = clock_timestamp()
       WHERE id = $1 AND ${applies(operation)}`;
    const values = [id, JSON.stringify({ code: error.code, message: error.message })];
    const rowCount =
      audit === undefined
        ? (await this.#pool.query(update, values)).rowCount
        : await transaction(this.#pool, async (client) => {
            const changed = (await client.query(update, values)).rowCount;
            if (changed !== 0) await appendAudit(client, audit);
            return changed;
          });
    if (rowCount === 0) await this.#missed(operation, id);
  }

  /** After `operation`'s statement changed nothing: refused or unknown throws, ignored returns (../transitions.ts). */
  async #missed(operation: TradeOperation, id: string): Promise<void> {
    const { rows } = await this.#pool.query<StateRow>("SELECT status, tx_hash FROM trades WHERE id = $1", [id]);
    decide(operation, id, stateOf(rows[0]));
  }
}
