import { keccak256Utf8 } from "./keccak.js";

/** Strips one leading "0x", as web3.js's `replace('0x', '')` does on RPC values. */
function strip0x(hex: string): string {
  return hex.startsWith("0x") ? hex.slice(2) : hex;
}

/**
 * The `id` web3.js 1.x gives an event log (SPEC 2.3): "log_" followed by the first
 * 8 hex digits of keccak256 over the UTF-8 *text* (not the bytes) of
 * blockHash + transactionHash + logIndex, each without "0x", the index in unpadded
 * lowercase hex (0 → "0", 10 → "a"). Pass the hashes as the node returns them
 * (lowercase); the text is hashed as given.
 *
 * @param blockHash - 0x-prefixed block hash
 * @param transactionHash - 0x-prefixed transaction hash
 * @param logIndex - the log's position in the block, a non-negative integer
 * @returns e.g. "log_1a2b3c4d"
 * @throws RangeError when logIndex is not a non-negative safe integer
 */
export function web3LogId(blockHash: string, transactionHash: string, logIndex: number): string {
  if (!Number.isSafeInteger(logIndex) || logIndex < 0) {
    throw new RangeError(`logIndex must be a non-negative integer, got ${logIndex}`);
  }
  const text = strip0x(blockHash) + strip0x(transactionHash) + logIndex.toString(16);
  return `log_${keccak256Utf8(text).slice(0, 8)}`;
}
