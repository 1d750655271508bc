/**
 * The PostgreSQL journal's nonces: their assignment (NonceStore) and their ledger (NonceLedger,
 * but the leases, leases.ts). A slot that carries a trade changes the trade in the same
 * transaction.
 *
 * Locking: `withNonce` holds a transaction-level advisory lock on "nonce:<wallet>" for the
 * whole `send`. PostgreSQL drops it with the transaction, so it is released when the holding
 * process dies: at once on kill -9 (the server sees the connection close), and within about
 * a minute if its host vanishes (TCP keepalives on the lock connections, store.ts).
 */
import type pg from "pg";

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
import { appendAudit } from "./audit.js";
import { BROADCAST_COLUMNS, type BroadcastRow, insertBroadcast, type SlotRow, toBroadcast, toSlot } from "./rows.js";
import { type PostgresPools, transaction } from "./store.js";

export class PostgresNonces implements NonceStore, Omit<NonceLedger, "acquireLease" | "releaseLease"> {
  readonly #pool: pg.Pool;
  readonly #lockPool: pg.Pool;
  readonly #nonceLocks = new KeyedMutex();

  constructor({ pool, lockPool }: PostgresPools) {
    this.#pool = pool;
    this.#lockPool = lockPool;
  }

  async withNonce<T>(
    wallet: string,
    chainNonce: () => Promise<number>,
    send: (nonce: number) => Promise<T>,
    consumed?: NoncesConsumed<T>,
  ): Promise<T> {
    const key = wallet.toLowerCase();
    // Queue in this process first, so it holds at most one connection per wallet waiting on the database.
    return this.#nonceLocks.run(key, async () => {
      const client = await this.#lockPool.connect();
      // A connection that breaks while checked out emits 'error'; the pending query rejects anyway.
      const onError = () => {};
      client.on("error", onError);
      let broken = false;
      try {
        await client.query("BEGIN");
        // Held until COMMIT or ROLLBACK, or until this connection dies.
        await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`nonce:${key}`]);
        // Read the stored nonce and clear it in one autocommit statement, durable before `send`:
        // if this process dies mid-send, the next holder resyncs from the chain rather than
        // reusing a nonce that may already be on it. A throwing send leaves it cleared.
        const { rows } = await this.#pool.query<{ next_nonce: string | null }>(
          `UPDATE wallet_nonces AS w SET next_nonce = NULL, updated_at = clock_timestamp()
           FROM wallet_nonces AS old WHERE w.wallet = $1 AND old.wallet = w.wallet
           RETURNING old.next_nonce`,
          [key],
        );
        const stored = rows[0]?.next_nonce ?? null;
        const nonce = stored === null ? checkNonce(await chainNonce()) : Number(stored);
        const result = await send(nonce);
        try {
          await client.query(
            `INSERT INTO wallet_nonces (wallet, next_nonce) VALUES ($1, $2)
             ON CONFLICT (wallet) DO UPDATE SET next_nonce = excluded.next_nonce, updated_at = clock_timestamp()`,
            [key, nextNonce(nonce, result, consumed)],
          );
          await client.query("COMMIT");
        } catch {
          // `send` succeeded, so its result stands: the stored nonce stays cleared and the next
          // call resyncs from the chain, which already counts this transaction.
          broken = true;
        }
        return result;
      } catch (error) {
        // Nothing of this transaction needs keeping: the clear above is already committed.
        await client.query("ROLLBACK").catch(() => (broken = true));
        throw error;
      } finally {
        client.off("error", onError);
        // A broken connection is destroyed rather than returned to the pool.
        client.release(broken);
      }
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
    await transaction(this.#pool, async (client) => {
      await client.query(
        "INSERT INTO nonce_slots (wallet, nonce, purpose, deadline, state, reserves) VALUES ($1, $2, $3, $4, 'pending', $5)",
        [wallet, slot.nonce, slot.purpose, slot.deadline, encodeReserves(slot.reserves, first.hash)],
      );
      await insertBroadcast(client, wallet, slot.nonce, first);
    });
  }

  async reservations(minedAfter: number): Promise<SlotReservation[]> {
    // Two index ranges of nonce_slots_reserving: the pending slots, and those mined after a block.
    const { rows } = await this.#pool.query<{ wallet: string; nonce: string; reserves: string }>(
      `SELECT wallet, nonce, reserves FROM nonce_slots WHERE reserves IS NOT NULL AND state = 'pending'
       UNION ALL
       SELECT wallet, nonce, reserves FROM nonce_slots
       WHERE reserves IS NOT NULL AND state IN ('mined', 'final') AND block_number > $1`,
      [minedAfter],
    );
    return rows.flatMap((row) => decodeReserves(row.reserves, row.wallet, Number(row.nonce)));
  }

  async recordBroadcast(
    wallet: string,
    nonce: number,
    broadcast: Broadcast,
    replaces: string,
    audit?: AuditEntry,
  ): Promise<boolean> {
    const lower = wallet.toLowerCase();
    return transaction(this.#pool, async (client) => {
      // The slot's row lock orders this with every other write to the slot (releaseSlot takes it
      // first too); its last broadcast is read after it, in a statement of its own (a snapshot
      // taken once the lock is held).
      const { rows } = await client.query<{ trade_id: string | null }>(
        "SELECT trade_id FROM nonce_slots WHERE wallet = $1 AND nonce = $2 AND state = 'pending' FOR UPDATE",
        [lower, nonce],
      );
      if (rows.length === 0) return false;
      const last = await client.query<{ hash: string }>(
        "SELECT hash FROM broadcasts WHERE wallet = $1 AND nonce = $2 ORDER BY seq DESC LIMIT 1",
        [lower, nonce],
      );
      if (last.rows[0]?.hash !== replaces.toLowerCase()) return false;
      await insertBroadcast(client, lower, nonce, broadcast);
      await client.query("UPDATE nonce_slots SET updated_at = clock_timestamp() WHERE wallet = $1 AND nonce = $2", [
        lower,
        nonce,
      ]);
      const tradeId = rows[0]!.trade_id;
      if (tradeId !== null) {
        await client.query(
          "UPDATE trades SET tx_hash = $2, raw_tx = $3, updated_at = clock_timestamp() WHERE id = $1",
          [tradeId, broadcast.hash, broadcast.rawTx],
        );
      }
      if (audit !== undefined) await appendAudit(client, audit);
      return true;
    });
  }

  async slot(wallet: string, nonce: number): Promise<NonceSlot | undefined> {
    const lower = wallet.toLowerCase();
    const [slots, broadcasts] = await Promise.all([
      this.#pool.query<SlotRow>(
        `SELECT wallet, nonce, purpose, trade_id, deadline, state, mined_hash, block_number, block_hash, created_at, updated_at
         FROM nonce_slots WHERE wallet = $1 AND nonce = $2`,
        [lower, nonce],
      ),
      this.#pool.query<BroadcastRow>(
        `SELECT ${BROADCAST_COLUMNS} FROM broadcasts b WHERE b.wallet = $1 AND b.nonce = $2 ORDER BY b.seq`,
        [lower, nonce],
      ),
    ]);
    return slots.rows[0] && toSlot(slots.rows[0], broadcasts.rows.map(toBroadcast));
  }

  async openSlots(wallet: string): Promise<NonceSlot[]> {
    const lower = wallet.toLowerCase();
    const [slots, broadcasts] = await Promise.all([
      this.#pool.query<SlotRow>(
        `SELECT wallet, nonce, purpose, trade_id, deadline, state, mined_hash, block_number, block_hash, created_at, updated_at
         FROM nonce_slots WHERE wallet = $1 AND state IN ('pending', 'mined') ORDER BY nonce`,
        [lower],
      ),
      this.#pool.query<BroadcastRow>(
        `SELECT ${BROADCAST_COLUMNS} FROM broadcasts b JOIN nonce_slots s ON s.wallet = b.wallet AND s.nonce = b.nonce
         WHERE s.wallet = $1 AND s.state IN ('pending', 'mined') ORDER BY b.nonce, b.seq`,
        [lower],
      ),
    ]);
    const byNonce = new Map<number, Broadcast[]>();
    for (const row of broadcasts.rows) {
      const nonce = Number(row.nonce);
      let list = byNonce.get(nonce);
      if (list === undefined) {
        list = [];
        byNonce.set(nonce, list);
      }
      list.push(toBroadcast(row));
    }
    // A slot whose broadcasts were not yet committed when read: left for the next look.
    return slots.rows
      .map((row) => toSlot(row, byNonce.get(Number(row.nonce)) ?? []))
      .filter((slot) => slot.broadcasts.length > 0);
  }

  async markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null): Promise<void> {
    const { rowCount } = await this.#pool.query(
      `UPDATE nonce_slots SET state = $3, mined_hash = $4, block_number = $5, block_hash = $6, updated_at = clock_timestamp()
       WHERE wallet = $1 AND nonce = $2`,
      [wallet.toLowerCase(), nonce, state, mined?.hash ?? null, mined?.blockNumber ?? null, mined?.blockHash ?? null],
    );
    if (rowCount !== 1) throw new Error(`nonce ${nonce} of ${wallet.toLowerCase()} has no slot`);
  }

  async finalizeSlots(wallet: string, blockNumber: number): Promise<number> {
    const { rowCount } = await this.#pool.query(
      "UPDATE nonce_slots SET state = 'final', updated_at = clock_timestamp() WHERE wallet = $1 AND state = 'mined' AND block_number <= $2",
      [wallet.toLowerCase(), blockNumber],
    );
    return rowCount ?? 0;
  }

  async releaseSlot(wallet: string, nonce: number, hash: string): Promise<boolean> {
    const lower = wallet.toLowerCase();
    return transaction(this.#pool, async (client) => {
      // The slot's row first, as recordBroadcast takes it: a broadcast recorded meanwhile is counted
      // here, never left behind without its slot.
      const slot = await client.query("SELECT 1 FROM nonce_slots WHERE wallet = $1 AND nonce = $2 FOR UPDATE", [
        lower,
        nonce,
      ]);
      if (slot.rowCount !== 1) return false;
      const { rows } = await client.query<{ hash: string }>(
        "SELECT hash FROM broadcasts WHERE wallet = $1 AND nonce = $2",
        [lower, nonce],
      );
      if (rows.length !== 1 || rows[0]!.hash !== hash.toLowerCase()) return false;
      const released = await client.query<{ trade_id: string | null }>(
        "DELETE FROM nonce_slots WHERE wallet = $1 AND nonce = $2 AND state = 'pending' RETURNING trade_id",
        [lower, nonce],
      );
      if (released.rowCount !== 1) return false;
      await client.query("DELETE FROM broadcasts WHERE hash = $1", [rows[0]!.hash]);
      // Its trade is no longer signed, in the same transaction, where the trade model says so
      // (NonceLedger.releaseSlot; ../transitions.ts).
      // A trade a cancel was asked of is cancelled instead, with the error saying so.
      const tradeId = released.rows[0]?.trade_id;
      if (!tradeId) return true;
      const { rows: asked } = await client.query<{ cancel: TradeCancel | null; approved: boolean }>(
        "SELECT cancel, approval IS NOT NULL AS approved FROM trades WHERE id = $1 FOR UPDATE",
        [tradeId],
      );
      const cancel = asked[0]?.cancel ?? null;
      await client.query(
        `UPDATE trades SET status = $4, error = coalesce($5::json, error), wallet = NULL, nonce = NULL, tx_hash = NULL,
         raw_tx = NULL, deadline = NULL, updated_at = clock_timestamp()
         WHERE id = $1 AND ${applies("releaseSlot")} AND lower(wallet) = $2 AND nonce = $3`,
        [
          tradeId,
          lower,
          nonce,
          tradeStatusAfter("releaseSlot", { cancel, approval: asked[0]?.approved ? true : null }),
          cancel === null ? null : JSON.stringify(unsentCancelledError(cancel)),
        ],
      );
      return true;
    });
  }

  async highestNonce(wallet: string): Promise<number | undefined> {
    const { rows } = await this.#pool.query<{ nonce: string | null }>(
      "SELECT max(nonce)::text AS nonce FROM nonce_slots WHERE wallet = $1",
      [wallet.toLowerCase()],
    );
    const highest = rows[0]?.nonce;
    return highest === null || highest === undefined ? undefined : Number(highest);
  }
}
