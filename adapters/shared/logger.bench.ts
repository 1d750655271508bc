/**
 * Decision 0008 (docs/decisions/0008-log-buffer-access-lines.md): one "request completed" line
 * of a cached price answer, written to /dev/null, by `accessLog` into the service's `LogBuffer`
 * against pino writing `log.info(record, "request completed")` to the best destination the record
 * measured, its synchronous one with a 4 KiB minimum. The pino logger is the service's (same base
 * fields and per-millisecond clock) without redaction, as access lines were logged before the
 * record (`accessLogger`, commit e8d8826): the service's wildcard redaction alone costs several
 * times a whole line. Remove `LogBuffer` and `accessLog` when pino's line costs at most 0.5 µs
 * more (or when its format changes: test/adapters/shared/logger.test.ts).
 *
 * /dev/null leaves out what the kernel and the log's reader spend per write: the record's own
 * figures come from the service under load (logged − silent, docs/benchmarks.md), where fewer,
 * larger writes save more. This is the process's own share of a line, the part a pino release
 * could change. `npm run bench:micro -- logger`.
 */
import { randomUUID } from "node:crypto";
import { openSync } from "node:fs";

import { pino } from "pino";

import { LogBuffer, accessLog, createLogger, type AccessRecord } from "./logger.js";
import { compare, formatNs } from "./micro-bench.js";

const fd = openSync("/dev/null", "w");
/** Request ids as the service makes them (newRequestId): v4 UUIDs, each one flat string. */
const REQ_IDS = Array.from({ length: 1024 }, () => Buffer.from(randomUUID(), "latin1").toString("latin1"));
let next = 0;
/** A cached price answer's record, a new request each time. */
const record = (): AccessRecord => {
  const i = next++;
  return {
    reqId: REQ_IDS[i & 1023]!,
    method: "GET",
    path: "/api/v1/token/price",
    httpVersion: "1.1",
    status: 200,
    completed: true,
    ms: (150 + (i % 700)) / 1000,
  };
};

const pinoLog = createLogger({ destination: pino.destination({ dest: fd, sync: true, minLength: 4096 }) }).child(
  {},
  { redact: { paths: [] } },
);
const access = accessLog(createLogger({ destination: new LogBuffer({ fd }) }));

await compare({
  record: "0008",
  subject: "adapters/shared/logger.ts",
  loop: 200,
  cases: {
    pinoLine: { label: "pino log.info, sync 4 KiB", run: () => pinoLog.info(record(), "request completed") },
    ours: { label: "accessLog into LogBuffer", run: () => access(record()) },
  },
  verdict: ({ pinoLine, ours }) => ({
    figure: `pino − ours = ${formatNs(pinoLine - ours)} a line`,
    threshold: "remove at ≤ 500 ns",
    remove: pinoLine - ours <= 500,
  }),
});
