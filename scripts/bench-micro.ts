/**
 * `npm run bench:micro`: every `*.bench.ts` beside the code it justifies (adapters/, core/), each
 * in a Node.js process of its own, one after the other. Each prints one line: its decision record
 * (docs/decisions/), the figure that record's "When to remove it" threshold is about, and whether
 * that says keep or remove (adapters/shared/micro-bench.ts).
 *
 * `npm run bench:micro -- signing-key rpc` runs the benches whose path contains any of the words.
 * The first line says what the figures ran on: on a shared machine only a ratio from one run,
 * with the load beside it, means much.
 */
import { spawnSync } from "node:child_process";
import { globSync, readFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The decision record a bench checks, from its doc comment, so that the lines come in the records' order. */
const recordOf = (file: string) => /docs\/decisions\/(\d{4})/.exec(readFileSync(join(ROOT, file), "utf8"))?.[1] ?? file;

const words = process.argv.slice(2);
const benches = globSync(["adapters/**/*.bench.ts", "core/**/*.bench.ts"], { cwd: ROOT })
  .filter((file) => words.length === 0 || words.some((word) => file.includes(word)))
  .map((file) => ({ file, record: recordOf(file) }))
  .sort((a, b) => a.record.localeCompare(b.record))
  .map(({ file }) => file);
if (benches.length === 0) {
  console.error(`no *.bench.ts file matches ${words.join(", ")}`);
  process.exit(1);
}

console.log(
  `Node ${process.version}, ${cpus()[0]?.model ?? "unknown CPU"} × ${availableParallelism()}, ` +
    `load ${loadavg()[0]!.toFixed(1)}; thresholds from docs/decisions/`,
);
let failed = 0;
for (const file of benches) {
  const { status, signal } = spawnSync(process.execPath, ["--import", "tsx", file], { cwd: ROOT, stdio: "inherit" });
  if (status !== 0) {
    failed++;
    console.error(`${file}: failed (${signal ?? `exit ${status}`})`);
  }
}
process.exit(failed === 0 ? 0 : 1);
