/**
 * What the block watcher (block-watcher.ts) keeps of each transaction it expects, and what it
 * answers a waiter from that: a receipt read at the latest look as it is; one kept from an older
 * look fetched again first (its block may have left the chain since), and not answered if its
 * block is not the one read at its number.
 */
import type { ReceiptReader } from "./receipt-reader.js";
import type { RpcReceipt } from "./web3-receipt.js";

export interface Expected {
  /** Its receipt, and the look (its sequence number, #looks) it was read at. */
  found?: { receipt: RpcReceipt; at: number } | undefined;
  until: number;
  /** Its last lookup failed: it is asked for by transaction at the next look (a block read meanwhile may hold it). */
  recheck?: boolean;
}

/**
 * The receipts of `hashes` found so far, as of `look` (the watcher's latest look, by sequence
 * number): those read at it, and those kept from an older look once fetched again (`reader`);
 * each one fetched again is kept in `expected` (the watcher's entries by lower-case hash).
 */
export async function answerAt(
  hashes: readonly string[],
  look: number,
  expected: Map<string, Expected>,
  reader: ReceiptReader,
): Promise<Map<string, RpcReceipt>> {
  const receipts = new Map<string, RpcReceipt>();
  const stale: Array<{ hash: string; was: Expected["found"] }> = [];
  for (const hash of hashes) {
    const found = expected.get(hash.toLowerCase())?.found;
    if (found === undefined) continue;
    if (found.at === look) receipts.set(hash, found.receipt);
    else stale.push({ hash, was: found });
  }
  // Kept from an older look: its block may have left the chain since; asked again. Fetched after
  // the look's head was seen, so it is in the canonical chain of a head at least that high; one in
  // another block than the one read at its number is not (the node moved to another chain
  // since): not answered, and asked for again (the reader's byTransaction counts it failed).
  if (stale.length > 0) {
    const { found: fresh, failed } = await reader.byTransaction(stale.map(({ hash }) => hash));
    for (const { hash, was } of stale) {
      const key = hash.toLowerCase();
      if (failed.has(key)) continue; // not answered: kept as it was (not reported), asked again next time
      const receipt = fresh.get(key);
      const entry = expected.get(key);
      // Unless a look changed it meanwhile.
      if (entry !== undefined && entry.found === was)
        entry.found = receipt === undefined ? undefined : { receipt, at: look };
      if (receipt !== undefined) receipts.set(hash, receipt);
    }
  }
  return receipts;
}
