/**
 * An in-memory TradeJournal for the core's unit tests (the real ones, SQLite and
 * PostgreSQL, are tested in test/adapters/journal against the same contract).
 */
import { randomUUID } from "node:crypto";

import { MemoryNonceStore } from "../../adapters/chain/index.js";
import type { NewTrade, NoncesConsumed, TradeJournal, TradeRecord, TransactionReceipt } from "../../core/index.js";

export class MemoryJournal implements TradeJournal {
  readonly records = new Map<string, TradeRecord>();
  readonly #nonces = new MemoryNonceStore();

  async open(trade: NewTrade) {
    if (trade.idempotencyKey !== null) {
      for (const record of this.records.values()) {
        if (record.scope === trade.scope && record.idempotencyKey === trade.idempotencyKey) return { created: false, record: { ...record } };
      }
    }
    const now = new Date();
    const record: TradeRecord = {
      ...trade,
      id: randomUUID(),
      status: "accepted",
      wallet: null,
      nonce: null,
      txHash: null,
      rawTx: null,
      receipt: null,
      error: null,
      createdAt: now,
      updatedAt: now,
    };
    this.records.set(record.id, record);
    return { created: true, record: { ...record } };
  }

  async markSigned(id: string, tx: { wallet: string; nonce: number; txHash: string; rawTx: string }) {
    this.#update(id, { status: "signed", ...tx });
  }
  async markConfirmed(id: string, receipt: TransactionReceipt) {
    this.#update(id, { status: "confirmed", receipt });
  }
  async markFailed(id: string, error: { code: string; message: string }) {
    this.#update(id, { status: "failed", error });
  }
  async discard(id: string) {
    this.records.delete(id);
  }
  async get(id: string) {
    const record = this.records.get(id);
    return record && { ...record };
  }
  async unresolved() {
    return [...this.records.values()].filter((r) => r.status === "signed").map((r) => ({ ...r }));
  }
  withNonce<T>(wallet: string, chainNonce: () => Promise<number>, send: (nonce: number) => Promise<T>, consumed?: NoncesConsumed<T>): Promise<T> {
    return this.#nonces.withNonce(wallet, chainNonce, send, consumed);
  }
  async close() {}

  #update(id: string, change: Partial<TradeRecord>) {
    const record = this.records.get(id);
    if (!record) throw new Error(`no trade ${id}`);
    Object.assign(record, change, { updatedAt: new Date() });
  }
}
