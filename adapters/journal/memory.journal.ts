/**
 * The trade journal in memory: for tests and for a service that may forget everything when it
 * stops. It passes the same conformance suite as SQLite and PostgreSQL
 * (test/adapters/journal/journal.contract.ts), except what only durable storage can do.
 */
import { randomUUID } from "node:crypto";

import type {
  Broadcast,
  MinedTx,
  NewTrade,
  NonceLedger,
  NonceSlot,
  NonceStore,
  NoncesConsumed,
  SignedTradeTx,
  SlotPurpose,
  SlotState,
  QuoteStore,
  StoredQuote,
  TradeJournal,
  TradePage,
  TradePageQuery,
  TradePosition,
  TradeRecord,
  TradeSummaryQuery,
  TradeTotals,
  TransactionReceipt,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookDeliveryQuery,
  WebhookEvent,
  WebhookOutbox,
  WebhookOutboxStats,
  WebhookOutcome,
} from "../../core/index.js";
import { gasUsdOf, tradeAmounts } from "../../core/index.js";
import { KeyedMutex, checkNonce, nextNonce } from "../shared/keyed-mutex.js";
import { MemoryOutbox } from "./memory.webhooks.js";
import { webhookEventType } from "./webhook-events.js";

type StoredTrade = Omit<TradeRecord, "broadcasts">;

interface StoredSlot extends Omit<NonceSlot, "broadcasts"> {
  broadcasts: Broadcast[];
}

/** A trade with nothing signed: accepted, with no wallet, nonce or transaction. */
const UNSIGNED = {
  status: "accepted",
  wallet: null,
  nonce: null,
  txHash: null,
  rawTx: null,
  deadline: null,
} as const satisfies Partial<StoredTrade>;

const slotKey = (wallet: string, nonce: number) => `${wallet.toLowerCase()}:${nonce}`;

export class MemoryJournal implements TradeJournal, NonceStore, NonceLedger, QuoteStore, WebhookOutbox {
  readonly #trades = new Map<string, StoredTrade>();
  readonly #slots = new Map<string, StoredSlot>();
  readonly #hashes = new Map<string, string>(); // tx hash → slot key
  readonly #next = new Map<string, number>();
  readonly #nonceLocks = new KeyedMutex();
  readonly #leases = new Map<string, { holder: string; expiresAt: number }>();
  readonly #quotes = new Map<string, StoredQuote>();
  /** The native coin's USD price each trade was signed at (SignedTradeTx.nativeUsd), by trade id. */
  readonly #nativeUsd = new Map<string, bigint>();
  readonly #outbox = new MemoryOutbox();

