import { keccak_256 } from "@noble/hashes/sha3.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

/**
 * Keccak-256 (Ethereum's hash, not SHA3-256) of the UTF-8 bytes of `text`.
 * @returns 64 lowercase hex digits, without a 0x prefix.
 */
export function keccak256Utf8(text: string): string {
  return bytesToHex(keccak_256(utf8ToBytes(text)));
}
