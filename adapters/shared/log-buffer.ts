/**
 * The service's stdout for logs: a pino destination that collects lines into one byte buffer and
 * writes them with few synchronous writes, none lost on exit (docs/decisions/0008-log-buffer-access-lines.md).
 */
import { writeSync } from "node:fs";

import type { DestinationStream } from "pino";

import {
  ACCESS_END_BYTES,
  NUMBER_TEXT_MAX,
  accessLine,
  clock,
  middle,
  writeMillis,
  writePlainQuoted,
  type AccessRecord,
  keyField,
} from "./access-line.js";

/**
 * Lines are collected up to this many bytes (about 120 access lines), then written with one
 * system call: a burst costs one write rather than one a line, and its reader (a log collector on
 * a pipe or socket) wakes once per 32 KiB rather than per line. Half a Linux pipe's 64 KiB, so one
 * write fits while the reader is still on the previous one
 * (docs/decisions/0008-log-buffer-access-lines.md).
 */
export const LOG_BUFFER_BYTES = 32 * 1024;

/**
 * While stdout takes no more (a full pipe), lines wait in memory up to this many bytes; past
 * it, the service waits for the reader, so a stalled collector holds the service rather than its
 * memory growing.
 */
const LOG_MAX_PENDING = 1024 * 1024;

/** While stdout takes no more, how often it is tried again, in ms. */
const LOG_RETRY_MS = 1;

/** A quiet service's lines wait at most this long, in ms. */
export const LOG_FLUSH_MS = 200;

/** Most bytes one UTF-16 code unit takes in UTF-8 (a lone surrogate or a character up to U+FFFF: 3). */
const UTF8_PER_UNIT = 3;
/** Most bytes one UTF-16 code unit takes once JSON-escaped (`\u001f`), then in UTF-8. */
const JSON_UTF8_PER_UNIT = 6;
/** Room kept above `minLength` in the byte buffer, so that a line arriving just below it still fits. */
const HEADROOM_BYTES = 16 * 1024;

/**
 * A pino destination that encodes lines into one byte buffer as they come and writes them to a
 * file descriptor with one synchronous write once `minLength` bytes are there, `flushMs` after
 * the first line of a quiet spell, and when the process exits (process.exit, the end of the event
 * loop, or a fatal error's exit), so no line is lost but to SIGKILL or a crash of Node itself.
 * The buffer is used again after every write that stdout took whole.
 *
 * A non-blocking stdout that takes no more (a full pipe, a collector behind) does not stop the
 * service: what it did not take waits, with the lines after it, and is tried again every
 * `retryMs`. Once `maxPending` bytes wait, the service waits for the reader, as pino's
 * synchronous destination would, rather than the lines piling up in memory. On exit everything
 * is written, waiting for the reader as long as it takes.
 */