  async open(trade: NewTrade): Promise<{ created: boolean; record: TradeRecord }> {
    if (trade.idempotencyKey !== null) {
      for (const stored of this.#trades.values()) {
        if (stored.scope === trade.scope && stored.idempotencyKey === trade.idempotencyKey)
          return { created: false, record: this.#record(stored) };
      }
    }
    const now = new Date();
    const stored: StoredTrade = {
      ...trade,
      id: randomUUID(),
      ...UNSIGNED,
      receipt: null,
      error: null,
      createdAt: now,
      updatedAt: now,
    };
    this.#trades.set(stored.id, stored);
    return { created: true, record: this.#record(stored) };
  }

  async markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    const stored = this.#trade(id);
    const wallet = tx.wallet.toLowerCase();
    const key = slotKey(wallet, tx.nonce);
    const existing = this.#slots.get(key);
    if (existing && existing.tradeId !== id) throw new Error(`nonce ${tx.nonce} of ${wallet} already has a slot`);
    // Signed again at another nonce: the first was refused, so its slot goes.
    if (stored.wallet !== null && stored.nonce !== null && slotKey(stored.wallet, stored.nonce) !== key)
      this.#dropSlot(slotKey(stored.wallet, stored.nonce), id);
    const now = new Date();
    const first: Broadcast = {
      hash: tx.txHash,
      rawTx: tx.rawTx,
      maxFeePerGas: tx.maxFeePerGas,
      maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
      noop: false,
      sentAt: now,
    };
    this.#dropSlot(key, id);
    this.#slots.set(key, {
      wallet,
      nonce: tx.nonce,
      purpose: "trade",
      tradeId: id,
      deadline: tx.deadline,
      state: "pending",
      broadcasts: [first],
      mined: null,
      createdAt: now,
      updatedAt: now,
    });
    this.#hashes.set(tx.txHash.toLowerCase(), key);
    if (tx.nativeUsd === undefined) this.#nativeUsd.delete(id);
    else this.#nativeUsd.set(id, tx.nativeUsd);
    Object.assign(stored, {
      status: "signed",
      wallet: tx.wallet,
      nonce: tx.nonce,
      txHash: tx.txHash,
      rawTx: tx.rawTx,
      deadline: tx.deadline,
      updatedAt: now,
    });
  }

  async markSubmitted(id: string): Promise<void> {
    const stored = this.#trade(id);
    if (stored.status === "signed") this.#update(stored, { status: "submitted" });
  }

  async markReorged(id: string): Promise<void> {
    const stored = this.#trade(id);
    if (stored.status !== "mined" && stored.status !== "confirmed") return;
    this.#update(stored, { status: "submitted", receipt: null });
    const slot = this.#tradeSlot(stored);
    if (slot) Object.assign(slot, { state: "pending", mined: null, updatedAt: new Date() });
  }

  async markMined(id: string, receipt: TransactionReceipt): Promise<void> {
    this.#mined(this.#trade(id), "mined", receipt);
  }

  async markConfirmed(id: string, receipt: TransactionReceipt): Promise<void> {
    this.#mined(this.#trade(id), "confirmed", receipt);
  }

  async markFailed(id: string, error: { code: string; message: string }): Promise<void> {
    const stored = this.#trade(id);
    if (stored.status === "expired") return; // its outcome: the no-op took the nonce
    this.#update(stored, { status: "failed", error: { code: error.code, message: error.message } });
  }

  async markExpired(id: string, error: { code: string; message: string }): Promise<void> {
    this.#update(this.#trade(id), { status: "expired", error: { code: error.code, message: error.message } });
  }

  async discard(id: string): Promise<void> {
    const stored = this.#trades.get(id);
    if (stored === undefined) return;
    if (stored.txHash !== null) throw new Error(`trade ${id} has a signed transaction and cannot be discarded`);
    this.#trades.delete(id);
  }

  async forgetUnsigned(staleAfterMs?: number): Promise<number> {
    // One process, and nothing survives it: only its own trades can be stale.
    if (staleAfterMs === undefined) return 0;
    const before = Date.now() - staleAfterMs;
    let forgotten = 0;
    for (const [id, stored] of this.#trades) {
      if (stored.status === "accepted" && stored.txHash === null && stored.updatedAt.getTime() < before) {
        this.#trades.delete(id);
        forgotten += 1;
      }
    }
    return forgotten;
  }

  async get(id: string): Promise<TradeRecord | undefined> {
    const stored = this.#trades.get(id);
    return stored && this.#record(stored);
  }

  async findByHash(txHash: string): Promise<TradeRecord | undefined> {
    const key = this.#hashes.get(txHash.toLowerCase());
    const tradeId = key === undefined ? undefined : this.#slots.get(key)?.tradeId;
    if (tradeId) return this.get(tradeId);
    for (const stored of this.#trades.values())
      if (stored.txHash?.toLowerCase() === txHash.toLowerCase()) return this.#record(stored);
    return undefined;
  }

  async page(query: TradePageQuery): Promise<TradePage> {
    const matching = [...this.#trades.values()]
      .filter(
        (t) =>
          t.scope === query.scope &&
          (query.status === undefined || t.status === query.status) &&
          (query.kind === undefined || t.kind === query.kind) &&
          inRange(t, query) &&
          (query.after === undefined || comparePositions(positionOf(t), query.after) < 0),
      )
      .sort((a, b) => comparePositions(positionOf(b), positionOf(a)));
    const trades = matching.slice(0, query.limit);
    const last = trades.at(-1);
    return {
      trades: trades.map((stored) => this.#record(stored)),
      next: matching.length > query.limit && last !== undefined ? positionOf(last) : null,
    };
  }

  async summary(query: TradeSummaryQuery): Promise<TradeTotals[]> {
    const groups = new Map<string, TradeTotals>();
    for (const t of this.#trades.values()) {
      if (t.scope !== query.scope || !inRange(t, query)) continue;
      const stable = t.request.usdAddress.toLowerCase();
      const key = `${t.kind}\u0000${stable}`;
      let group = groups.get(key);
      if (group === undefined) {
        group = { kind: t.kind, stable, count: 0, executed: 0, amountIn: 0n, amountOut: 0n, gasWei: 0n, gasUsd: 0n };
        groups.set(key, group);
      }
      group.count += 1;
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

  async withNonce<T>(
    wallet: string,
    chainNonce: () => Promise<number>,
    send: (nonce: number) => Promise<T>,
    consumed?: NoncesConsumed<T>,
  ): Promise<T> {
    const key = wallet.toLowerCase();
    return this.#nonceLocks.run(key, async () => {
      const nonce = this.#next.get(key) ?? checkNonce(await chainNonce());
      this.#next.delete(key);
      const result = await send(nonce);
      const next = nextNonce(nonce, result, consumed);
      if (next !== null) this.#next.set(key, next);
      return result;
    });
  }

  async recordSlot(
    slot: { wallet: string; nonce: number; purpose: SlotPurpose; deadline: number | null },
    first: Broadcast,
  ): Promise<void> {
    const wallet = slot.wallet.toLowerCase();
    const key = slotKey(wallet, slot.nonce);
    if (this.#slots.has(key)) throw new Error(`nonce ${slot.nonce} of ${wallet} already has a slot`);
    const now = new Date();
    this.#slots.set(key, {
      ...slot,
      wallet,
      tradeId: null,
      state: "pending",
      broadcasts: [{ ...first }],
      mined: null,
      createdAt: now,
      updatedAt: now,
    });
    this.#hashes.set(first.hash.toLowerCase(), key);
  }

  async recordBroadcast(wallet: string, nonce: number, broadcast: Broadcast): Promise<void> {
    const key = slotKey(wallet, nonce);
    const slot = this.#slots.get(key);
    if (slot === undefined) throw new Error(`nonce ${nonce} of ${wallet.toLowerCase()} has no slot`);
    slot.broadcasts.push({ ...broadcast });
    slot.updatedAt = new Date();
    this.#hashes.set(broadcast.hash.toLowerCase(), key);
    if (slot.tradeId !== null) {
      const stored = this.#trades.get(slot.tradeId);
      if (stored) this.#update(stored, { txHash: broadcast.hash, rawTx: broadcast.rawTx });
    }
  }

  async slot(wallet: string, nonce: number): Promise<NonceSlot | undefined> {
    const slot = this.#slots.get(slotKey(wallet, nonce));
    return slot && copySlot(slot);
  }

  async openSlots(wallet: string): Promise<NonceSlot[]> {
    const lower = wallet.toLowerCase();
    return [...this.#slots.values()]
      .filter((slot) => slot.wallet === lower && (slot.state === "pending" || slot.state === "mined"))
      .sort((a, b) => a.nonce - b.nonce)
      .map(copySlot);
  }

  async markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null): Promise<void> {
    const slot = this.#slots.get(slotKey(wallet, nonce));
    if (slot === undefined) throw new Error(`nonce ${nonce} of ${wallet.toLowerCase()} has no slot`);
    Object.assign(slot, { state, mined: mined && { ...mined }, updatedAt: new Date() });
  }

  async finalizeSlots(wallet: string, blockNumber: number): Promise<number> {
    let count = 0;
    for (const slot of this.#slots.values()) {
      if (
        slot.wallet === wallet.toLowerCase() &&
        slot.state === "mined" &&
        slot.mined !== null &&
        slot.mined.blockNumber <= blockNumber
      ) {
        Object.assign(slot, { state: "final", updatedAt: new Date() });
        count += 1;
      }
    }
    return count;
  }

  async releaseSlot(wallet: string, nonce: number, hash: string): Promise<boolean> {
    const key = slotKey(wallet, nonce);
    const slot = this.#slots.get(key);
    if (
      slot?.state === "pending" &&
      slot.broadcasts.length === 1 &&
      slot.broadcasts[0]!.hash.toLowerCase() === hash.toLowerCase()
    ) {
      this.#slots.delete(key);
      this.#hashes.delete(hash.toLowerCase());
      const trade = slot.tradeId === null ? undefined : this.#trades.get(slot.tradeId);
      if (trade?.status === "signed" && trade.nonce === nonce)
        Object.assign(trade, { ...UNSIGNED, updatedAt: new Date() });
      return true;
    }
    return false;
  }

  async highestNonce(wallet: string): Promise<number | undefined> {
    const lower = wallet.toLowerCase();
    let highest: number | undefined;
    for (const slot of this.#slots.values())
      if (slot.wallet === lower && (highest === undefined || slot.nonce > highest)) highest = slot.nonce;
    return highest;
  }

  async acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const now = Date.now();
    const lease = this.#leases.get(name);
    if (lease !== undefined && lease.holder !== holder && lease.expiresAt > now) return false;
    this.#leases.set(name, { holder, expiresAt: now + ttlMs });
    return true;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    if (this.#leases.get(name)?.holder === holder) this.#leases.delete(name);
  }

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

  setWebhookScopes(scopes: readonly string[]): Promise<void> {
    return this.#outbox.setWebhookScopes(scopes);
  }

  claimWebhookEvents(holder: string, limit: number, leaseMs: number): Promise<WebhookEvent[]> {
    return this.#outbox.claimWebhookEvents(holder, limit, leaseMs);
  }

  recordWebhookAttempt(id: string, holder: string, attempt: WebhookAttempt, outcome: WebhookOutcome): Promise<boolean> {
    return this.#outbox.recordWebhookAttempt(id, holder, attempt, outcome);
  }

  listWebhookDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage> {
    return this.#outbox.listWebhookDeliveries(query);
  }

  retryWebhookDelivery(scope: string, id: string, now: Date): Promise<WebhookDelivery | "not_failed" | undefined> {
    return this.#outbox.retryWebhookDelivery(scope, id, now);
  }

  webhookStats(): Promise<WebhookOutboxStats> {
    return this.#outbox.webhookStats();
  }

  async close(): Promise<void> {}

  /** Every trade recorded, oldest first (for tests). */
  trades(): TradeRecord[] {
    return [...this.#trades.values()].map((stored) => this.#record(stored));
  }

  #trade(id: string): StoredTrade {
    const stored = this.#trades.get(id);
    if (stored === undefined) throw new Error(`trade ${id} is not in the journal`);
    return stored;
  }

  #update(stored: StoredTrade, change: Partial<StoredTrade>): void {
    const before = { status: stored.status, txHash: stored.txHash };
    Object.assign(stored, change, { updatedAt: new Date() });
    // The outbox's event, in the same step as the change (see memory.webhooks.ts).
    const type = webhookEventType(before, stored, this.#tradeSlot(stored)?.broadcasts.length ?? 0);
    if (type !== undefined) this.#outbox.emit(this.#record(stored), type);
  }

  #mined(stored: StoredTrade, status: "mined" | "confirmed", receipt: TransactionReceipt): void {
    // A trade recorded failed for a taken nonce and then found mined is corrected: no error left.
    this.#update(stored, { status, receipt: structuredClone(receipt), txHash: receipt.transactionHash, error: null });
    const slot = this.#tradeSlot(stored);
    if (slot && slot.state !== "final") {
      Object.assign(slot, {
        state: "mined",
        mined: { hash: receipt.transactionHash, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash },
        updatedAt: new Date(),
      });
    }
  }

  #tradeSlot(stored: StoredTrade): StoredSlot | undefined {
    if (stored.wallet === null || stored.nonce === null) return undefined;
    const slot = this.#slots.get(slotKey(stored.wallet, stored.nonce));
    return slot?.tradeId === stored.id ? slot : undefined;
  }

  #dropSlot(key: string, tradeId: string): void {
    const slot = this.#slots.get(key);
    if (slot?.tradeId !== tradeId) return;
    for (const broadcast of slot.broadcasts) this.#hashes.delete(broadcast.hash.toLowerCase());
    this.#slots.delete(key);
  }

  #record(stored: StoredTrade): TradeRecord {
    const slot = this.#tradeSlot(stored);
    return structuredClone({ ...stored, broadcasts: slot ? slot.broadcasts : [] });
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

function copySlot(slot: StoredSlot): NonceSlot {
  return structuredClone(slot);
}
