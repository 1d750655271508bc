/** The memory journal's trades (TradeJournal, but `close`, which is the journal's). */
import { randomUUID } from "node:crypto";

import type {
  AuditEntry,
  AuditNote,
  Broadcast,
  LimitCheck,
  LimitPer,
  LimitUse,
  NewTrade,
  SpendingLeader,
  Spending,
  SignedTradeTx,
  TradeJournal,
  TradePage,
  TradePageQuery,
  TradePosition,
  TradeCancel,
  TradeRecord,
  TradeSummaryQuery,
  TradeTotals,
  TransactionReceipt,
} from "../../../core/index.js";
import {
  forgottenEntry,
  gasUsdOf,
  sees,
  TRADE_TRANSITIONS,
  type TradeOperation,
  TradeTransitionError,
  tradeAmounts,
  tradeVerdict,
} from "../../../core/index.js";
import { cancelAsked } from "../transitions.js";
import { MemorySpending } from "./spending.js";
import { copyReserves, type MemoryStore, type StoredTrade, slotKey, UNSIGNED } from "./store.js";

/**
 * What each operation does to a trade is the trade model's (core/trade-states.ts): `#applies` asks
 * it, and each operation writes only when it applies.
 */
export class MemoryTrades implements TradeJournal {
  readonly #store: MemoryStore;
  /** The native coin's USD price each trade was signed at (SignedTradeTx.nativeUsd), by trade id. */
  readonly #nativeUsd = new Map<string, bigint>();
  readonly #spending: MemorySpending;

  constructor(store: MemoryStore) {
    this.#store = store;
    this.#spending = new MemorySpending(store);
  }

  async open(
    trade: NewTrade,
    spending?: Spending,
    audit?: AuditNote,
  ): Promise<{ created: boolean; record: TradeRecord }> {
    const store = this.#store;
    if (trade.idempotencyKey !== null) {
      for (const stored of store.trades.values()) {
        if (stored.scope === trade.scope && stored.idempotencyKey === trade.idempotencyKey)
          return { created: false, record: store.record(stored) };
      }
    }
    const now = new Date();
    if (spending !== undefined) {
      const refusal = this.#spending.refusal(spending, now.getTime());
      if (refusal !== undefined) throw refusal;
    }
    const { keyName, ...rest } = trade;
    const stored: StoredTrade = {
      ...rest,
      keyName: keyName ?? null,
      id: randomUUID(),
      ...UNSIGNED,
      receipt: null,
      error: null,
      createdAt: now,
      updatedAt: now,
    };
    // The record first: it is the only step that can throw, so a trade never exists without it.
    if (audit !== undefined) store.audit.appendNow({ ...audit, subject: stored.id });
    store.trades.set(stored.id, stored);
    if (spending !== undefined) this.#spending.record(stored.id, spending.spend, now.getTime());
    return { created: true, record: store.record(stored) };
  }

  async respend(id: string, usd: bigint, checks: readonly LimitCheck[]): Promise<void> {
    this.#spending.respend(id, usd, checks);
  }

