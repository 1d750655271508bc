/**
 * The service as `npm start` runs it, for the tests that start it: metrics on, access logs on,
 * the refused-key throttle on (AUTH_FAILURES_PER_MINUTE's default, which nothing here changes).
 * A test that turns one of them off says why where it does.
 */
import { createServer } from "node:net";

import type { Logger } from "pino";

import { createLogger } from "../../adapters/shared/logger.js";

/**
 * A port nothing listens on now, for METRICS_PORT: "0" would turn the metrics off (and the
 * wrappers they put around the trade port and the journal with them).
 */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => probe.once("error", reject).listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * The service's own logger at LOG_LEVEL's default (info: an access line per request, written by
 * the same code as in production), writing nowhere, so the test's output stays readable.
 */
export function defaultLog(): Logger {
  return createLogger({ level: "info", destination: { write: () => {} } });
}
