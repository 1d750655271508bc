/**
 * The journal as this process's trades use it, waking the webhook deliverer after each write that
 * can add an event (a trade's status or transaction changed, a delivery asked again), so that an
 * event goes out at once rather than at the deliverer's next poll. The poll stays, for events
 * another instance wrote, and for a wake that came while the deliverer was busy.
 */
import { type Journal, journalOf } from "../shared/journal.js";
import { type Around, aroundPorts, type JournalOperation } from "../shared/journal-wrappers.js";

const WRITES: ReadonlySet<JournalOperation> = new Set<JournalOperation>([
  "markSigned",
  "markSubmitted",
  "markReorged",
  "markMined",
  "markConfirmed",
  "markFailed",
  "markExpired",
  "markCancelled",
  // A trade a cancel was asked of, its send refused: cancelled (TRADE_TRANSITIONS.releaseSlot).
  "releaseSlot",
  "recordBroadcast",
  "retryWebhookDelivery",
  "recordOutsideTransaction",
  "setWatchAlarm",
  "hold",
  "decideApproval",
  "expireApprovals",
]);

/** `journal`, each port wrapped so that its writes above wake the deliverer once they have committed. */
export function wakingJournal(journal: Journal, wake: () => void): Journal {
  const waking: Around = (operation, call) => {
    if (!WRITES.has(operation)) return call();
    // After the write has committed (the event with it); a failed write wrote no event.
    return call().then((written) => {
      wake();
      return written;
    });
  };
  return journalOf(aroundPorts(journal.ports, waking), () => journal.close());
}
