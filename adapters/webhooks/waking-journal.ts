/**
 * The journal as this process's trades use it, waking the webhook deliverer after each write that
 * can add an event (a trade's status or transaction changed, a delivery asked again), so that an
 * event goes out at once rather than at the deliverer's next poll. The poll stays, for events
 * another instance wrote, and for a wake that came while the deliverer was busy.
 */
const WRITES = new Set([
  "markSigned",
  "markSubmitted",
  "markReorged",
  "markMined",
  "markConfirmed",
  "markFailed",
  "markExpired",
  "recordBroadcast",
  "retryWebhookDelivery",
]);

export function wakingJournal<T extends object>(journal: T, wake: () => void): T {
  return new Proxy(journal, {
    get(target, property) {
      const value = Reflect.get(target, property) as unknown;
      if (typeof value !== "function") return value;
      const method = (value as (...args: unknown[]) => unknown).bind(target);
      if (typeof property !== "string" || !WRITES.has(property)) return method;
      return (...args: unknown[]) => {
        const result = method(...args);
        // After the write has committed (the event with it); a failed write wrote no event.
        if (result instanceof Promise)
          return result.then((written) => {
            wake();
            return written;
          });
        wake();
        return result;
      };
    },
  });
}
