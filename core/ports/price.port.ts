import type { PriceRecord } from "../types.js";

/** Reads the token's current rates. Rejects with PriceUnavailableError rather than invent a number. */
export interface PricePort {
  getPrice(): Promise<PriceRecord>;
}
