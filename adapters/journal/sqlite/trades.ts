/** The SQLite journal's trades (TradeJournal, but `close`, which is the journal's). */
import { randomUUID } from "node:crypto";
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";

import type {
  AuditEntry,
  AuditNote,
  LimitCheck,
  LimitPer,
  LimitUse,
  SpendingLeader,
  NewTrade,
  Spending,
  SignedTradeTx,
  TradeJournal,
  TradePage,
  TradePageQuery,
  TradeCancel,
  TradeRecord,
  TradeSummaryQuery,
  TradeTotals,
  TransactionReceipt,
} from "../../../core/index.js";
import { forgottenEntry, gasUsdOf, INITIAL_STATUS, type TradeOperation } from "../../../core/index.js";
import { applies, cancelAsked, decide, statusAfter } from "../transitions.js";
import { addToGroups, historyWhere, pageWhere, sortedGroups } from "./history.js";
import { amountColumns, type Row, toBroadcast, toRecord, tradeState } from "./rows.js";
import { SqliteSpending } from "./spending.js";
import { encodeReserves } from "../reservations.js";
import type { SqliteStore } from "./store.js";
import type { SqliteAudit } from "./audit.js";
import { SqliteCancels } from "./cancels.js";

/**
 * The summary reads its rows in batches of this many, in the history's order (its index), and
 * lets every other request have the thread between them: a summary of a million trades takes
 * seconds of reading, never seconds of a frozen service. Not a snapshot: a trade that changes
 * during the reading is counted as its batch read it.
 */
const SUMMARY_BATCH = 5_000;

/**
 * Prepared once: the statements of the trades (and of their nonce slots, which they write with
 * them). Each change of a trade's status is made only where the trade model says its operation
 * applies (`applies`, ../transitions.ts).
 */
function statements(db: DatabaseSync) {
  return {
    insert: db.prepare(
      `INSERT INTO trades (id, scope, key_name, idempotency_key, request_hash, kind, request, status, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, '${INITIAL_STATUS}', ?, ?)
       ON CONFLICT (scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING *`,
    ),
    byKey: db.prepare("SELECT * FROM trades WHERE scope = ? AND idempotency_key = ?"),
    byId: db.prepare("SELECT * FROM trades WHERE id = ?"),
    byTxHash: db.prepare("SELECT * FROM trades WHERE tx_hash = ?"),
    tradeOfBroadcast: db.prepare(
      "SELECT s.trade_id FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce WHERE b.hash = ?",
    ),
    // Checked before (markSigned reads the trade first): no condition here.
    signed: db.prepare(
      // raw_tx stays NULL: the signed bytes are the broadcast's (the column holds version 1's).
      `UPDATE trades SET status = ${statusAfter("markSigned")}, wallet = ?, nonce = ?, tx_hash = ?, raw_tx = NULL, deadline = ?,
       native_usd = ?, updated_at = ? WHERE id = ?`,
    ),
    submitted: db.prepare(
      `UPDATE trades SET status = ${statusAfter("markSubmitted")}, updated_at = ? WHERE id = ? AND ${applies("markSubmitted")}`,
    ),
    reorged: db.prepare(
      `UPDATE trades SET status = ${statusAfter("markReorged")}, receipt = NULL, amount_in = NULL, amount_out = NULL,
       gas_wei = NULL, gas_usd = NULL, updated_at = ? WHERE id = ? AND ${applies("markReorged")}`,
    ),
    // error cleared: a trade recorded failed for a taken nonce and then found mined is corrected.
    mined: minedStatement(db, "markMined"),
    confirmed: minedStatement(db, "markConfirmed"),
    nativeUsd: db.prepare("SELECT native_usd FROM trades WHERE id = ?"),
    failed: endedStatement(db, "markFailed"),
    expired: endedStatement(db, "markExpired"),
    status: db.prepare("SELECT status, tx_hash FROM trades WHERE id = ?"),
    discard: db.prepare(`DELETE FROM trades WHERE id = ? AND ${applies("discard")}`),
    forgetUnsigned: db.prepare(`DELETE FROM trades WHERE ${applies("forgetUnsigned")} AND updated_at < ? RETURNING id`),
    // A trade's slot is found through the trade's (wallet, nonce): the slots' primary key.
    tradeNonce: db.prepare("SELECT lower(wallet) AS wallet, nonce, status, tx_hash, cancel FROM trades WHERE id = ?"),
    dropSlotBroadcasts: db.prepare(
      "DELETE FROM broadcasts WHERE wallet = ? AND nonce = ? AND EXISTS (SELECT 1 FROM nonce_slots WHERE wallet = ? AND nonce = ? AND trade_id = ?)",
    ),
    dropTradeSlot: db.prepare("DELETE FROM nonce_slots WHERE wallet = ? AND nonce = ? AND trade_id = ?"),
    tradeBroadcastsOf: db.prepare(
      `SELECT b.* FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
       WHERE s.wallet = ? AND s.nonce = ? AND s.trade_id = ? ORDER BY b.sent_at, b.rowid`,
    ),
    markTradeSlot: db.prepare(
      "UPDATE nonce_slots SET state = ?, mined_hash = ?, block_number = ?, block_hash = ?, updated_at = ? WHERE wallet = ? AND nonce = ? AND trade_id = ? AND state <> 'final'",
    ),
  };
}

