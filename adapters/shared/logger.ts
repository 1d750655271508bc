import { writeSync } from "node:fs";

import { pino, type DestinationStream, type Level, type Logger } from "pino";

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

/**
 * Lines are collected up to this many characters (about 15 access lines), then written with one
 * synchronous write: a burst costs one system call rather than one a line, and no thread-pool
 * hand-off as asynchronous writes would (docs/decisions/0008-log-buffer-access-lines.md).
 */
const LOG_BUFFER_BYTES = 4096;

/** A quiet service's lines wait at most this long, in ms. */
const LOG_FLUSH_MS = 200;

/**
 * The time as pino's isoTime writes it (`2026-11-24T16:20:10.595Z`), made once per millisecond: a
 * busy service writes several lines within one, and would otherwise format the date for each.
 * `field` is pino's timestamp field.
 */
const clock = (() => {
  let ms = -1;
  let text = "";
  let field = "";
  const tick = () => {
    const now = Date.now();
    if (now !== ms) {
      ms = now;
      text = new Date(now).toISOString();
      field = `,"time":"${text}"`;
    }
  };
  return {
    iso: () => {
      tick();
      return text;
    },
    field: () => {
      tick();
      return field;
    },
  };
})();

/** What every line carries, and how its time and level are written. */
const FORMAT = {
  base: { service: "token-trading-service" },
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

/** What an access line ("request completed") says of one request. */
export interface AccessRecord {
  reqId: string;
  method: string | undefined;
  /** The path without the query. */
  path: string;
  httpVersion: string;
  status: number;
  /** Whether the whole answer was handed to the OS (false: the connection went first). */
  completed: boolean;
  /** From the request's arrival to the end of its answer, in ms, to the µs. */
  ms: number;
}

/**
 * Writes access lines ("request completed") to `log`'s destination, in the JSON pino writes for
 * `log.info({reqId, method, path, httpVersion, status, completed, ms}, "request completed")`
 * (the same level, time, base fields, key order and escaping: test/adapters/shared/logger.test.ts
 * compares them). The fields are the handler's own, none a secret, so the line skips redaction.
 * The line is one template string, joined with the lines pending in a LogBuffer when they are
 * written. Callers check `log`'s level first: this always writes.
 */
export function accessLog(log: Logger): (record: AccessRecord) => void {
  const destination = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]!;
  return (record) => destination.write(accessLine(record));
}

const ACCESS_PREFIX = `{"level":"info","time":"`;
const ACCESS_BASE = `","service":${JSON.stringify(FORMAT.base.service)},"reqId":`;

/** An access line as one string. */
function accessLine({ reqId, method, path, httpVersion, status, completed, ms }: AccessRecord): string {
  return (
    `${ACCESS_PREFIX}${clock.iso()}${ACCESS_BASE}${quoted(reqId)}${method === undefined ? "" : `,"method":${quoted(method)}`},"path":${quoted(path)},` +
    `"httpVersion":${quoted(httpVersion)},"status":${status},"completed":${completed},"ms":${ms},"msg":"request completed"}\n`
  );
}

/** A JSON string: as it is between quotes when nothing needs escaping (the usual case), else JSON.stringify's. */
function quoted(text: string): string {
  return PLAIN.test(text) ? `"${text}"` : JSON.stringify(text);
}
/** Printable ASCII without a quote or a backslash: what JSON takes as it is in a string. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * A pino destination that collects lines in one string and writes them to a file descriptor
 * with one synchronous write once `minLength` characters are there, `flushMs` after the first
 * line of a quiet spell, and when the process exits (process.exit, the end of the event loop, or
 * a fatal error's exit), so no line is lost but to SIGKILL or a crash of Node itself.
 *
 * Synchronous, as pino's own default destination: a stdout that stops taking lines (a full
 * pipe) holds the service until it takes them again, rather than the lines piling up in memory.
 */
export class LogBuffer implements DestinationStream {
  readonly #fd: number;
  readonly #minLength: number;
  readonly #flushMs: number;
  /** The lines not written yet (V8 joins them once, when they are written). */
  #pending = "";
  #timer: NodeJS.Timeout | undefined;
  /** Whether stdout's reader is gone for good (EPIPE): lines are dropped from then on. */
  #broken = false;

  constructor({
    fd = 1,
    minLength = LOG_BUFFER_BYTES,
    flushMs = LOG_FLUSH_MS,
  }: { fd?: number; minLength?: number; flushMs?: number } = {}) {
    this.#fd = fd;
    this.#minLength = minLength;
    this.#flushMs = flushMs;
    process.on("exit", () => this.flushSync());
  }

  /** A line (pino's write). */
  write(line: string): void {
    if (this.#broken) return;
    this.#pending += line;
    this.#written();
  }

  /** Writes what is pending, now. */
  flushSync(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const text = this.#pending;
    this.#pending = "";
    if (text === "" || this.#broken) return;
    // Written as a string: Node encodes it straight into the write. Only a short write (a full
    // pipe) needs the bytes, to go on where it stopped.
    const total = Buffer.byteLength(text, "utf8");
    let bytes: Buffer | undefined;
    let done = 0;
    while (done < total) {
      try {
        if (bytes === undefined && done === 0) done = writeSync(this.#fd, text);
        else {
          bytes ??= Buffer.from(text, "utf8");
          done += writeSync(this.#fd, bytes, done, total - done);
        }
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        // A non-blocking pipe that is full: wait for its reader, as pino's synchronous destination does.
        if (code === "EAGAIN") {
          bytes ??= Buffer.from(text, "utf8");
          Atomics.wait(SLEEP, 0, 0, 1);
          continue;
        }
        // Logging never takes the service down: a reader gone for good (EPIPE) ends the logging, any
        // other failure (a full disk) loses what was pending, and the lines after it are tried again.
        if (code === "EPIPE") this.#broken = true;
        return;
      }
    }
  }

  #written(): void {
    if (this.#pending.length >= this.#minLength) this.flushSync();
    else if (this.#timer === undefined) this.#timer = setTimeout(() => this.flushSync(), this.#flushMs).unref();
  }
}

const SLEEP = new Int32Array(new SharedArrayBuffer(4));

/** The one LogBuffer on stdout, made on first use. */
let stdout: LogBuffer | undefined;
function stdoutLogBuffer(): LogBuffer {
  stdout ??= new LogBuffer();
  return stdout;
}
