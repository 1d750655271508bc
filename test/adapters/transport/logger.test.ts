/**
 * The service's logger as `npm start` makes it: asynchronous writes to stdout that are all out
 * by the time the process has exited, however it exits; redaction on every line but the access
 * lines, which share its destination and format.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

const LOGGER = fileURLToPath(new URL("../../../adapters/transport/logger.ts", import.meta.url));

/** Runs `body` in a fresh Node.js (through tsx) with `createLogger` and `accessLogger` in scope; its stdout, as lines. */
function run(body: string): { lines: Array<Record<string, unknown>>; status: number | null } {
  const script = `import { createLogger, accessLogger } from ${JSON.stringify(LOGGER)};\n${body}`;
  const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 60_000 });
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
    expect(lines.map((l) => l["msg"])).to.deep.equal(["before", "unexpected error"]);
    expect((lines[1]!["err"] as { message: string }).message).to.equal("boom");
  });

  it("redacts keys on its lines; access lines share its destination and format", function () {
    const { lines } = run(`
      const log = createLogger();
      log.info({ api_key: "secret-key-0123456789", nested: { privateKey: "0xabc" } }, "with secrets");
      accessLogger(log).info({ reqId: "r1", method: "GET", path: "/api/v1/token/price", status: 200 }, "request completed");
    `);
    expect(lines[0]).to.deep.include({ api_key: "[redacted]", nested: { privateKey: "[redacted]" }, level: "info", service: "token-trading-service" });
    expect(JSON.stringify(lines[0])).not.to.include("secret-key");
    expect(Object.keys(lines[1]!)).to.deep.equal(["level", "time", "service", "reqId", "method", "path", "status", "msg"]);
    // pino's isoTime format, made once per millisecond: the time the line was written.
    for (const line of lines) {
      expect(line["time"]).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Math.abs(Date.parse(line["time"] as string) - Date.now())).to.be.below(30_000);
    }
  });
});
