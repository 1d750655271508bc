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
 * Lines are collected up to this many characters (about 120 access lines), then written with one
 * system call: a burst costs one write rather than one a line, and its reader (a log collector on
 * a pipe or socket) wakes once per 32 KiB rather than per line. Half a Linux pipe's 64 KiB, so one
 * write fits while the reader is still on the previous one
 * (docs/decisions/0008-log-buffer-access-lines.md).
 */
const LOG_BUFFER_BYTES = 32 * 1024;

/**
 * While stdout takes no more (a full pipe), lines wait in memory up to this many characters; past
 * it, the service waits for the reader, so a stalled collector holds the service rather than its
 * memory growing.
 */
const LOG_MAX_PENDING = 1024 * 1024;

/** While stdout takes no more, how often it is tried again, in ms. */
const LOG_RETRY_MS = 1;

/** A quiet service's lines wait at most this long, in ms. */
const LOG_FLUSH_MS = 200;

/** The `service` field of every line. */
const SERVICE = "token-trading-service";
const ACCESS_PREFIX = `{"level":"info","time":"`;
const ACCESS_BASE = `","service":${JSON.stringify(SERVICE)},"reqId":`;

/**
 * The time as pino's isoTime writes it (`2026-11-24T16:20:10.595Z`), made once per millisecond: a
 * busy service writes several lines within one, and would otherwise format the date for each.
 * `field` is pino's timestamp field.
 */
const clock = (() => {
  let ms = -1;
  let field = "";
  let head = "";
  const tick = () => {
    const now = Date.now();
    if (now !== ms) {
      ms = now;
      const iso = new Date(now).toISOString();
      field = `,"time":"${iso}"`;
      // Joined, so that V8 holds it as one flat string rather than a tree of pieces.
      head = [ACCESS_PREFIX, iso, ACCESS_BASE].join("");
    }
  };
  return {
    field: () => {
      tick();
      return field;
    },
    /** An access line up to its reqId's value: `{"level":"info","time":"…","service":"…","reqId":`. */
    accessHead: () => {
      tick();
      return head;
    },
  };
})();

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

/**
 * An access line as one string, of five parts: what precedes the reqId (made once per
 * millisecond), the reqId, the fields from method to `"ms":` (made once per path while they do
 * not change), the ms, and the end.
 */
function accessLine(record: AccessRecord): string {
  return `${clock.accessHead()}${quoted(record.reqId)}${middle(record)}${millis(record.ms)}${ACCESS_END}`;
}

const ACCESS_END = `,"msg":"request completed"}\n`;

/** The middle of an access line, by path, for the method, version, status and completion it was made for. */
const middles = new Map<
  string,
  Pick<AccessRecord, "method" | "httpVersion" | "status" | "completed"> & { text: string }
>();
/** Paths longer than this, and more paths than MIDDLES_KEPT, are not kept. */
const MIDDLE_PATH_KEPT = 256;
const MIDDLES_KEPT = 64;

/** The access line from `,"method":` (or `,"path":` without a method) to `"ms":`. */
function middle(record: AccessRecord): string {
  const { method, path, httpVersion, status, completed } = record;
  const kept = middles.get(path);
  if (
    kept !== undefined &&
    kept.method === method &&
    kept.httpVersion === httpVersion &&
    kept.status === status &&
    kept.completed === completed
  )
    return kept.text;
  const text = [
    method === undefined ? "" : `,"method":${quoted(method)}`,
    `,"path":${quoted(path)},"httpVersion":${quoted(httpVersion)},"status":${status},"completed":${completed},"ms":`,
  ].join("");
  if (path.length <= MIDDLE_PATH_KEPT) {
    if (middles.size >= MIDDLES_KEPT) middles.clear();
    middles.set(path, { method, httpVersion, status, completed, text });
  }
  return text;
}

/**
 * `ms` as JSON writes it. A whole number of µs (what the handler measures) is written from its
 * integer parts: the same text as the number's own (test/adapters/shared/logger.test.ts), at a
 * third of the cost of V8's shortest-double formatting. Any other number is written by V8.
 */
