/**
 * What a reorg takes from the block watcher (block-watcher.ts): the blocks it read from a number
 * up were replaced, so their hashes are forgotten, and a receipt found in one of them is dropped
 * (its transaction is looked for again).
 */
import type { RpcReceipt } from "./web3-receipt.js";

/**
 * Blocks from `from` up were replaced: forgotten, and a receipt found in one of them dropped
 * (its transaction is looked for again). `deep`: blocks below may have been too; their hashes
 * are forgotten as well (a receipt fetched again from one of them is not refused for a hash
 * that may be stale), and receipts kept from them are fetched again before they are answered
 * (as any kept from an older look is).
 */
export function forgetReplaced(
  ring: Map<number, string>,
  expected: Iterable<{ found?: { receipt: RpcReceipt } | undefined }>,
  from: number,
  deep: boolean,
): void {
  const gone = new Set<string>();
  for (const [number, hash] of ring)
    if (number >= from || deep) {
      if (number >= from) gone.add(hash);
      ring.delete(number);
    }
  for (const entry of expected) {
    const receipt = entry.found?.receipt;
    if (receipt === undefined) continue;
    if (gone.has(receipt.blockHash.toLowerCase()) || Number(receipt.blockNumber) >= from) entry.found = undefined;
  }
}