  async spendingUse(checks: readonly LimitCheck[]): Promise<LimitUse[]> {
    const now = Date.now();
    return checks.map((check) => this.#spending.use(check, now));
  }

  async spendingLeaders(
    per: LimitPer,
    windowMs: number,
    by: "usd" | "trades",
    count: number,
  ): Promise<SpendingLeader[]> {
    return this.#spending.leaders(per, windowMs, by, count, Date.now());
  }

  async markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    const store = this.#store;
    const stored = store.trade(id);
    if (!this.#applies("markSigned", stored)) return;
    if (stored.cancel != null) throw cancelAsked(id);
    const wallet = tx.wallet.toLowerCase();
    const key = slotKey(wallet, tx.nonce);
    const existing = store.slots.get(key);
    if (existing && existing.tradeId !== id) throw new Error(`nonce ${tx.nonce} of ${wallet} already has a slot`);
    // Signed again at another nonce: the first was refused, so its slot goes.
    if (stored.wallet !== null && stored.nonce !== null && slotKey(stored.wallet, stored.nonce) !== key)
      store.dropSlot(slotKey(stored.wallet, stored.nonce), id);
    const now = new Date();
    const first: Broadcast = {
      hash: tx.txHash,
      rawTx: tx.rawTx,
      maxFeePerGas: tx.maxFeePerGas,
      maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
      noop: false,
      sentAt: now,
    };
    store.dropSlot(key, id);
    store.slots.set(key, {
      wallet,
      nonce: tx.nonce,
      purpose: "trade",
      tradeId: id,
      deadline: tx.deadline,
      state: "pending",
      broadcasts: [first],
      reserves: copyReserves(tx.reserves),
      mined: null,
      createdAt: now,
      updatedAt: now,
    });
    store.hashes.set(tx.txHash.toLowerCase(), key);
    if (tx.nativeUsd === undefined) this.#nativeUsd.delete(id);
    else this.#nativeUsd.set(id, tx.nativeUsd);
    Object.assign(stored, {
      status: TRADE_TRANSITIONS.markSigned.to,
      wallet: tx.wallet,
      nonce: tx.nonce,
      txHash: tx.txHash,
      rawTx: tx.rawTx,
      deadline: tx.deadline,
      updatedAt: now,
    });
  }

  async markSubmitted(id: string): Promise<void> {
    const stored = this.#store.trade(id);
    if (this.#applies("markSubmitted", stored))
      this.#store.update(stored, { status: TRADE_TRANSITIONS.markSubmitted.to });
  }

  async markReorged(id: string): Promise<void> {
    const stored = this.#store.trade(id);
    if (!this.#applies("markReorged", stored)) return;
    this.#store.update(stored, { status: TRADE_TRANSITIONS.markReorged.to, receipt: null });
    const slot = this.#store.tradeSlot(stored);
    if (slot) Object.assign(slot, { state: "pending", mined: null, updatedAt: new Date() });
  }

  async markMined(id: string, receipt: TransactionReceipt): Promise<void> {
    this.#mined(this.#store.trade(id), "markMined", receipt);
  }

  async markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    this.#mined(this.#store.trade(id), "markConfirmed", receipt);
  }

  async markFailed(id: string, error: { code: string; message: string }, audit?: AuditEntry): Promise<void> {
    const stored = this.#store.trade(id);
    if (!this.#applies("markFailed", stored)) return;
    if (audit !== undefined) this.#store.audit.appendNow(audit);
    this.#store.update(stored, {
      status: TRADE_TRANSITIONS.markFailed.to,
      error: { code: error.code, message: error.message },
    });
  }

  async markExpired(id: string, error: { code: string; message: string }): Promise<void> {
    const stored = this.#store.trade(id);
    if (this.#applies("markExpired", stored))
      this.#store.update(stored, {
        status: TRADE_TRANSITIONS.markExpired.to,
        error: { code: error.code, message: error.message },
      });
  }

  async requestCancel(id: string, cancel: TradeCancel, audit?: AuditEntry): Promise<TradeRecord | undefined> {
    const stored = this.#store.trades.get(id);
    if (stored === undefined) return undefined;
    if (stored.cancel == null && (stored.status === "signed" || stored.status === "submitted")) {
      if (audit !== undefined) this.#store.audit.appendNow(audit);
      stored.cancel = { ...cancel };
    }
    return this.#store.record(stored);
  }