function millis(ms: number): string {
  const micros = Math.round(ms * 1000);
  if (micros / 1000 !== ms || micros < 0 || micros >= 1e12) return JSON.stringify(ms);
  const whole = Math.floor(micros / 1000);
  const fraction = micros - whole * 1000;
  if (fraction === 0) return `${whole}`;
  if (fraction % 100 === 0) return `${whole}.${fraction / 100}`;
  if (fraction % 10 === 0) return `${whole}.${fraction < 100 ? "0" : ""}${fraction / 10}`;
  return `${whole}.${fraction < 10 ? "00" : fraction < 100 ? "0" : ""}${fraction}`;
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
 * A non-blocking stdout that takes no more (a full pipe, a collector behind) does not stop the
 * service: what it did not take waits, with the lines after it, and is tried again every
 * `retryMs`. Once `maxPending` characters wait, the service waits for the reader, as pino's
 * synchronous destination would, rather than the lines piling up in memory. On exit everything
 * is written, waiting for the reader as long as it takes.
 */
export class LogBuffer implements DestinationStream {
  readonly #fd: number;
  readonly #minLength: number;
  readonly #flushMs: number;
  readonly #maxPending: number;
  readonly #retryMs: number;
  /** The lines not handed to the kernel yet (V8 joins them once, when they are written). */
  #pending = "";
  /** The bytes being written (encoded from lines once), or what the descriptor has not taken of them: before `#pending`. */
  #rest: Buffer | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Whether stdout's reader is gone for good (EPIPE): lines are dropped from then on. */
  #broken = false;
  /** Whether part of `#rest` is out: stdout holds a line cut short until the rest follows. */
  #cut = false;
  /** Whether a failed write left a line cut short on stdout: the next write starts a new line. */
  #torn = false;

  constructor({
    fd = 1,
    minLength = LOG_BUFFER_BYTES,
    flushMs = LOG_FLUSH_MS,
    maxPending = LOG_MAX_PENDING,
    retryMs = LOG_RETRY_MS,
  }: { fd?: number; minLength?: number; flushMs?: number; maxPending?: number; retryMs?: number } = {}) {
    this.#fd = fd;
    this.#minLength = minLength;
    this.#flushMs = flushMs;
    this.#maxPending = maxPending;
    this.#retryMs = retryMs;
    process.on("exit", () => this.flushSync());
  }

  /** What waits to be written: characters of lines, and the bytes not yet taken by stdout. */
  get pendingLength(): number {
    return this.#pending.length + (this.#rest?.length ?? 0);
  }

  /** A line (pino's write). */
  write(line: string): void {
    if (this.#broken) return;
    this.#pending += line;
    if (this.#rest !== undefined) {
      // stdout took no more at the last try and the retry timer is armed; only too much waiting
      // makes the service wait.
      if (this.pendingLength >= this.#maxPending) this.#drain(true);
    } else if (this.#pending.length >= this.#minLength) this.#drain(false);
    else this.#timer ??= setTimeout(() => this.#drain(false), this.#flushMs).unref();
  }

  /** Writes everything waiting, now, waiting for a full stdout's reader if need be. */
  flushSync(): void {
    this.#drain(true);
  }

  /**
   * Writes what waits. On a full descriptor (EAGAIN, or a write it took only part of): with
   * `block`, waits a millisecond and goes on; without, keeps the rest and tries again in `retryMs`.
   */
  #drain(block: boolean): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    while (!this.#broken && (this.#rest !== undefined || this.#pending !== "")) {
      let full: boolean;
      try {
        full = this.#writeOnce();
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== "EAGAIN") {
          // Logging never takes the service down: a reader gone for good (EPIPE) ends the logging, any
          // other failure (a full disk) loses what was waiting, and the lines after it are tried again.
          if (code === "EPIPE") this.#broken = true;
          this.#torn ||= this.#cut;
          this.#cut = false;
          this.#pending = "";
          this.#rest = undefined;
          return;
        }
        full = true;
      }
      if (!full) continue;
      // A non-blocking pipe or socket that is full: its reader is behind.
      if (!block) {
        this.#timer = setTimeout(() => this.#drain(false), this.#retryMs).unref();
        return;
      }
      Atomics.wait(SLEEP, 0, 0, 1);
    }
  }

  /** One write of what waits first; true when the descriptor took only part of it. */
  #writeOnce(): boolean {
    if (this.#rest === undefined) {
      // Encoded once, at its exact size: a write the descriptor takes part of, or none of, goes
      // on from these bytes rather than encoding everything that waits again on every try.
      this.#rest = Buffer.from(this.#torn ? `\n${this.#pending}` : this.#pending, "utf8");
      this.#pending = "";
      this.#torn = false;
    }
    const done = writeSync(this.#fd, this.#rest);
    this.#rest = done < this.#rest.length ? this.#rest.subarray(done) : undefined;
    if (done > 0) this.#cut = this.#rest !== undefined;
    return this.#rest !== undefined;
  }
}

const SLEEP = new Int32Array(new SharedArrayBuffer(4));

/** The one LogBuffer on stdout, made on first use. */
let stdout: LogBuffer | undefined;
function stdoutLogBuffer(): LogBuffer {
  stdout ??= new LogBuffer();
  return stdout;
}
