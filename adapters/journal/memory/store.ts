/**
 * What the memory journal's parts share: the trades and the nonce slots (a trade's transactions
 * are its slot's broadcasts, so both parts read and write both), and the webhook outbox that a
 * trade's change writes to in the same synchronous step, which is what a transaction is in memory.
 */
import {
  type Broadcast,
  INITIAL_STATUS,
  type NonceSlot,
  type Reservation,
  type TradeRecord,
} from "../../../core/index.js";
import { cancelEventType, webhookEventType } from "../webhook-events.js";
import { MemoryAudit } from "./audit.js";
import { MemoryEvents } from "./webhooks.js";

export type StoredTrade = Omit<TradeRecord, "broadcasts">;

export interface StoredSlot extends Omit<NonceSlot, "broadcasts"> {
  broadcasts: Broadcast[];
  /** What it holds back until it is final (NonceLedger.reservations). */
  reserves: readonly Reservation[];
}

/** A trade with nothing signed: in the initial state, with no wallet, nonce or transaction. */
export const UNSIGNED = {
  status: INITIAL_STATUS,
  wallet: null,
  nonce: null,
  txHash: null,
  rawTx: null,
  deadline: null,
} as const satisfies Partial<StoredTrade>;

/** `reserves` lower-cased and copied (none: an empty list). */
export function copyReserves(reserves: readonly Reservation[] | undefined): Reservation[] {
  return (reserves ?? []).map(({ holder, asset, amount }) => ({
    holder: holder.toLowerCase(),
    asset: asset.toLowerCase(),
    amount,
  }));
}

export const slotKey = (wallet: string, nonce: number) => `${wallet.toLowerCase()}:${nonce}`;

export class MemoryStore {
  readonly trades = new Map<string, StoredTrade>();
  readonly slots = new Map<string, StoredSlot>();
  readonly hashes = new Map<string, string>(); // tx hash → slot key
  /** The webhook outbox's events (webhooks.ts). */
  readonly events = new MemoryEvents();
  /** The audit log, appended in the same synchronous step as the change each record records. */
  readonly audit = new MemoryAudit();

  trade(id: string): StoredTrade {
    const stored = this.trades.get(id);
    if (stored === undefined) throw new Error(`trade ${id} is not in the journal`);
    return stored;
  }

  update(stored: StoredTrade, change: Partial<StoredTrade>): void {
    const before = { status: stored.status, txHash: stored.txHash };
    Object.assign(stored, change, { updatedAt: new Date() });
    // The outbox's event, in the same step as the change (see webhooks.ts).
    const type = webhookEventType(before, stored, this.tradeSlot(stored)?.broadcasts.length ?? 0);
    if (type !== undefined) this.events.emit(this.record(stored), type);
    const cancelFailed = cancelEventType(before, stored);
    if (cancelFailed !== undefined) this.events.emit(this.record(stored), cancelFailed);
  }

  tradeSlot(stored: StoredTrade): StoredSlot | undefined {
    if (stored.wallet === null || stored.nonce === null) return undefined;
    const slot = this.slots.get(slotKey(stored.wallet, stored.nonce));
    return slot?.tradeId === stored.id ? slot : undefined;
  }

  dropSlot(key: string, tradeId: string): void {
    const slot = this.slots.get(key);
    if (slot?.tradeId !== tradeId) return;
    for (const broadcast of slot.broadcasts) this.hashes.delete(broadcast.hash.toLowerCase());
    this.slots.delete(key);
  }

  record(stored: StoredTrade): TradeRecord {
    const slot = this.tradeSlot(stored);
    return structuredClone({ ...stored, broadcasts: slot ? slot.broadcasts : [] });
  }
}
