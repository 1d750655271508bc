/**
 * The SQLite journal's nonces: their assignment (NonceStore) and their ledger (NonceLedger, but
 * the leases, leases.ts). A slot that carries a trade changes the trade in the same write.
 */
import type { DatabaseSync } from "node:sqlite";

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
  type TradeCancel,
  tradeStatusAfter,
  unsentCancelledError,
} from "../../../core/index.js";
import { KeyedMutex, checkNonce, nextNonce } from "../../shared/keyed-mutex.js";
import { decodeReserves, encodeReserves } from "../reservations.js";
import { applies } from "../transitions.js";
import type { SqliteAudit } from "./audit.js";
import { toBroadcast, toSlot } from "./rows.js";
import type { SqliteStore } from "./store.js";

/** Prepared once: the statements of the nonces (and of the trades their slots carry). */
function statements(db: DatabaseSync) {
  return {
    nextNonce: db.prepare("SELECT next_nonce FROM wallet_nonces WHERE wallet = ?"),
    setNonce: db.prepare(
      "INSERT INTO wallet_nonces (wallet, next_nonce) VALUES (?, ?) ON CONFLICT (wallet) DO UPDATE SET next_nonce = excluded.next_nonce",
    ),
    slotBroadcasts: db.prepare("SELECT * FROM broadcasts WHERE wallet = ? AND nonce = ? ORDER BY sent_at, rowid"),
    setTradeTx: db.prepare("UPDATE trades SET tx_hash = ?, updated_at = ? WHERE id = ?"),
    openSlots: db.prepare(
      "SELECT * FROM nonce_slots WHERE wallet = ? AND state IN ('pending', 'mined') ORDER BY nonce",
    ),
    openBroadcasts: db.prepare(
      `SELECT b.* FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
       WHERE s.wallet = ? AND s.state IN ('pending', 'mined') ORDER BY b.nonce, b.sent_at, b.rowid`,
    ),
    markSlot: db.prepare(
      "UPDATE nonce_slots SET state = ?, mined_hash = ?, block_number = ?, block_hash = ?, updated_at = ? WHERE wallet = ? AND nonce = ?",
    ),
    finalize: db.prepare(
      "UPDATE nonce_slots SET state = 'final', updated_at = ? WHERE wallet = ? AND state = 'mined' AND block_number <= ?",
    ),
    release: db.prepare(
      `DELETE FROM nonce_slots WHERE wallet = ? AND nonce = ? AND state = 'pending'
       AND (SELECT count(*) FROM broadcasts WHERE wallet = ? AND nonce = ?) = 1
       AND EXISTS (SELECT 1 FROM broadcasts WHERE wallet = ? AND nonce = ? AND hash = ?)`,
    ),
    // A trade whose only transaction can never be mined is no longer signed, where the trade model
    // says so (NonceLedger.releaseSlot; ../transitions.ts): accepted again, or cancelled with its
    // error when a cancel was asked of it (the status and error as PostgreSQL's, parameters).
    unsignTrade: db.prepare(
      `UPDATE trades SET status = ?, error = coalesce(?, error), wallet = NULL, nonce = NULL, tx_hash = NULL,
       raw_tx = NULL, deadline = NULL, updated_at = ? WHERE id = ? AND ${applies("releaseSlot")} AND lower(wallet) = ? AND nonce = ?`,
    ),
    cancelOf: db.prepare("SELECT cancel, approval FROM trades WHERE id = ?"),
    highestNonce: db.prepare("SELECT max(nonce) AS nonce FROM nonce_slots WHERE wallet = ?"),
    // Two index ranges of nonce_slots_reserving: the pending slots, and those mined after a block.
    reservations: db.prepare(
      `SELECT wallet, nonce, reserves FROM nonce_slots WHERE reserves IS NOT NULL AND state = 'pending'
       UNION ALL
       SELECT wallet, nonce, reserves FROM nonce_slots
       WHERE reserves IS NOT NULL AND state IN ('mined', 'final') AND block_number > ?`,
    ),
    releaseBroadcast: db.prepare(
      "DELETE FROM broadcasts WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM nonce_slots WHERE wallet = ? AND nonce = ?)",
    ),
  };
}

export class SqliteNonces implements NonceStore, Omit<NonceLedger, "acquireLease" | "releaseLease"> {
  readonly #store: SqliteStore;
  readonly #sql: ReturnType<typeof statements> & SqliteStore["sql"];
  readonly #nonceLocks = new KeyedMutex();

  readonly #audit: SqliteAudit;

  constructor(store: SqliteStore, audit: SqliteAudit) {
    this.#store = store;
    this.#audit = audit;
    this.#sql = { ...store.sql, ...statements(store.db) };
  }