/** A receipt recorded: the trade mined or confirmed, its amounts and gas with it. */
function minedStatement(db: DatabaseSync, operation: "markMined" | "markConfirmed") {
  return db.prepare(
    `UPDATE trades SET status = ${statusAfter(operation)}, receipt = ?, tx_hash = ?, amount_in = ?, amount_out = ?,
     gas_wei = ?, gas_usd = ?, error = NULL, updated_at = ? WHERE id = ? AND ${applies(operation)}`,
  );
}

/** The trade's end recorded, with the error saying why. */
function endedStatement(db: DatabaseSync, operation: "markFailed" | "markExpired") {
  return db.prepare(
    `UPDATE trades SET status = ${statusAfter(operation)}, error = ?, updated_at = ? WHERE id = ? AND ${applies(operation)}`,
  );
}

export class SqliteTrades implements TradeJournal {
  readonly #store: SqliteStore;
  readonly #sql: ReturnType<typeof statements> & SqliteStore["sql"];
  readonly #dynamic = new Map<string, StatementSync>();
  /** When this process opened the file: every trade accepted before is a previous run's. */
  readonly #openedAt = Date.now();

  readonly #spending: SqliteSpending;
  readonly #audit: SqliteAudit;
  readonly #cancels: SqliteCancels;

  constructor(store: SqliteStore, audit: SqliteAudit) {
    this.#store = store;
    this.#audit = audit;
    this.#sql = { ...store.sql, ...statements(store.db) };
    this.#spending = new SqliteSpending(store.db);
    this.#cancels = new SqliteCancels(store, audit);
  }