  async markCancelled(
    id: string,
    error: { code: string; message: string },
    cancel?: TradeCancel,
    audit?: AuditEntry,
  ): Promise<boolean> {
    const stored = this.#store.trade(id);
    // Asked now: only with nothing signed (a trade signed meanwhile is cancelled by its no-op).
    if (cancel !== undefined && stored.txHash !== null) return stored.status === "cancelled";
    if (this.#applies("markCancelled", stored)) {
      if (audit !== undefined) this.#store.audit.appendNow(audit);
      this.#store.update(stored, {
        status: TRADE_TRANSITIONS.markCancelled.to,
        error: { code: error.code, message: error.message },
        cancel: stored.cancel ?? (cancel === undefined ? null : { ...cancel }),
      });
    }
    return stored.status === "cancelled";
  }

  async discard(id: string, audit?: AuditEntry): Promise<void> {
    const stored = this.#store.trades.get(id);
    if (stored !== undefined && this.#applies("discard", stored)) {
      if (audit !== undefined) this.#store.audit.appendNow(audit);
      this.#store.trades.delete(id);
      this.#spending.forget(id);
    }
  }

  async forgetUnsigned(staleAfterMs?: number): Promise<number> {
    // One process, and nothing survives it: only its own trades can be stale.
    if (staleAfterMs === undefined) return 0;
    const before = Date.now() - staleAfterMs;
    let forgotten = 0;
    for (const [id, stored] of this.#store.trades) {
      if (tradeVerdict("forgetUnsigned", stored) === "applies" && stored.updatedAt.getTime() < before) {
        this.#store.audit.appendNow(forgottenEntry(id));
        this.#store.trades.delete(id);
        this.#spending.forget(id);
        forgotten += 1;
      }
    }
    return forgotten;
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const stored = this.#store.trades.get(id);
    return stored && this.#store.record(stored);
  }

  async findByHash(txHash: string): Promise<TradeRecord | undefined> {
    const store = this.#store;
    const key = store.hashes.get(txHash.toLowerCase());
    const tradeId = key === undefined ? undefined : store.slots.get(key)?.tradeId;
    if (tradeId) return this.get(tradeId);
    for (const stored of store.trades.values())
      if (stored.txHash?.toLowerCase() === txHash.toLowerCase()) return store.record(stored);
    return undefined;
  }

  async page(query: TradePageQuery): Promise<TradePage> {
    const matching = [...this.#store.trades.values()]
      .filter(
        (t) =>
          sees(query.visible, t) &&
          (query.status === undefined || t.status === query.status) &&
          (query.kind === undefined || t.kind === query.kind) &&
          inRange(t, query) &&
          (query.after === undefined || comparePositions(positionOf(t), query.after) < 0),
      )
      .sort((a, b) => comparePositions(positionOf(b), positionOf(a)));
    const trades = matching.slice(0, query.limit);
    const last = trades.at(-1);
    return {
      trades: trades.map((stored) => this.#store.record(stored)),
      next: matching.length > query.limit && last !== undefined ? positionOf(last) : null,
    };
  }

  async summary(query: TradeSummaryQuery): Promise<TradeTotals[]> {
    const groups = new Map<string, TradeTotals>();
    for (const t of this.#store.trades.values()) {
      if (!sees(query.visible, t) || !inRange(t, query)) continue;
      const stable = t.request.usdAddress.toLowerCase();
      const key = `${t.kind}\u0000${stable}`;
      let group = groups.get(key);
      if (group === undefined) {
        group = {
          kind: t.kind,
          stable,
          count: 0,
          executed: 0,
          amountIn: 0n,
          amountOut: 0n,
          gasWei: 0n,
          gasUsd: 0n,
          statuses: {},
        };
        groups.set(key, group);
      }
      group.count += 1;
      group.statuses[t.status] = (group.statuses[t.status] ?? 0) + 1;
      if ((t.status === "mined" || t.status === "confirmed") && t.receipt !== null) {
        const amounts = tradeAmounts(t.receipt);
        group.executed += 1;
        group.amountIn += amounts.amountIn ?? 0n;
        group.amountOut += amounts.amountOut ?? 0n;
        group.gasWei += amounts.gasWei ?? 0n;
        const price = this.#nativeUsd.get(t.id);
        // One executed trade without its gas in USD makes the group's unknown (TradeTotals.gasUsd).
        group.gasUsd =
          group.gasUsd === null || price === undefined || amounts.gasWei === null
            ? null
            : group.gasUsd + gasUsdOf(amounts.gasWei, price);
      }
    }
    return [...groups.values()].sort((a, b) =>
      a.kind === b.kind ? (a.stable < b.stable ? -1 : 1) : a.kind < b.kind ? -1 : 1,
    );
  }

  /** Whether `operation` applies to the trade (the trade model's verdict); throws when the model refuses it. */
  #applies(operation: TradeOperation, stored: StoredTrade): boolean {
    const verdict = tradeVerdict(operation, stored);
    if (verdict === "refused") throw new TradeTransitionError(operation, stored.id, stored);
    return verdict === "applies";
  }

  #mined(stored: StoredTrade, operation: "markMined" | "markConfirmed", receipt: TransactionReceipt): void {
    if (!this.#applies(operation, stored)) return;
    // A trade recorded failed for a taken nonce and then found mined is corrected: no error left.
    this.#store.update(stored, {
      status: TRADE_TRANSITIONS[operation].to,
      receipt: structuredClone(receipt),
      txHash: receipt.transactionHash,
      error: null,
    });
    this.#spending.paid(stored.id, tradeAmounts(receipt).amountOut);
    const slot = this.#store.tradeSlot(stored);
    if (slot && slot.state !== "final") {
      Object.assign(slot, {
        state: "mined",
        mined: { hash: receipt.transactionHash, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash },
        updatedAt: new Date(),
      });
    }
  }
}

function positionOf(t: StoredTrade): TradePosition {
  return { createdAtUs: BigInt(t.createdAt.getTime()) * 1000n, id: t.id };
}

function comparePositions(a: TradePosition, b: TradePosition): number {
  if (a.createdAtUs !== b.createdAtUs) return a.createdAtUs < b.createdAtUs ? -1 : 1;
  return a.id === b.id ? 0 : a.id < b.id ? -1 : 1;
}

function inRange(t: StoredTrade, range: { since?: Date | undefined; until?: Date | undefined }): boolean {
  const at = t.createdAt.getTime();
  return (
    (range.since === undefined || at >= range.since.getTime()) &&
    (range.until === undefined || at < range.until.getTime())
  );
}
