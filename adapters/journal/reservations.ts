/**
 * A slot's reservations (core's Reservation) as the SQLite and PostgreSQL journals keep them: a
 * JSON object in the slot's `reserves` column, `{"tx", "holds": [{holder, asset, amount}]}`, with
 * the hash of the slot's first transaction (what the process that signed it knows it by), amounts
 * as decimal text (beyond 2^53), addresses lower-case. NULL: the slot holds nothing back (an
 * approval, a filler, a no-op).
 */
import type { Reservation, SlotReservation } from "../../core/index.js";

/** The column's text for `reserves` of the slot whose first transaction is `tx`; null when there are none. */
export function encodeReserves(reserves: readonly Reservation[] | undefined, tx: string): string | null {
  if (reserves === undefined || reserves.length === 0) return null;
  return JSON.stringify({
    tx: tx.toLowerCase(),
    holds: reserves.map(({ holder, asset, amount }) => ({
      holder: holder.toLowerCase(),
      asset: asset.toLowerCase(),
      amount: amount.toString(),
    })),
  });
}

/** The reservations the column's text holds, of the slot of `wallet` at `nonce`. */
export function decodeReserves(text: string | null, wallet: string, nonce: number): SlotReservation[] {
  if (text === null) return [];
  const { tx, holds } = JSON.parse(text) as {
    tx: string;
    holds: Array<{ holder: string; asset: string; amount: string }>;
  };
  return holds.map((r) => ({ wallet, nonce, tx, holder: r.holder, asset: r.asset, amount: BigInt(r.amount) }));
}
