import type { PriceRecord } from "../types.js";

/** Reads the token's current rates. Rejects with PriceUnavailableError rather than invent a number. */
export interface PricePort {
  getPrice(): Promise<PriceRecord>;
  /**
   * The record getPrice would give right now without any I/O, when the port holds one (a
   * cache's fresh record), else undefined. Optional: a port without it is always asked.
   */
  current?(): PriceRecord | undefined;
}
