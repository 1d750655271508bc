/**
 * The service's logger as `npm start` makes it: buffered writes to stdout that are all out by
 * the time the process has exited, however it exits; redaction on every line but the access
 * lines, which share its destination and are written as pino would write them.
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import fc from "fast-check";
import { pino } from "pino";

import { millis, writeMillis } from "../../../adapters/shared/access-line.js";
import { LogBuffer, accessLog, createLogger, type AccessRecord } from "../../../adapters/shared/logger.js";

const LOGGER = fileURLToPath(new URL("../../../adapters/shared/logger.ts", import.meta.url));

/** Runs `body` in a fresh Node.js (through tsx) with `createLogger` and `accessLog` in scope; its stdout, as lines. */
function run(body: string): { lines: Array<Record<string, unknown>>; status: number | null } {
  const script = `import { createLogger, accessLog } from ${JSON.stringify(LOGGER)};\n${body}`;
  const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 60_000,
  });
  if (child.error) throw child.error;
  const lines = child.stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { lines, status: child.status };
}

describe("the service's logger", function () {
  this.timeout(60_000);

  it("writes every line before the process exits, even on process.exit right after a burst", function () {
    const { lines, status } = run(`
      const log = createLogger();
      for (let i = 0; i < 5000; i++) log.info({ i }, "line");
      log.fatal("last words");
      process.exit(3);
    `);
    expect(status).to.equal(3);
    expect(lines).to.have.length(5001);
    expect(lines[4999]).to.deep.include({ i: 4999, msg: "line" });
    expect(lines[5000]).to.deep.include({ level: "fatal", msg: "last words", service: "token-trading-service" });
  });

  it("writes the lines of an uncaught exception's exit", function () {
    const { lines, status } = run(`
      const log = createLogger();
      process.on("uncaughtException", (err) => { log.fatal({ err }, "unexpected error"); process.exit(1); });
      log.info("before");
      setTimeout(() => { throw new Error("boom"); }, 10);
    `);
    expect(status).to.equal(1);
    expect(lines.map((l) => l.msg)).to.deep.equal(["before", "unexpected error"]);
    expect((lines[1]!.err as { message: string }).message).to.equal("boom");
  });

  it("redacts keys on its lines; access lines share its destination and format", function () {
    const { lines } = run(`
      const log = createLogger();
      log.info({ api_key: "secret-key-0123456789", nested: { privateKey: "0xabc" } }, "with secrets");
      accessLog(log)({ reqId: "r1", method: "GET", path: "/api/v1/token/price", httpVersion: "1.1", status: 200, completed: true, ms: 0.25 });
    `);
    expect(lines[0]).to.deep.include({
      api_key: "[redacted]",
      nested: { privateKey: "[redacted]" },
      level: "info",
      service: "token-trading-service",
    });
    expect(JSON.stringify(lines[0])).not.to.include("secret-key");
    expect(Object.keys(lines[1]!)).to.deep.equal([
      "level",
      "time",
      "service",
      "reqId",
      "method",
      "path",
      "httpVersion",
      "status",
      "completed",
      "ms",
      "msg",
    ]);
    // pino's isoTime format, made once per millisecond: the time the line was written.
    for (const line of lines) {
      expect(line.time).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Math.abs(Date.parse(line.time as string) - Date.now())).to.be.below(30_000);
    }
  });

  it("writes lines longer than its buffer, and a quiet service's lines within the flush interval", function () {
    const { lines } = run(`
      const log = createLogger();
      log.info({ big: "x".repeat(50_000) }, "long");
      log.info("short");
      setTimeout(() => { process.stderr.write("waited"); }, 400);
    `);
    expect(lines.map((l) => l.msg)).to.deep.equal(["long", "short"]);
    expect((lines[0]!.big as string).length).to.equal(50_000);
  });
});

