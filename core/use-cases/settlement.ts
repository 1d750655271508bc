import { TradeDroppedError, TradeExpiredError, TradeRevertedError } from "../errors.js";
import type { TradeJournal, TradeRecord } from "../ports/journal.port.js";
import type { TradePort, TradeResolution } from "../ports/trade.port.js";
import { noopCancelledError } from "./cancel-errors.js";

/**
 * Asks the chain about a journalled trade's transactions (never sending anything) and records
 * what it says: mined (confirmed, or mined with too few confirmations, or failed if it
 * reverted), expired (its no-op took the nonce), or dropped (another transaction took it). A
 * trade journalled as mined that the chain says is not is left to the lifecycle monitor,
 * which records the reorg; the caller must not answer its receipt.
 *
 * @returns the record as journalled now, and what the chain said (undefined for a trade with
 *   nothing signed)
 * @throws whatever the port throws when the chain cannot be asked (e.g. ChainUnavailableError)
 */
export async function settle(
  journal: TradeJournal,
  trade: TradePort,
  record: TradeRecord,
): Promise<{ record: TradeRecord; resolution?: TradeResolution }> {
  if (record.wallet === null || record.nonce === null || record.broadcasts.length === 0) return { record };
  const resolution = await trade.resolve({ wallet: record.wallet, nonce: record.nonce, broadcasts: record.broadcasts });
  switch (resolution.state) {
    case "mined": {
      const { receipt } = resolution;
      if (!receipt.status) {
        const error = new TradeRevertedError(`transaction ${receipt.transactionHash} reverted when mined`);
        if (record.status !== "failed")
          await journal.markFailed(record.id, { code: error.code, message: error.message });
      } else if (resolution.confirmed) {
        if (record.status !== "confirmed" || record.receipt?.blockHash !== receipt.blockHash)
          await journal.markConfirmed(record.id, receipt);
      } else if (record.status !== "mined" || record.receipt?.blockHash !== receipt.blockHash) {
        await journal.markMined(record.id, receipt);
      }
      break;
    }
    case "expired":
      // A no-op took the nonce: the cancel's, when one was asked of it, else the deadline's.
      if (record.cancel != null) {
        if (record.status !== "cancelled") await journal.markCancelled(record.id, noopCancelledError(record));
      } else if (record.status !== "expired") {
        const error = new TradeExpiredError(record.deadline ?? 0, record.nonce);
        await journal.markExpired(record.id, { code: error.code, message: error.message });
      }
      break;
    case "dropped":
      if (record.status !== "failed") {
        const error = new TradeDroppedError(record.wallet, record.nonce);
        await journal.markFailed(record.id, { code: error.code, message: error.message });
      }
      break;
    case "pending":
      // A receipt journalled before may no longer be on the canonical chain (a reorg took its
      // block): it is not answered. The wallet's lifecycle monitor records the reorg, logs it,
      // and sends the transaction again.
      break;
  }
  return { record: (await journal.get(record.id)) ?? record, resolution };
}

/**
 * A trade failed because its nonce was found taken by another transaction: a verdict from the
 * chain as the endpoints saw it, which a later look corrects if one of its transactions turns
 * out mined after all (an endpoint lagged, a reorg). Every other failure is final.
 */
export function mayBeCorrected(record: TradeRecord): boolean {
  return record.status === "failed" && record.error?.code === "trade_dropped" && record.broadcasts.length > 0;
}
