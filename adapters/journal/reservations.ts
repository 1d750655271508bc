/**
 * A slot's reservations (core's Reservation) as the SQLite and PostgreSQL journals keep them: a
 * JSON array in the slot's `reserves` column, amounts as decimal text (beyond 2^53), addresses
 * lower-case. NULL: the slot holds nothing back (an approval, a filler, a no-op).
 */
import type { Reservation, SlotReservation } from "../../core/index.js";

/** The column's text for `reserves`; null when there are none. */
export function encodeReserves(reserves: readonly Reservation[] | undefined): string | null {
  if (reserves === undefined || reserves.length === 0) return null;
  return JSON.stringify(
    reserves.map(({ holder, asset, amount }) => ({
      holder: holder.toLowerCase(),
      asset: asset.toLowerCase(),
      amount: amount.toString(),
    })),
  );
}

/** The reservations the column's text holds, of the slot of `wallet` at `nonce`. */
export function decodeReserves(text: string | null, wallet: string, nonce: number): SlotReservation[] {
  if (text === null) return [];
  return (JSON.parse(text) as Array<{ holder: string; asset: string; amount: string }>).map((r) => ({
    wallet,
    nonce,
    holder: r.holder,
    asset: r.asset,
    amount: BigInt(r.amount),
  }));
}
