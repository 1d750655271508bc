/**
 * The memory journal's nonces: their assignment (NonceStore) and their ledger (NonceLedger, but
 * the leases, leases.ts). A slot that carries a trade changes the trade with it (store.ts).
 */
import {
  type AuditEntry,
  type Broadcast,
  type MinedTx,
  type NonceLedger,
  type NonceSlot,
  type NonceStore,
  type NoncesConsumed,
  type Reservation,
  type SlotPurpose,
  type SlotReservation,
  type SlotState,
  tradeStatusAfter,
  tradeVerdict,
  unsentCancelledError,
} from "../../../core/index.js";
import { KeyedMutex, checkNonce, nextNonce } from "../../shared/keyed-mutex.js";
import { copyReserves, type MemoryStore, type StoredSlot, slotKey, UNSIGNED } from "./store.js";

export class MemoryNonces implements NonceStore, Omit<NonceLedger, "acquireLease" | "releaseLease"> {
  readonly #store: MemoryStore;
  readonly #next = new Map<string, number>();
  readonly #nonceLocks = new KeyedMutex();

  constructor(store: MemoryStore) {
    this.#store = store;
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
    slot: {
      wallet: string;
      nonce: number;
      purpose: SlotPurpose;
      deadline: number | null;
      reserves?: readonly Reservation[];
    },
    first: Broadcast,
  ): Promise<void> {
    const wallet = slot.wallet.toLowerCase();
    const key = slotKey(wallet, slot.nonce);
    if (this.#store.slots.has(key)) throw new Error(`nonce ${slot.nonce} of ${wallet} already has a slot`);
    const now = new Date();
    this.#store.slots.set(key, {
      nonce: slot.nonce,
      purpose: slot.purpose,
      deadline: slot.deadline,
      reserves: copyReserves(slot.reserves),
      wallet,
      tradeId: null,
      state: "pending",
      broadcasts: [{ ...first }],
      mined: null,
      createdAt: now,
      updatedAt: now,
    });
    this.#store.hashes.set(first.hash.toLowerCase(), key);
  }

  async reservations(minedAfter: number): Promise<SlotReservation[]> {
    return [...this.#store.slots.values()]
      .filter(
        (slot) =>
          slot.state === "pending" ||
          ((slot.state === "mined" || slot.state === "final") && (slot.mined?.blockNumber ?? -1) > minedAfter),
      )
      .flatMap((slot) => {
        const tx = slot.broadcasts[0]!.hash.toLowerCase();
        return copyReserves(slot.reserves).map((r) => ({ wallet: slot.wallet, nonce: slot.nonce, tx, ...r }));
      });
  }

  async recordBroadcast(
    wallet: string,
    nonce: number,
    broadcast: Broadcast,
    replaces: string,
    audit?: AuditEntry,
  ): Promise<boolean> {
    const store = this.#store;
    const key = slotKey(wallet, nonce);
    const slot = store.slots.get(key);
    if (slot?.state !== "pending" || slot.broadcasts.at(-1)!.hash.toLowerCase() !== replaces.toLowerCase())
      return false;
    if (audit !== undefined) store.audit.appendNow(audit); // first: a record it refuses changes nothing
    slot.broadcasts.push({ ...broadcast });
    slot.updatedAt = new Date();
    store.hashes.set(broadcast.hash.toLowerCase(), key);
    if (slot.tradeId !== null) {
      const stored = store.trades.get(slot.tradeId);
      if (stored) store.update(stored, { txHash: broadcast.hash, rawTx: broadcast.rawTx });
    }
    return true;
  }

  async slot(wallet: string, nonce: number): Promise<NonceSlot | undefined> {
    const slot = this.#store.slots.get(slotKey(wallet, nonce));
    return slot && copySlot(slot);
  }

  async openSlots(wallet: string): Promise<NonceSlot[]> {
    const lower = wallet.toLowerCase();
    return [...this.#store.slots.values()]
      .filter((slot) => slot.wallet === lower && (slot.state === "pending" || slot.state === "mined"))
      .sort((a, b) => a.nonce - b.nonce)
      .map(copySlot);
  }

  async markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null): Promise<void> {
    const slot = this.#store.slots.get(slotKey(wallet, nonce));
    if (slot === undefined) throw new Error(`nonce ${nonce} of ${wallet.toLowerCase()} has no slot`);
    Object.assign(slot, { state, mined: mined && { ...mined }, updatedAt: new Date() });
  }

  async finalizeSlots(wallet: string, blockNumber: number): Promise<number> {
    let count = 0;
    for (const slot of this.#store.slots.values()) {
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
    const store = this.#store;
    const key = slotKey(wallet, nonce);
    const slot = store.slots.get(key);
    if (
      slot?.state === "pending" &&
      slot.broadcasts.length === 1 &&
      slot.broadcasts[0]!.hash.toLowerCase() === hash.toLowerCase()
    ) {
      store.slots.delete(key);
      store.hashes.delete(hash.toLowerCase());
      const trade = slot.tradeId === null ? undefined : store.trades.get(slot.tradeId);
      // No longer signed, if the trade model says so (core/trade-states.ts): never signed without a
      // transaction; cancelled, with a cancel asked of it.
      if (trade !== undefined && tradeVerdict("releaseSlot", trade) === "applies" && trade.nonce === nonce)
        store.update(trade, {
          ...UNSIGNED,
          status: tradeStatusAfter("releaseSlot", trade),
          ...(trade.cancel != null && { error: unsentCancelledError(trade.cancel) }),
        });
      return true;
    }
    return false;
  }

  async highestNonce(wallet: string): Promise<number | undefined> {
    const lower = wallet.toLowerCase();
    let highest: number | undefined;
    for (const slot of this.#store.slots.values())
      if (slot.wallet === lower && (highest === undefined || slot.nonce > highest)) highest = slot.nonce;
    return highest;
  }
}

function copySlot(slot: StoredSlot): NonceSlot {
  const { reserves: _, ...read } = slot;
  return structuredClone(read);
}