  /**
   * The file is this process's alone (see index.ts): a trade left accepted before it opened
   * the file was a previous run's; one left accepted since, for longer than `staleAfterMs`, is
   * its own leftover. Both are found through the index of accepted trades (migration 3).
   */
  forgetUnsigned(staleAfterMs?: number): Promise<number> {
    const before = staleAfterMs === undefined ? this.#openedAt : Math.max(this.#openedAt, Date.now() - staleAfterMs);
    return this.#store.write(() => {
      const forgotten = this.#sql.forgetUnsigned.all(before);
      for (const { id } of forgotten) this.#audit.appendIn(forgottenEntry(id as string));
      return forgotten.length;
    }, true);
  }

  open(trade: NewTrade, spending?: Spending, audit?: AuditNote): Promise<{ created: boolean; record: TradeRecord }> {
    // Synchronous statements on one connection: nothing runs between the check, the insert and the select.
    return this.#store.write(() => {
      const now = Date.now();
      const id = randomUUID();
      if (spending !== undefined) {
        const existing =
          trade.idempotencyKey === null ? undefined : this.#sql.byKey.get(trade.scope, trade.idempotencyKey);
        if (existing !== undefined) return { created: false, record: this.#record(existing) };
        this.#spending.admit(id, spending.spend, spending.checks, now);
      }
      const inserted = this.#sql.insert.get(
        id,
        trade.scope,
        trade.keyName ?? null,
        trade.idempotencyKey,
        trade.requestHash,
        trade.kind,
        JSON.stringify(trade.request),
        now,
        now,
      );
      if (inserted) {
        if (audit !== undefined) this.#audit.appendIn({ ...audit, subject: id });
        return { created: true, record: toRecord(inserted, []) };
      }
      return { created: false, record: this.#record(this.#sql.byKey.get(trade.scope, trade.idempotencyKey)!) };
    }, audit !== undefined);
  }

  respend(id: string, usd: bigint, checks: readonly LimitCheck[]): Promise<void> {
    return this.#store.write(() => this.#spending.admit(id, { usd }, checks, Date.now()));
  }

  /** The counters as stored: USD is decimal text, so longer is larger (no leading zeros, never negative). */
  spendingLeaders(per: LimitPer, windowMs: number, by: "usd" | "trades", count: number): Promise<SpendingLeader[]> {
    const order = by === "usd" ? "length(usd) DESC, usd DESC" : "trades DESC";
    const rows = this.#store.db
      .prepare(
        `SELECT value, usd, trades FROM spend_counters WHERE per = ? AND window_ms = ? ORDER BY ${order} LIMIT ?`,
      )
      .all(per, windowMs, count);
    return Promise.resolve(
      rows.map((row) => ({ value: String(row.value), usd: BigInt(String(row.usd)), trades: Number(row.trades) })),
    );
  }

  /** A write: reading a counter brings it up to date (exact either way). */
  spendingUse(checks: readonly LimitCheck[]): Promise<LimitUse[]> {
    return this.#store.write(() => {
      const now = Date.now();
      return checks.map((check) => this.#spending.use(check, now));
    });
  }

  markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    return this.#store.write(() => {
      const now = Date.now();
      const wallet = tx.wallet.toLowerCase();
      // Every check first, so that a refused write leaves nothing behind in the group's transaction.
      const before = this.#sql.tradeNonce.get(id);
      if (before === undefined) throw new Error(`trade ${id} is not in the journal`);
      if (!decide("markSigned", id, tradeState(before))) return;
      if (before.cancel !== null) throw cancelAsked(id);
      const holder = this.#sql.slot.get(wallet, tx.nonce);
      if (holder && holder.trade_id !== id) throw new Error(`nonce ${tx.nonce} of ${wallet} already has a slot`);
      this.#sql.signed.run(tx.wallet, tx.nonce, tx.txHash, tx.deadline, tx.nativeUsd?.toString() ?? null, now, id);
      // Signed again (the node refused the first nonce, so nothing of it was broadcast): the old slot goes.
      if (before.wallet !== null) this.#dropSlot(before.wallet as string, Number(before.nonce), id);
      if (holder) this.#dropSlot(wallet, tx.nonce, id);
      this.#sql.insertSlot.run(
        wallet,
        tx.nonce,
        "trade",
        id,
        tx.deadline,
        now,
        now,
        encodeReserves(tx.reserves, tx.txHash),
      );
      this.#sql.insertBroadcast.run(
        tx.txHash.toLowerCase(),
        wallet,
        tx.nonce,
        tx.rawTx,
        tx.maxFeePerGas.toString(),
        tx.maxPriorityFeePerGas.toString(),
        0,
        now,
      );
    });
  }

  markSubmitted(id: string): Promise<void> {
    return this.#store.write(() => {
      if (Number(this.#sql.submitted.run(Date.now(), id).changes) === 0) this.#missed("markSubmitted", id);
    });
  }

  markReorged(id: string): Promise<void> {
    return this.#store.write(() => {
      const now = Date.now();
      if (Number(this.#sql.reorged.run(now, id).changes) === 0) return this.#missed("markReorged", id);
      const at = this.#sql.tradeNonce.get(id)!;
      this.#sql.markTradeSlot.run("pending", null, null, null, now, at.wallet!, at.nonce!, id);
    });
  }

  markMined(id: string, receipt: TransactionReceipt): Promise<void> {
    return this.#mined(id, "markMined", receipt);
  }

  markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    return this.#mined(id, "markConfirmed", receipt);
  }

  markFailed(id: string, error: { code: string; message: string }, audit?: AuditEntry): Promise<void> {
    return this.#ended(id, "markFailed", error, audit);
  }

  markExpired(id: string, error: { code: string; message: string }): Promise<void> {
    return this.#ended(id, "markExpired", error);
  }

  requestCancel(id: string, cancel: TradeCancel, audit?: AuditEntry): Promise<TradeRecord | undefined> {
    return this.#cancels.request(id, cancel, (trade) => this.get(trade), audit);
  }

  markCancelled(...cancelled: Parameters<TradeJournal["markCancelled"]>): Promise<boolean> {
    return this.#cancels.cancelled(...cancelled);
  }

  discard(id: string, audit?: AuditEntry): Promise<void> {
    return this.#store.write(() => {
      if (Number(this.#sql.discard.run(id).changes) > 0) {
        if (audit !== undefined) this.#audit.appendIn(audit);
        return;
      }
      const row = this.#sql.status.get(id);
      if (row) decide("discard", id, tradeState(row)); // an unknown trade: nothing to forget
    }, audit !== undefined);
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const row = this.#sql.byId.get(id);
    return row ? this.#record(row) : undefined;
  }

  async findByHash(txHash: string): Promise<TradeRecord | undefined> {
    const hash = txHash.toLowerCase();
    const owner = this.#sql.tradeOfBroadcast.get(hash)?.trade_id;
    if (typeof owner === "string") return this.get(owner);
    const row = this.#sql.byTxHash.get(hash);
    return row ? this.#record(row) : undefined;
  }

  /** Reads the rows in the order of one of the history indexes (migration 4), from the cursor on. */
  async page(query: TradePageQuery): Promise<TradePage> {
    const values: SQLInputValue[] = [];
    const where = pageWhere(query, values);
    const sql = `SELECT * FROM trades WHERE ${where.join(" AND ")} ORDER BY created_at DESC, id DESC LIMIT ?`;
    const rows = this.#prepared(sql).all(...values, query.limit + 1);
    const trades = rows.slice(0, query.limit);
    const last = trades.at(-1);
    return {
      trades: trades.map((row) => this.#record(row)),
      next:
        rows.length > query.limit && last !== undefined
          ? { createdAtUs: BigInt(last.created_at as number) * 1000n, id: last.id as string }
          : null,
    };
  }

  /** Summed in JS with BigInt: SQLite's sum() is not exact beyond 2^63. */
  async summary(query: TradeSummaryQuery): Promise<TradeTotals[]> {
    const values: SQLInputValue[] = [];
    const where = historyWhere(query, values);
    const columns = `id, created_at, kind, lower(json_extract(request, '$.usdAddress')) AS stable, status,
       status IN ('mined', 'confirmed') AS executed, amount_in, amount_out, gas_wei, gas_usd`;
    const order = `ORDER BY created_at DESC, id DESC LIMIT ${SUMMARY_BATCH}`;
    const first = this.#prepared(`SELECT ${columns} FROM trades WHERE ${where.join(" AND ")} ${order}`);
    const next = this.#prepared(
      `SELECT ${columns} FROM trades WHERE ${where.join(" AND ")} AND created_at <= ? AND (created_at < ? OR id < ?) ${order}`,
    );
    const groups = new Map<string, TradeTotals>();
    let rows = first.all(...values);
    for (;;) {
      addToGroups(groups, rows);
      const last = rows.at(-1);
      if (rows.length < SUMMARY_BATCH || last === undefined) break;
      // node:sqlite is synchronous: between batches, every other request gets the thread.
      await new Promise((resolve) => setImmediate(resolve));
      const at = last.created_at as number;
      rows = next.all(...values, at, at, last.id as string);
    }
    return sortedGroups(groups);
  }

  /** A statement built from the query's filters, prepared once per shape. */
  #prepared(sql: string): StatementSync {
    let statement = this.#dynamic.get(sql);
    if (statement === undefined) {
      statement = this.#store.db.prepare(sql);
      this.#dynamic.set(sql, statement);
    }
    return statement;
  }

  #mined(id: string, operation: "markMined" | "markConfirmed", receipt: TransactionReceipt): Promise<void> {
    const json = JSON.stringify(receipt);
    const statement = operation === "markMined" ? this.#sql.mined : this.#sql.confirmed;
    return this.#store.write(() => {
      const now = Date.now();
      // The trade first: if it is unknown or refused, this throws before the second statement writes anything.
      const amounts = amountColumns(receipt);
      // SQLite's arithmetic is not exact at this size: the gas in USD is computed here.
      const price = this.#sql.nativeUsd.get(id)?.native_usd;
      const gasUsd =
        typeof price === "string" && amounts[2] !== null
          ? gasUsdOf(BigInt(amounts[2]), BigInt(price)).toString()
          : null;
      const changes = statement.run(json, receipt.transactionHash, ...amounts, gasUsd, now, id).changes;
      if (Number(changes) === 0) return this.#missed(operation, id);
      this.#spending.paid(id, amounts[1]);
      const at = this.#sql.tradeNonce.get(id)!;
      if (at.wallet !== null)
        this.#sql.markTradeSlot.run(
          "mined",
          receipt.transactionHash.toLowerCase(),
          receipt.blockNumber,
          receipt.blockHash,
          now,
          at.wallet!,
          at.nonce!,
          id,
        );
    });
  }

  #ended(
    id: string,
    operation: "markFailed" | "markExpired",
    error: { code: string; message: string },
    audit?: AuditEntry,
  ): Promise<void> {
    const json = JSON.stringify({ code: error.code, message: error.message });
    const statement = operation === "markFailed" ? this.#sql.failed : this.#sql.expired;
    return this.#store.write(() => {
      if (Number(statement.run(json, Date.now(), id).changes) === 0) this.#missed(operation, id);
      else if (audit !== undefined) this.#audit.appendIn(audit);
    }, audit !== undefined);
  }

  /** After `operation`'s statement changed nothing: refused or unknown throws, ignored returns (../transitions.ts). */
  #missed(operation: TradeOperation, id: string): void {
    const row = this.#sql.status.get(id);
    decide(operation, id, row && tradeState(row));
  }

  /** Deletes the trade's slot at (wallet, nonce), with its broadcasts. */
  #dropSlot(wallet: string, nonce: number, id: string): void {
    this.#sql.dropSlotBroadcasts.run(wallet, nonce, wallet, nonce, id);
    this.#sql.dropTradeSlot.run(wallet, nonce, id);
  }

  #record(row: Row): TradeRecord {
    const broadcasts =
      row.wallet === null
        ? []
        : this.#sql.tradeBroadcastsOf
            .all((row.wallet as string).toLowerCase(), row.nonce!, row.id as string)
            .map(toBroadcast);
    return toRecord(row, broadcasts);
  }
}
