/**
 * What a nonce's mined transaction means, recorded by the lifecycle monitor (monitor.ts): the
 * slot is mined, and its trade failed (reverted), mined, confirmed (enough blocks on top), or
 * expired (its no-op was mined, confirmed), or cancelled (the no-op of a cancel asked of it).
 */
import { noopCancelledError, TradeExpiredError, TradeRevertedError, type NonceSlot } from "../../../core/index.js";
import { toWeb3Receipt, type Outcome } from "../blocks/index.js";
import type { MonitorContext } from "./options.js";

/** Records what was mined at the slot's nonce, and what it means for its trade. */
export async function settle(context: MonitorContext, slot: NonceSlot, found: Outcome): Promise<void> {
  const { journal, settings, log } = context.opts;
  const { receipt } = found;
  await journal.markSlot(context.wallet, slot.nonce, "mined", {
    hash: receipt.transactionHash.toLowerCase(),
    blockNumber: Number(receipt.blockNumber),
    blockHash: receipt.blockHash,
  });
  if (slot.tradeId === null) return;
  const confirmed = found.confirmations >= settings.confirmations;
  if (found.noop) {
    if (!confirmed) return;
    // The no-op of a cancel asked of the trade (trade-cancel.use-case.ts): cancelled, nothing paid.
    const record = await journal.get(slot.tradeId);
    if (record?.cancel != null) {
      log.warn(
        { tradeId: slot.tradeId, wallet: context.wallet, nonce: slot.nonce, hash: receipt.transactionHash },
        "trade cancelled: its cancel's no-op was mined; nothing was paid",
      );
      await journal.markCancelled(slot.tradeId, noopCancelledError(record));
      return;
    }
    const error = new TradeExpiredError(slot.deadline ?? 0, slot.nonce);
    log.warn(
      { tradeId: slot.tradeId, wallet: context.wallet, nonce: slot.nonce, hash: receipt.transactionHash },
      "trade expired: its no-op was mined; nothing was paid",
    );
    await journal.markExpired(slot.tradeId, { code: error.code, message: error.message });
    return;
  }
  const web3 = toWeb3Receipt(receipt);
  if (!web3.status) {
    const error = new TradeRevertedError(`transaction ${receipt.transactionHash} reverted when mined`);
    await journal.markFailed(slot.tradeId, { code: error.code, message: error.message });
  } else if (confirmed) await journal.markConfirmed(slot.tradeId, web3);
  else await journal.markMined(slot.tradeId, web3);
}