describe("the service's logger on a full pipe", function () {
  this.timeout(60_000);

  it("waits for a slow reader of a non-blocking pipe and writes every byte once, in order, multi-byte characters included", async function () {
    const dir = mkdtempSync(join(tmpdir(), "log-fifo-"));
    const fifo = join(dir, "fifo");
    const out = join(dir, "out");
    try {
      expect(spawnSync("mkfifo", [fifo]).status).to.equal(0);
      // This process holds a reading end so that the writing end opens; the reader that drains the
      // pipe starts late, so the pipe (64 KiB) fills and writes come back short or with EAGAIN.
      const held = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
      const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      const reader = spawn("sh", ["-c", `sleep 0.3; cat "${fifo}" > "${out}"`], { stdio: "ignore" });
      const buffer = new LogBuffer({ fd, minLength: 300_000 });
      let expected = "";
      for (let i = 0; i < 6_000; i++) {
        const line = `{"i":${i},"text":"prix ${"é€😀".repeat(i % 7)} ${"x".repeat(i % 97)}"}\n`;
        buffer.write(line);
        expected += line;
      }
      buffer.flushSync();
      closeSync(fd);
      closeSync(held);
      await new Promise((resolve) => reader.once("exit", resolve));
      const written = readFileSync(out, "utf8");
      expect(written.length).to.equal(expected.length);
      expect(written === expected, "the bytes read are the bytes written").to.equal(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the service's logger on a full pipe, under load", function () {
  this.timeout(60_000);

  /** A FIFO in a fresh directory, its path and the directory's; removed by the caller. */
  const fifoIn = (): { dir: string; fifo: string } => {
    const dir = mkdtempSync(join(tmpdir(), "log-fifo-"));
    const fifo = join(dir, "fifo");
    expect(spawnSync("mkfifo", [fifo]).status).to.equal(0);
    return { dir, fifo };
  };
  /**
   * Reads a FIFO's non-blocking end as the buffer's retries fill it, until nothing waits in the
   * buffer or the pipe: everything the buffer wrote, in the order read.
   */
  const readAll = async (reading: number, buffer: LogBuffer): Promise<Buffer> => {
    const read: Buffer[] = [];
    const chunk = Buffer.alloc(65_536);
    for (;;) {
      try {
        const n = readSync(reading, chunk);
        read.push(Buffer.from(chunk.subarray(0, n)));
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).to.equal("EAGAIN");
        if (buffer.pendingLength === 0) return Buffer.concat(read);
        await new Promise((resolve) => setTimeout(resolve, 2)); // the retry timer writes more
      }
    }
  };
  /** Lines of 40 to 400 bytes, multi-byte characters included. */
  const line = (i: number) => `{"i":${i},"text":"prix ${"é€😀".repeat(i % 7)} ${"x".repeat(i % 331)}"}\n`;

  it("does not hold the service while nobody reads: lines wait, then are written once, in order, when read", async function () {
    const { dir, fifo } = fifoIn();
    // This test is the pipe's only reader, and reads nothing until every line is written: a
    // destination that waited for the reader would wait for ever.
    const reading = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    try {
      const buffer = new LogBuffer({ fd, minLength: 4096, retryMs: 1, maxPending: 64 * 1024 * 1024 });
      let expected = "";
      for (let i = 0; i < 15_000; i++) {
        buffer.write(line(i));
        expected += line(i);
      }
      // A pipe holds 64 KiB on 4 KiB pages, 1 MiB on 64 KiB pages.
      const bytes = Buffer.byteLength(expected);
      expect(bytes, "more than a pipe holds").to.be.greaterThan(3 * 1024 * 1024);
      expect(buffer.pendingLength, "what the full pipe did not take waits").to.be.greaterThan(
        bytes - 1024 * 1024 - 4096,
      );

      const read = await readAll(reading, buffer);
      expect(buffer.pendingLength).to.equal(0);
      expect(read.toString("utf8") === expected, "the bytes read are the bytes written").to.equal(true);
    } finally {
      closeSync(fd);
      closeSync(reading);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps order while nobody reads, with lines longer than its buffer and access lines among the rest", async function () {
    const { dir, fifo } = fifoIn();
    const reading = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    try {
      // A 4 KiB minimum makes a 20 KiB buffer: lines of 8,000 characters and more go apart.
      const buffer = new LogBuffer({ fd, minLength: 4096, retryMs: 1, maxPending: 64 * 1024 * 1024 });
      const access = accessLog(createLogger({ destination: buffer }));
      const plain = new Map<number, string>();
      for (let i = 0; i < 6_000; i++) {
        if (i % 3 === 0) {
          access({
            reqId: `r${i}`,
            method: "GET",
            path: "/healthz",
            httpVersion: "1.1",
            status: 200,
            completed: true,
            ms: 0.5,
          });
        } else {
          const text = i % 10 === 1 ? "é".repeat(8_000 + (i % 7)) : line(i);
          const out = `{"i":${i},"text":${JSON.stringify(text)}}\n`;
          plain.set(i, out);
          buffer.write(out);
        }
      }
      expect(buffer.pendingLength, "the pipe took no more").to.be.greaterThan(1024 * 1024);
      const lines = (await readAll(reading, buffer)).toString("utf8").split("\n").slice(0, -1);
      expect(lines).to.have.length(6_000);
      lines.forEach((text, i) => {
        if (i % 3 === 0) expect(JSON.parse(text)).to.include({ reqId: `r${i}`, msg: "request completed" });
        else expect(`${text}\n` === plain.get(i), `line ${i}`).to.equal(true);
      });
    } finally {
      closeSync(fd);
      closeSync(reading);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("waits for a slow reader once maxPending bytes wait, so its memory stays bounded", async function () {
    const { dir, fifo } = fifoIn();
    const out = join(dir, "out");
    const held = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    const reader = spawn("sh", ["-c", `sleep 0.3; cat "${fifo}" > "${out}"`], { stdio: "ignore" });
    try {
      const maxPending = 200_000;
      const buffer = new LogBuffer({ fd, minLength: 4096, maxPending });
      let expected = "";
      let most = 0;
      for (let i = 0; i < 12_000; i++) {
        buffer.write(line(i));
        expected += line(i);
        most = Math.max(most, buffer.pendingLength);
      }
      expect(Buffer.byteLength(expected), "several times maxPending").to.be.greaterThan(5 * maxPending);
      expect(most, "lines waited").to.be.greaterThan(65_536);
      expect(most, "at most maxPending and a line waited").to.be.at.most(maxPending + 1_000);
      buffer.flushSync();
      expect(buffer.pendingLength).to.equal(0);
      closeSync(fd);
      closeSync(held);
      await new Promise((resolve) => reader.once("exit", resolve));
      expect(readFileSync(out, "utf8") === expected, "the bytes read are the bytes written").to.equal(true);
    } finally {
      reader.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the service's logger when stdout's reader is gone", function () {
  this.timeout(60_000);

  it("drops its lines (EPIPE) and the process goes on, exiting as it means to", async function () {
    const script = `import { createLogger, accessLog } from ${JSON.stringify(LOGGER)};
      const log = createLogger();
      const access = accessLog(log);
      let n = 0;
      const timer = setInterval(() => {
        for (let i = 0; i < 200; i++) {
          log.info({ n: n++ }, "line");
          access({ reqId: "r" + n, method: "GET", path: "/healthz", httpVersion: "1.1", status: 200, completed: true, ms: 0.1 });
        }
      }, 5);
      setTimeout(() => { clearInterval(timer); log.info("last"); process.stderr.write("alive after " + n + " lines"); process.exit(0); }, 600);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.destroy(); // the reader goes away at once
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(stderr).to.match(/alive after \d{4,} lines$/);
    expect(code).to.equal(0);
  });
});

describe("access lines", function () {
  const record = fc.record({
    reqId: fc.oneof(fc.uuid(), fc.string({ unit: "grapheme", maxLength: 130 })),
    method: fc.option(fc.oneof(fc.constantFrom("GET", "POST", "OPTIONS"), fc.string()), { nil: undefined }),
    path: fc.oneof(
      fc.constant("/api/v1/token/price"),
      fc.string({ unit: "binary", maxLength: 300 }),
      fc.string({ unit: "grapheme-ascii" }),
    ),
    httpVersion: fc.constantFrom("1.1", "2.0", "1.0"),
    status: fc.integer({ min: 100, max: 599 }),
    completed: fc.boolean(),
    ms: fc.oneof(
      fc.double({ min: 0, max: 1e6, noNaN: true }),
      fc.integer({ min: 0, max: 1e9 }).map((us) => us / 1000),
    ),
    key: fc.option(fc.oneof(fc.constant("desk-eu"), fc.string({ unit: "grapheme", maxLength: 64 })), {
      nil: undefined,
    }),
  });

  /** pino's own line for the record, time taken from ours (both are the same millisecond's clock, formatted once per ms). */
  function pinoLine(r: AccessRecord, time: string): string {
    let out = "";
    const log = pino(
      {
        base: { service: "token-trading-service" },
        timestamp: () => `,"time":"${time}"`,
        formatters: { level: (label: string) => ({ level: label }) },
      },
      {
        write: (line: string) => {
          out += line;
        },
      },
    );
    const fields: Record<string, unknown> = { ...r };
    log.info(fields, "request completed");
    return out;
  }

  it("are written exactly as pino writes them, escaping included", function () {
    const dir = mkdtempSync(join(tmpdir(), "access-"));
    const file = join(dir, "log");
    const fd = openSync(file, "w");
    const buffer = new LogBuffer({ fd, minLength: 1024 });
    const access = accessLog(createLogger({ destination: buffer }));
    let read = 0;
    try {
      fc.assert(
        fc.property(record, (r) => {
          access(r);
          buffer.flushSync();
          const all = readFileSync(file);
          const line = all.subarray(read).toString("utf8");
          read = all.length;
          const time = (JSON.parse(line) as { time: string }).time;
          expect(line).to.equal(pinoLine(r, time));
        }),
        { numRuns: 500, seed: 1124 },
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("write a whole number of µs as the number's own text, for every µs in the first 100 s and beyond", function () {
    let out = "";
    const access = accessLog(createLogger({ destination: { write: (line: string) => (out = line) } }));
    const written = (ms: number) => {
      access({ reqId: "r", method: "GET", path: "/", httpVersion: "1.1", status: 200, completed: true, ms });
      return out.slice(out.indexOf(`"ms":`) + 5, out.indexOf(`,"msg"`));
    };
    for (let micros = 0; micros < 100_000_000; micros += micros < 2_000_000 ? 1 : 997) {
      const ms = micros / 1000;
      if (written(ms) !== JSON.stringify(ms)) expect(written(ms)).to.equal(JSON.stringify(ms));
    }
    for (const ms of [999_999_999.999, 1e9, 1e12 + 0.5, 0.1 + 0.2, -0.001, -0, 1e-7, 123.4567, 1e21, NaN, Infinity]) {
      expect(written(ms), String(ms)).to.equal(JSON.stringify(ms));
    }
  });

  it("write the ms into a LogBuffer's bytes as the same text, digit by digit, for every µs in the first 100 s and beyond", function () {
    const bytes = Buffer.alloc(64);
    const written = (ms: number) => bytes.toString("latin1", 8, writeMillis(bytes, 8, ms));
    for (let micros = 0; micros < 100_000_000; micros += micros < 2_000_000 ? 1 : 997) {
      const ms = micros / 1000;
      if (written(ms) !== millis(ms)) expect(written(ms)).to.equal(millis(ms));
    }
    for (const ms of [999_999_999.999, 1e9, 1e12 + 0.5, 0.1 + 0.2, -0.001, -0, 1e-7, 123.4567, 1e21, NaN, Infinity]) {
      expect(written(ms), String(ms)).to.equal(JSON.stringify(ms));
    }
  });

  it("are the same string on any other destination", function () {
    let out = "";
    const destination = {
      write: (line: string) => {
        out = line;
      },
    };
    const access = accessLog(createLogger({ destination }));
    fc.assert(
      fc.property(record, (r) => {
        access(r);
        expect(out).to.equal(pinoLine(r, (JSON.parse(out) as { time: string }).time));
      }),
      { numRuns: 300, seed: 2411 },
    );
  });
});
