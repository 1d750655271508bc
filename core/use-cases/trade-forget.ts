/** Forgetting a trade that signed nothing (trade.use-case.ts), so that its Idempotency-Key works again. */
import type { AuditEntry } from "../ports/audit.port.js";
import type { TradeJournal } from "../ports/journal.port.js";

/**
 * Forgets a trade that signed nothing, so its key works again; first gives its quote back, if it
 * named one. The quote goes back only while the journal shows the record still `accepted` (or
 * gone): a `markSigned` that was written but answered with an error leaves it `signed`, its bytes
 * for the lifecycle monitor to send, and its quote used. It goes back before the record does, so
 * a keyed retry that finds the record gone finds the quote free.
 */
export async function forget(
  journal: TradeJournal,
  id: string,
  release?: () => Promise<void>,
  audit?: AuditEntry,
): Promise<void> {
  if (release !== undefined) {
    const record = await journal.get(id).then(
      (found) => found ?? "gone",
      () => undefined, // the journal cannot say: the quote stays used (nothing is paid twice)
    );
    if (record === "gone" || record?.status === "accepted") await release().catch(() => {});
  }
  await discard(journal, id, audit);
}

/**
 * Forgets a trade that signed nothing, so its key works again. A journal failing for a moment is
 * asked again, 4 times in all over about 0.35 s; one that keeps failing leaves the record to
 * forgetUnsigned (adapters/startup/journal.ts).
 */
async function discard(journal: TradeJournal, id: string, audit?: AuditEntry): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await journal.discard(id, audit);
      return;
    } catch {
      if (attempt === 4) return;
      await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** (attempt - 1)));
    }
  }
}
