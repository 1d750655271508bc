/**
 * The records bench's A/B switch for decision 0008 (docs/decisions/0008-log-buffer-access-lines.md):
 * loaded in place of logger.ts in the bench's service process only (adapters/shared/records.ab.ts
 * says how). The service's logger on stdout writes through a destination that holds both sides,
 * each buffering as much: the service's `LogBuffer` (32 KiB a write, 200 ms after a quiet spell's
 * first line), and pino's own synchronous destination (`pino.destination`, sonic-boom) with
 * `minLength` 32 KiB (`maxWrite` 64 KiB) and a `periodicFlush` of 200 ms. With the switch on, every line goes to
 * pino's destination, and each access line is written by pino, `log.info(record, "request
 * completed")` through a logger of the service's format without redaction, as before the record
 * (commit e8d8826's parent, `accessLogger`); off, to the `LogBuffer`, the access line by
 * `accessLog` as in the service. What one side holds is written out before the other takes a
 * line, so the lines stay in order. Each access line is counted and timed on the event loop
 * ("0008 line"; the mean includes the writes, the median leaves them out).
 *
 * A logger given a destination of its own (tests) is the service's, unswitched.
 */
import { pino, type DestinationStream, type Logger } from "pino";

import { SERVICE, clock, type AccessRecord } from "./access-line.js";
import { LOG_BUFFER_BYTES, LOG_FLUSH_MS } from "./log-buffer.js";
import {
  LogBuffer,
  REDACT_PATHS,
  accessLog as replacement,
  createLogger as createReplacement,
  type LoggerOptions,
} from "./logger.js";
import { tally, usesLibrary } from "./records.ab.js";

export { LogBuffer, REDACT_PATHS };
export type { AccessRecord, LoggerOptions };

/** Stdout as the service's LogBuffer, or as pino's synchronous destination at the same buffering. */
class SwitchedStdout implements DestinationStream {
  readonly buffer = new LogBuffer();
  readonly library = pino.destination({
    dest: 1,
    sync: true,
    minLength: LOG_BUFFER_BYTES,
    // sonic-boom wants a write larger than its minimum (16 KiB by default); the LogBuffer writes all it holds.
    maxWrite: 2 * LOG_BUFFER_BYTES,
    periodicFlush: LOG_FLUSH_MS,
  });
  #onLibrary = false;

  constructor() {
    process.on("exit", () => this.library.flushSync());
  }

  /** Whether lines go to pino's destination now; what the other side holds is written first. */
  onLibrary(): boolean {
    const now = usesLibrary("0008");
    if (now !== this.#onLibrary) {
      if (this.#onLibrary) this.library.flushSync();
      else this.buffer.flushSync();
      this.#onLibrary = now;
    }
    return now;
  }

  write(line: string): void {
    if (this.onLibrary()) this.library.write(line);
    else this.buffer.write(line);
  }
}

let stdout: SwitchedStdout | undefined;

export function createLogger(options: LoggerOptions = {}): Logger {
  if (options.destination !== undefined) return createReplacement(options);
  stdout ??= new SwitchedStdout();
  return createReplacement({ ...options, destination: stdout });
}

export function accessLog(log: Logger): (record: AccessRecord) => void {
  const destination = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
  if (!(destination instanceof SwitchedStdout)) return replacement(log);
  const ours = (record: AccessRecord) => destination.buffer.writeAccess(record);
  const theirs = pino(
    {
      base: { service: SERVICE },
      timestamp: clock.field,
      formatters: { level: (label: string) => ({ level: label }) },
      level: "info",
    },
    destination.library,
  );
  return (record) => {
    const started = performance.now();
    if (destination.onLibrary()) theirs.info(record, "request completed");
    else ours(record);
    tally("0008 line", 1, performance.now() - started);
  };
}
