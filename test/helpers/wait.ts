/**
 * Polls `probe` every `everyMs` (200 ms by default) until it gives a value (anything but
 * undefined or false), and resolves with it; rejects naming `what` after `ms`.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  ms = 60_000,
  everyMs = 200,
): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