export class LogBuffer implements DestinationStream {
  readonly #fd: number;
  readonly #minLength: number;
  readonly #flushMs: number;
  readonly #maxPending: number;
  readonly #retryMs: number;
  /** Where lines are encoded as they come; its first `#used` bytes are lines, after all of `#waiting`. */
  #bytes: Buffer;
  #used = 0;
  /**
   * Bytes stdout did not take when it was full, oldest first; the first may have lost its head to
   * a partial write. Not empty exactly while stdout is full and a retry is due.
   */
  readonly #waiting: Buffer[] = [];
  #waitingBytes = 0;
  #timer: NodeJS.Timeout | undefined;
  /** Whether stdout's reader is gone for good (EPIPE): lines are dropped from then on. */
  #broken = false;
  /** Whether the head of `#waiting[0]` is out: stdout holds a line cut short until the rest follows. */
  #cut = false;

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
    this.#bytes = Buffer.allocUnsafeSlow(minLength + HEADROOM_BYTES);
    process.on("exit", () => this.flushSync());
  }

  /** How many bytes wait to be written. */
  get pendingLength(): number {
    return this.#waitingBytes + this.#used;
  }

  /** A line (pino's write). */
  write(line: string): void {
    if (this.#broken) return;
    const most = line.length * UTF8_PER_UNIT;
    if (most > this.#bytes.length - this.#used) {
      if (most >= this.#bytes.length) {
        this.#writeLong(Buffer.from(line, "utf8"));
        return;
      }
      this.#makeRoom();
    }
    this.#used += this.#bytes.write(line, this.#used, "utf8");
    this.#wrote();
  }

  /**
   * An access line (accessLog), its parts written straight into the bytes: the head made once per
   * millisecond, the reqId (character by character, as it needs no escaping), the middle made once
   * per path, the ms (digit by digit) and the end. A line too long for the room left goes through
   * write() as one string.
   */
  writeAccess(record: AccessRecord): void {
    if (this.#broken) return;
    const head = clock.accessHeadBytes();
    const { reqId } = record;
    const mid = middle(record).bytes;
    const key = keyField(record.key);
    const most =
      head.length +
      2 +
      reqId.length * JSON_UTF8_PER_UNIT +
      mid.length +
      NUMBER_TEXT_MAX +
      key.length * JSON_UTF8_PER_UNIT +
      ACCESS_END_BYTES.length;
    const bytes = this.#bytes;
    let at = this.#used;
    if (most > bytes.length - at) {
      this.write(accessLine(record)); // makes room, or writes a very long line apart
      return;
    }
    bytes.set(head, at);
    at += head.length;
    const quoted = writePlainQuoted(bytes, at, reqId);
    at = quoted === -1 ? at + bytes.write(JSON.stringify(reqId), at, "utf8") : quoted;
    bytes.set(mid, at);
    at += mid.length;
    at = writeMillis(bytes, at, record.ms);
    if (key !== "") at += bytes.write(key, at, "utf8");
    bytes.set(ACCESS_END_BYTES, at);
    this.#used = at + ACCESS_END_BYTES.length;
    this.#wrote();
  }

  /** Writes everything waiting, now, waiting for a full stdout's reader if need be. */
  flushSync(): void {
    this.#drain(true);
  }

  /** After a line: written once `minLength` bytes are there, unless stdout is full (then only past `maxPending`). */
  #wrote(): void {
    if (this.#waiting.length > 0) {
      if (this.pendingLength >= this.#maxPending) this.#drain(true);
    } else if (this.#used >= this.#minLength) this.#drain(false);
    else this.#timer ??= setTimeout(() => this.#drain(false), this.#flushMs).unref();
  }

  /** A line longer than the buffer: after the lines before it, in bytes of its own. */
  #writeLong(line: Buffer): void {
    // The lines before it go first: written now, or set aside while stdout is full.
    this.#makeRoom();
    if (this.#broken) return;
    const stalled = this.#waiting.length > 0;
    this.#waiting.push(line);
    this.#waitingBytes += line.length;
    if (!stalled) this.#drain(false);
    else if (this.pendingLength >= this.#maxPending) this.#drain(true);
  }

  /** Empties the buffer: written now, or, while stdout is full, set aside to wait. */
  #makeRoom(): void {
    if (this.#waiting.length > 0) this.#setAside();
    else this.#drain(false);
  }

  /**
   * Moves the lines in the buffer to `#waiting`: a few are copied out and the buffer kept; a buffer
   * more than half full is handed over whole, and a fresh one taken for the next lines.
   */
  #setAside(): void {
    if (this.#used === 0) return;
    const lines = this.#bytes.subarray(0, this.#used);
    if (this.#used * 2 < this.#bytes.length) this.#waiting.push(Buffer.from(lines));
    else {
      this.#waiting.push(lines);
      this.#bytes = Buffer.allocUnsafeSlow(this.#bytes.length);
    }
    this.#waitingBytes += this.#used;
    this.#used = 0;
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
    while (!this.#broken && this.pendingLength > 0) {
      let whole: boolean;
      try {
        whole = this.#writeOnce();
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== "EAGAIN") {
          this.#drop(code === "EPIPE");
          return;
        }
        // Nothing taken: the lines wait apart, so that the next ones do not try stdout again before the retry.
        if (this.#waiting.length === 0) this.#setAside();
        whole = false;
      }
      if (whole) continue;
      // A non-blocking pipe or socket that is full: its reader is behind.
      if (!block) {
        this.#timer = setTimeout(() => this.#drain(false), this.#retryMs).unref();
        return;
      }
      Atomics.wait(SLEEP, 0, 0, 1);
    }
  }

  /** One write of what waits first; true when the descriptor took all of it. */
  #writeOnce(): boolean {
    if (this.#waiting.length === 0) {
      // The usual case: the lines collected go out in one write, and the buffer is used again.
      const done = writeSync(this.#fd, this.#bytes, 0, this.#used);
      if (done === this.#used) {
        this.#used = 0;
        return true;
      }
      this.#setAside();
      this.#waiting[0] = this.#waiting[0]!.subarray(done);
      this.#waitingBytes -= done;
      this.#cut = done > 0;
      return false;
    }
    const first = this.#waiting[0]!;
    const done = writeSync(this.#fd, first);
    this.#waitingBytes -= done;
    if (done === first.length) {
      this.#waiting.shift();
      this.#cut = false;
      return true;
    }
    this.#waiting[0] = first.subarray(done);
    if (done > 0) this.#cut = true;
    return false;
  }

  /**
   * After a failed write: logging never takes the service down. A reader gone for good (EPIPE) ends
   * the logging; any other failure (a full disk) loses what was waiting, and the lines after it are
   * tried again, on a new line if one was cut short.
   */
  #drop(broken: boolean): void {
    this.#broken ||= broken;
    this.#waiting.length = 0;
    this.#waitingBytes = 0;
    this.#used = 0;
    if (this.#cut && !this.#broken) this.#bytes[this.#used++] = NEWLINE;
    this.#cut = false;
  }
}

const NEWLINE = 0x0a;
const SLEEP = new Int32Array(new SharedArrayBuffer(4));