  async withNonce<T>(
    wallet: string,
    chainNonce: () => Promise<number>,
    send: (nonce: number) => Promise<T>,
    consumed?: NoncesConsumed<T>,
  ): Promise<T> {
    const key = wallet.toLowerCase();
    // One process owns the file (see index.ts), so an in-process lock is the wallet's lock.
    return this.#nonceLocks.run(key, async () => {
      const stored = this.#sql.nextNonce.get(key)?.next_nonce;
      const nonce = stored === undefined || stored === null ? checkNonce(await chainNonce()) : Number(stored);
      // Cleared while `send` runs: if the process dies mid-send, the next call resyncs from the chain
      // rather than reusing a nonce that may already be on it. A throwing send leaves it cleared.
      this.#sql.setNonce.run(key, null);
      const result = await send(nonce);
      this.#sql.setNonce.run(key, nextNonce(nonce, result, consumed));
      return result;
    });
  }

  recordSlot(
    slot: {
      wallet: string;
      nonce: number;
      purpose: SlotPurpose;
      deadline: number | null;
      reserves?: readonly Reservation[];
    },
    first: Broadcast,
  ): Promise<void> {
    return this.#store.write(() => {
      const now = Date.now();
      const wallet = slot.wallet.toLowerCase();
      // Checked first, so that a refused write leaves nothing behind in the group's transaction.
      if (this.#sql.slot.get(wallet, slot.nonce))
        throw new Error(`nonce ${slot.nonce} of ${wallet} already has a slot`);
      this.#insertBroadcast(wallet, slot.nonce, first);
      this.#sql.insertSlot.run(
        wallet,
        slot.nonce,
        slot.purpose,
        null,
        slot.deadline,
        now,
        now,
        encodeReserves(slot.reserves, first.hash),
      );
    });
  }

  async reservations(minedAfter: number): Promise<SlotReservation[]> {
    return this.#sql.reservations
      .all(minedAfter)
      .flatMap((row) => decodeReserves(row.reserves as string, row.wallet as string, Number(row.nonce)));
  }

  recordBroadcast(
    wallet: string,
    nonce: number,
    broadcast: Broadcast,
    replaces: string,
    audit?: AuditEntry,
  ): Promise<boolean> {
    return this.#store.write(() => {
      const lower = wallet.toLowerCase();
      const slot = this.#sql.slot.get(lower, nonce);
      if (slot?.state !== "pending") return false;
      const last = this.#sql.slotBroadcasts.all(lower, nonce).at(-1)?.hash;
      if (last !== replaces.toLowerCase()) return false;
      this.#insertBroadcast(lower, nonce, broadcast);
      if (typeof slot.trade_id === "string") this.#sql.setTradeTx.run(broadcast.hash, Date.now(), slot.trade_id);
      if (audit !== undefined) this.#audit.appendIn(audit);
      return true;
    }, audit !== undefined);
  }

  async slot(wallet: string, nonce: number): Promise<NonceSlot | undefined> {
    const lower = wallet.toLowerCase();
    const row = this.#sql.slot.get(lower, nonce);
    return row && toSlot(row, this.#sql.slotBroadcasts.all(lower, nonce).map(toBroadcast));
  }

  async openSlots(wallet: string): Promise<NonceSlot[]> {
    const lower = wallet.toLowerCase();
    const broadcasts = new Map<number, Broadcast[]>();
    for (const row of this.#sql.openBroadcasts.all(lower)) {
      const nonce = Number(row.nonce);
      let list = broadcasts.get(nonce);
      if (list === undefined) {
        list = [];
        broadcasts.set(nonce, list);
      }
      list.push(toBroadcast(row));
    }
    return this.#sql.openSlots.all(lower).map((row) => toSlot(row, broadcasts.get(Number(row.nonce)) ?? []));
  }

  markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null): Promise<void> {
    return this.#store.write(() => {
      const changes = this.#sql.markSlot.run(
        state,
        mined?.hash ?? null,
        mined?.blockNumber ?? null,
        mined?.blockHash ?? null,
        Date.now(),
        wallet.toLowerCase(),
        nonce,
      ).changes;
      if (Number(changes) !== 1) throw new Error(`nonce ${nonce} of ${wallet.toLowerCase()} has no slot`);
    });
  }

  finalizeSlots(wallet: string, blockNumber: number): Promise<number> {
    return this.#store.write(() =>
      Number(this.#sql.finalize.run(Date.now(), wallet.toLowerCase(), blockNumber).changes),
    );
  }

  releaseSlot(wallet: string, nonce: number, hash: string): Promise<boolean> {
    return this.#store.write(() => {
      const lower = wallet.toLowerCase();
      const h = hash.toLowerCase();
      const slot = this.#sql.slot.get(lower, nonce);
      if (slot === undefined) return false;
      if (Number(this.#sql.release.run(lower, nonce, lower, nonce, lower, nonce, h).changes) !== 1) return false;
      this.#sql.releaseBroadcast.run(h, lower, nonce);
      if (typeof slot.trade_id === "string") {
        const row = this.#sql.cancelOf.get(slot.trade_id);
        const cancel = typeof row?.cancel === "string" ? (JSON.parse(row.cancel) as TradeCancel) : null;
        this.#sql.unsignTrade.run(
          tradeStatusAfter("releaseSlot", { cancel, approval: row?.approval }),
          cancel === null ? null : JSON.stringify(unsentCancelledError(cancel)),
          Date.now(),
          slot.trade_id,
          lower,
          nonce,
        );
      }
      return true;
    });
  }

  async highestNonce(wallet: string): Promise<number | undefined> {
    const highest = this.#sql.highestNonce.get(wallet.toLowerCase())?.nonce;
    return highest === null || highest === undefined ? undefined : Number(highest);
  }

  #insertBroadcast(wallet: string, nonce: number, b: Broadcast): void {
    this.#sql.insertBroadcast.run(
      b.hash.toLowerCase(),
      wallet,
      nonce,
      b.rawTx,
      b.maxFeePerGas.toString(),
      b.maxPriorityFeePerGas.toString(),
      b.noop ? 1 : 0,
      b.sentAt.getTime(),
    );
  }
}
