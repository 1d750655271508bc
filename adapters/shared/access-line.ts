/**
 * The access line ("request completed") as pino would write it, made by hand and in parts: the
 * service field, the per-millisecond clock shared with the logger, and the line's pieces, each
 * kept or made as cheaply as it can be. The logger (logger.ts) writes it as one string; its
 * LogBuffer (log-buffer.ts) writes the parts straight into its bytes.
 */

/** The `service` field of every line. */
export const SERVICE = "token-trading-service";
const ACCESS_PREFIX = `{"level":"info","time":"`;
const ACCESS_BASE = `","service":${JSON.stringify(SERVICE)},"reqId":`;

/**
 * The time as pino's isoTime writes it (`2026-11-24T16:20:10.595Z`), made once per millisecond: a
 * busy service writes several lines within one, and would otherwise format the date for each.
 * `field` is pino's timestamp field.
 */
export const clock = (() => {
  let ms = -1;
  let field = "";
  let head = "";
  let headBytes = Buffer.alloc(0);
  const tick = () => {
    const now = Date.now();
    if (now !== ms) {
      ms = now;
      const iso = new Date(now).toISOString();
      field = `,"time":"${iso}"`;
      // Joined, so that V8 holds it as one flat string rather than a tree of pieces.
      head = [ACCESS_PREFIX, iso, ACCESS_BASE].join("");
      headBytes = Buffer.from(head, "latin1");
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
    /** accessHead's bytes (it is ASCII). */
    accessHeadBytes: () => {
      tick();
      return headBytes;
    },
  };
})();

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
  /** The access file's name of the request's key (ACCESS_FILE), when it has one: never the key. */
  key?: string | undefined;
}

/**
 * An access line as one string, of five parts: what precedes the reqId (made once per
 * millisecond), the reqId, the fields from method to `"ms":` (made once per path while they do
 * not change), the ms, and the end.
 */
export function accessLine(record: AccessRecord): string {
  return `${clock.accessHead()}${quoted(record.reqId)}${middle(record).text}${millis(record.ms)}${keyField(record.key)}${ACCESS_END}`;
}

/** The key's name after `ms`, as pino writes a field that follows it; nothing without one. */
export function keyField(key: string | undefined): string {
  return key === undefined ? "" : `,"key":${quoted(key)}`;
}

const ACCESS_END = `,"msg":"request completed"}\n`;
export const ACCESS_END_BYTES = Buffer.from(ACCESS_END, "latin1");

/** The middle of an access line, as text and as bytes (UTF-8). */
interface Middle {
  readonly text: string;
  readonly bytes: Buffer;
}

/** The middle of an access line, by path, for the method, version, status and completion it was made for. */
const middles = new Map<string, Pick<AccessRecord, "method" | "httpVersion" | "status" | "completed"> & Middle>();
/** Paths longer than this, and more paths than MIDDLES_KEPT, are not kept. */
const MIDDLE_PATH_KEPT = 256;
const MIDDLES_KEPT = 64;

/** The access line from `,"method":` (or `,"path":` without a method) to `"ms":`. */
export function middle(record: AccessRecord): Middle {
  const { method, path, httpVersion, status, completed } = record;
  const kept = middles.get(path);
  if (
    kept !== undefined &&
    kept.method === method &&
    kept.httpVersion === httpVersion &&
    kept.status === status &&
    kept.completed === completed
  )
    return kept;
  const text = [
    method === undefined ? "" : `,"method":${quoted(method)}`,
    `,"path":${quoted(path)},"httpVersion":${quoted(httpVersion)},"status":${status},"completed":${completed},"ms":`,
  ].join("");
  const made = { method, httpVersion, status, completed, text, bytes: Buffer.from(text, "utf8") };
  if (path.length <= MIDDLE_PATH_KEPT) {
    if (middles.size >= MIDDLES_KEPT) middles.clear();
    middles.set(path, made);
  }
  return made;
}

/**
 * `ms` as JSON writes it. A whole number of µs (what the handler measures) is written from its
 * integer parts: the same text as the number's own (test/adapters/shared/logger.test.ts), at a
 * third of the cost of V8's shortest-double formatting. Any other number is written by V8.
 */
export function millis(ms: number): string {
  const micros = Math.round(ms * 1000);
  if (micros / 1000 !== ms || micros < 0 || micros >= 1e12) return JSON.stringify(ms);
  const whole = Math.floor(micros / 1000);
  const fraction = micros - whole * 1000;
  if (fraction === 0) return `${whole}`;
  if (fraction % 100 === 0) return `${whole}.${fraction / 100}`;
  if (fraction % 10 === 0) return `${whole}.${fraction < 100 ? "0" : ""}${fraction / 10}`;
  return `${whole}.${fraction < 10 ? "00" : fraction < 100 ? "0" : ""}${fraction}`;
}

/**
 * millis(ms), written into `bytes` at `at` (ASCII, one byte a character); answers where it ends.
 * A whole number of µs is written digit by digit, with no string made; any other number as millis
 * makes it. `bytes` has room for NUMBER_TEXT_MAX bytes at `at`.
 */
export function writeMillis(bytes: Buffer, at: number, ms: number): number {
  const micros = Math.round(ms * 1000);
  if (micros / 1000 !== ms || micros < 0 || micros >= 1e12) return at + bytes.write(millis(ms), at, "latin1");
  const whole = Math.floor(micros / 1000);
  const fraction = micros - whole * 1000;
  let end = at + digitsOf(whole);
  for (let rest = whole, i = end - 1; i >= at; i--) {
    bytes[i] = DIGIT_0 + (rest % 10);
    rest = Math.floor(rest / 10);
  }
  if (fraction === 0) return end;
  bytes[end++] = DOT;
  bytes[end++] = DIGIT_0 + Math.floor(fraction / 100);
  if (fraction % 100 === 0) return end;
  bytes[end++] = DIGIT_0 + (Math.floor(fraction / 10) % 10);
  if (fraction % 10 !== 0) bytes[end++] = DIGIT_0 + (fraction % 10);
  return end;
}

/** Most characters JSON.stringify writes for a number (`-1.2345678901234567e-308`). */
export const NUMBER_TEXT_MAX = 32;
const DIGIT_0 = 0x30;
const DOT = 0x2e;

/** How many decimal digits a whole number below 1e9 takes. */
function digitsOf(n: number): number {
  let digits = 1;
  for (let bound = 10; n >= bound && digits < 16; bound *= 10) digits++;
  return digits;
}

/**
 * `text` as a JSON string written into `bytes` at `at` when nothing in it needs escaping (PLAIN):
 * answers where it ends, or -1 when it needs escaping (then what was written does not count).
 * `bytes` has room for its length and two quotes at `at`.
 */
export function writePlainQuoted(bytes: Buffer, at: number, text: string): number {
  let end = at;
  bytes[end++] = QUOTE;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === QUOTE || c === BACKSLASH) return -1;
    bytes[end++] = c;
  }
  bytes[end++] = QUOTE;
  return end;
}
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** A JSON string: as it is between quotes when nothing needs escaping (the usual case), else JSON.stringify's. */
function quoted(text: string): string {
  return PLAIN.test(text) ? `"${text}"` : JSON.stringify(text);
}
/** Printable ASCII without a quote or a backslash: what JSON takes as it is in a string. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
