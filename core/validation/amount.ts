import { InvalidArgumentError } from "../errors.js";

/** Longest amount text looked at; anything longer is refused before any regex runs. */
export const MAX_AMOUNT_LENGTH = 100;

/**
 * A plain decimal: digits, then optionally "." and at least one digit. No sign,
 * exponent, spaces, separators, hex, "Infinity" or "NaN". Leading zeros ("010",
 * "00.5") are accepted: in base 10 they are unambiguous. ".5" and "1." are not.
 */
const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

export interface ParseAmountOptions {
  /** Unit named in the "at most" message, e.g. "USD" or "tokens". */
  unit?: string;
}

function checkDecimals(decimals: number): void {
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 255) {
    throw new RangeError(`decimals must be an integer from 0 to 255, got ${decimals}`);
  }
}

/**
 * Converts a plain decimal text to base units with BigInt arithmetic only.
 *
 * Trailing zeros of the fraction carry no value, so "1.50000000" is fine with 6
 * decimals. Other digits beyond `decimals` are never silently dropped: with
 * `rounding: "exact"` the result is `undefined`; with `"down"` they are cut off
 * (rounding toward zero), and with `"up"` the result is rounded away from zero: both only
 * for limits read from configuration, rounded the way that makes the limit stricter (a
 * maximum down, a minimum up).
 *
 * @returns the amount in base units, or `undefined` when `text` is not a plain
 *   decimal or (exact rounding) needs more than `decimals` fractional digits
 */
export function decimalToBaseUnits(
  text: string,
  decimals: number,
  rounding: "exact" | "down" | "up" = "exact",
): bigint | undefined {
  checkDecimals(decimals);
  if (text.length > MAX_AMOUNT_LENGTH) return undefined;
  const match = DECIMAL.exec(text);
  if (!match) return undefined;
  const whole = match[1]!;
  let fraction = (match[2] ?? "").replace(/0+$/, "");
  let carry = 0n;
  if (fraction.length > decimals) {
    if (rounding === "exact") return undefined;
    if (rounding === "up") carry = 1n; // the cut-off digits are not all zero (trailing zeros were removed)
    fraction = fraction.slice(0, decimals);
  }
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0") + carry;
}

/**
 * Formats base units as a plain decimal without trailing zeros: (1_500_000n, 6) → "1.5".
 */
export function formatUnits(amount: bigint, decimals: number): string {
  checkDecimals(decimals);
  const sign = amount < 0n ? "-" : "";
  const abs = amount < 0n ? -amount : amount;
  const scale = 10n ** BigInt(decimals);
  const fraction = (abs % scale).toString().padStart(decimals, "0").replace(/0+$/, "");
  return `${sign}${abs / scale}${fraction ? `.${fraction}` : ""}`;
}

/**
 * Validates an amount sent by a client and converts it exactly to base units.
 *
 * Rules, in order: a string of at most MAX_AMOUNT_LENGTH characters; a plain decimal
 * (see DECIMAL); at most `decimals` significant fractional digits (never truncated);
 * greater than zero; at most `max`.
 *
 * @param field - the request field, named in the error message
 * @param value - the raw value
 * @param decimals - decimals of the currency the amount is in (18 for the token, 6 for USDT)
 * @param max - the largest accepted amount, in base units (inclusive)
 * @returns the amount in base units
 * @throws InvalidArgumentError naming `field` when any rule fails
 */
export function parseAmount(
  field: string,
  value: unknown,
  decimals: number,
  max: bigint,
  options: ParseAmountOptions = {},
): bigint {
  if (typeof value !== "string") {
    throw new InvalidArgumentError(field, 'must be a string holding a decimal number, such as "10" or "0.5"');
  }
  if (value.length > MAX_AMOUNT_LENGTH) {
    throw new InvalidArgumentError(field, `must be at most ${MAX_AMOUNT_LENGTH} characters long`);
  }
  if (!DECIMAL.test(value)) {
    throw new InvalidArgumentError(field, 'must be a plain decimal number, such as "10" or "0.5"');
  }
  const amount = decimalToBaseUnits(value, decimals, "exact");
  if (amount === undefined) {
    throw new InvalidArgumentError(field, `must have at most ${decimals} decimal places`);
  }
  if (amount <= 0n) {
    throw new InvalidArgumentError(field, "must be greater than 0");
  }
  if (amount > max) {
    const unit = options.unit ? ` ${options.unit}` : "";
    throw new InvalidArgumentError(field, `must be at most ${formatUnits(max, decimals)}${unit}`);
  }
  return amount;
}
