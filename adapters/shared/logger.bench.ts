/**
 * Decision 0008 (docs/decisions/0008-log-buffer-access-lines.md): one "request completed" line
 * of a cached price answer, written to /dev/null, by `accessLog` into the service's `LogBuffer`
 * against pino writing `log.info(record, "request completed")` to its synchronous destination
 * buffering as much as the LogBuffer does: `minLength` 32 KiB (`maxWrite` 64 KiB), the LogBuffer's
 * write size and the service's (production) setting; pino at 4 KiB beside it. The pino logger is the service's (same base
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

import { LOG_BUFFER_BYTES } from "./log-buffer.js";
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

/** The service's logger without redaction, on pino's synchronous destination buffering `minLength` bytes. */
const pinoLogger = (minLength: number) =>
  createLogger({
    // sonic-boom wants its largest write above its minimum (16 KiB by default); the LogBuffer writes all it holds.
    destination: pino.destination({ dest: fd, sync: true, minLength, maxWrite: Math.max(16_384, 2 * minLength) }),
  }).child({}, { redact: { paths: [] } });
// Equal buffering, the verdict's: both write to /dev/null once LOG_BUFFER_BYTES (32 KiB, the
// service's setting) are waiting. pino at 4 KiB, the record's earlier comparison and its cheapest
// setting in docs/benchmarks.md (sonic-boom measures its growing string on every line), is beside.
const pinoEqual = pinoLogger(LOG_BUFFER_BYTES);
const pinoSmall = pinoLogger(4096);
const access = accessLog(createLogger({ destination: new LogBuffer({ fd, minLength: LOG_BUFFER_BYTES }) }));

await compare({
  record: "0008",
  subject: "adapters/shared/logger.ts",
  loop: 200,
  cases: {
    pinoLine: { label: "pino log.info, sync 32 KiB", run: () => pinoEqual.info(record(), "request completed") },
    pinoSmall: { label: "pino log.info, sync 4 KiB", run: () => pinoSmall.info(record(), "request completed") },
    ours: { label: "accessLog into LogBuffer at 32 KiB", run: () => access(record()) },
  },
  verdict: ({ pinoLine, pinoSmall, ours }) => ({
    figure: `pino − ours = ${formatNs(pinoLine - ours)} a line at 32 KiB each (${formatNs(pinoSmall - ours)} with pino at 4 KiB)`,
    threshold: "remove at ≤ 500 ns",
    remove: pinoLine - ours <= 500,
  }),
});
