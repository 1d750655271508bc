/** What a trade cancelled once its no-op was mined records as its error (the monitor's, the status request's and the trade's own call). */
import type { TradeRecord } from "../ports/journal.port.js";

/** The error of a trade whose cancel's no-op was mined in place of its transaction. */
export function noopCancelledError(record: Pick<TradeRecord, "cancel">): { code: string; message: string } {
  const by = record.cancel?.requestedBy ?? "its sender";
  return {
    code: "trade_cancelled",
    message: `cancelled by ${by}: the no-op at its nonce was mined in its place; nothing was paid`,
  };
}

/**
 * The error of a trade a cancel was asked of while its send was on its way, whose transaction was
 * then refused and known nowhere (TRADE_TRANSITIONS.releaseSlot): nothing of it can be mined.
 */
export function unsentCancelledError(cancel: { requestedBy: string } | null | undefined): {
  code: string;
  message: string;
} {
  return {
    code: "trade_cancelled",
    message: `cancelled by ${cancel?.requestedBy ?? "its sender"} before its transaction was broadcast; nothing was paid`,
  };
}
