/**
 * The service's structured JSON logger (pino): its format, its redaction of secrets, and the
 * access line writer. LogBuffer (log-buffer.ts) and AccessRecord (access-line.ts) are re-exported,
 * so that everything logging offers is imported from here.
 */
import { pino, type DestinationStream, type Level, type Logger } from "pino";

import { SERVICE, accessLine, clock, type AccessRecord } from "./access-line.js";
import { LogBuffer } from "./log-buffer.js";

export type { AccessRecord } from "./access-line.js";
export { LogBuffer } from "./log-buffer.js";

/**
 * Paths pino blanks out wherever they appear in a log line. Request headers are
 * never logged as a whole, so these are a second line of defence: an `api_key`
 * (header or gRPC metadata), an authorization header or a private key that finds
 * its way into a logged object is written as "[redacted]".
 */
export const REDACT_PATHS = [
  "api_key",
  "apiKey",
  "apiKeys",
  "privateKey",
  "privateKeys",
  "authorization",
  "*.api_key",
  "*.apiKey",
  "*.apiKeys",
  "*.privateKey",
  "*.privateKeys",
  "*.authorization",
  "headers.*",
  "*.headers.*",
];

export interface LoggerOptions {
  level?: Level | "silent";
  /**
   * Where the JSON lines go. Default: stdout through a LogBuffer (lines collected, then written
   * with one synchronous write; what is pending is written when the process exits, however it
   * exits). Tests pass a buffer.
   */
  destination?: DestinationStream;
}

/** What every line carries, and how its time and level are written. */
const FORMAT = {
  base: { service: SERVICE },
  timestamp: clock.field,
  formatters: { level: (label: string) => ({ level: label }) },
} as const;

/** The service's structured JSON logger. */
export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    { ...FORMAT, level: options.level ?? "info", redact: { paths: REDACT_PATHS, censor: "[redacted]" } },
    options.destination ?? stdoutLogBuffer(),
  );
}

/**
 * Writes access lines ("request completed") to `log`'s destination, in the JSON pino writes for
 * `log.info({reqId, method, path, httpVersion, status, completed, ms, key}, "request completed")` (key: the
 * access file's name of the request's key, left out without one)
 * (the same level, time, base fields, key order and escaping: test/adapters/shared/logger.test.ts
 * compares them). The fields are the handler's own, none a secret, so the line skips redaction.
 * To a LogBuffer (the service's stdout) the line is written in five parts straight into its
 * bytes (LogBuffer.writeAccess); to any other destination, as one string. Callers check `log`'s
 * level first: this always writes.
 */
export function accessLog(log: Logger): (record: AccessRecord) => void {
  const destination = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]!;
  if (destination instanceof LogBuffer) return (record) => destination.writeAccess(record);
  return (record) => destination.write(accessLine(record));
}

/** The one LogBuffer on stdout, made on first use. */
let stdout: LogBuffer | undefined;
function stdoutLogBuffer(): LogBuffer {
  stdout ??= new LogBuffer();
  return stdout;
}
