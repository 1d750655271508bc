import { PriceUnavailableError } from "../errors.js";
import type { PricePort } from "../ports/price.port.js";
import { CASH_CURRENCIES, type PriceRecord } from "../types.js";

/**
 * The price operation as the transports call it, and `now()`: the record at hand without waiting,
 * when the port holds a fresh one that has passed the checks before (a cached price), else
 * undefined; callers then call the operation itself.
 */
export type PriceUseCase = (() => Promise<PriceRecord>) & { now(): PriceRecord | undefined };

/** Positive finite rates for exactly CHF, EUR and USD (SPEC 4, rule 3). */
function hasValidRates(rates: Record<string, unknown>): boolean {
  const keys = Object.keys(rates);
  return (
    keys.length === CASH_CURRENCIES.length &&
    CASH_CURRENCIES.every((c) => typeof rates[c] === "number" && Number.isFinite(rates[c]) && rates[c] > 0)
  );
}

/**
 * Builds the price use case: ask the port, and refuse to pass on a record whose
 * rates are not positive finite numbers for exactly CHF, EUR and USD (the discount
 * rates may also be `{}`). Port errors propagate unchanged.
 * @throws PriceUnavailableError when the port returns such a record
 */
export function priceUseCase(price: PricePort): PriceUseCase {
  /** The last record that passed: a caching port hands the same object out again, unchanged. */
  let checked: PriceRecord | undefined;
  const read = async (): Promise<PriceRecord> => {
    const record = await price.getPrice();
    if (record === checked) return record;
    const discount = record.rateWithDiscountForCashCurrency as Record<string, unknown>;
    if (!hasValidRates(record.rateForCashCurrency) || (Object.keys(discount).length > 0 && !hasValidRates(discount))) {
      throw new PriceUnavailableError(
        "the price source returned rates that are not positive numbers for CHF, EUR and USD",
      );
    }
    checked = record;
    return record;
  };
  // Only the record that passed: one the port holds but nobody has checked yet goes through read().
  const now = (): PriceRecord | undefined => {
    const record = price.current?.();
    return record !== undefined && record === checked ? record : undefined;
  };
  return Object.assign(read, { now });
}
