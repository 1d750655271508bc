import { InvalidArgumentError } from "../errors.js";
import { keccak256Utf8 } from "../keccak.js";
import type { Address } from "../types.js";

export interface ParseAddressOptions {
  /** Refuse 0x000…000 (for addresses that receive funds, such as `destinatary`). */
  nonZero?: boolean;
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const ZERO = /^0x0{40}$/;

/**
 * The EIP-55 checksummed form of an address: each hex letter is upper case when the
 * matching nibble of keccak256(lowercase hex digits as ASCII) is 8 or more.
 * @param hex40 - the 40 hex digits, without "0x", in any case
 */
function toChecksum(hex40: string): Address {
  const lower = hex40.toLowerCase();
  const hash = keccak256Utf8(lower);
  let out = "";
  for (let i = 0; i < 40; i++) {
    out += parseInt(hash[i]!, 16) >= 8 ? lower[i]!.toUpperCase() : lower[i]!;
  }
  return `0x${out}`;
}

/**
 * Validates an address sent by a client.
 *
 * Accepted: "0x" (lower-case x) followed by exactly 40 hex digits that are either all
 * one case (no checksum claimed) or mixed case with a valid EIP-55 checksum.
 *
 * @param field - the request field, named in the error message
 * @param value - the raw value
 * @returns the EIP-55 checksummed address
 * @throws InvalidArgumentError naming `field` when the value is not such an address,
 *   fails its checksum, or is the zero address while `options.nonZero` is set
 */
export function parseAddress(field: string, value: unknown, options: ParseAddressOptions = {}): Address {
  if (typeof value !== "string" || !ADDRESS.test(value)) {
    throw new InvalidArgumentError(field, "must be a 0x-prefixed 40-hex-digit address");
  }
  const digits = value.slice(2);
  const checksummed = toChecksum(digits);
  const singleCase = digits === digits.toLowerCase() || digits === digits.toUpperCase();
  if (!singleCase && checksummed !== value) {
    throw new InvalidArgumentError(field, "fails its EIP-55 checksum");
  }
  if (options.nonZero && ZERO.test(value)) {
    throw new InvalidArgumentError(field, "must not be the zero address");
  }
  return checksummed;
}
