/**
 * Runs one tier of the test suite (`npm run test:unit`, `test:chain`, `test:contracts`);
 * `npm test` runs them all at once. A test file's tier follows from what it imports, so a new
 * file lands in the right tier by itself:
 * - contracts: everything under test/contracts/ (Hardhat's in-process chain, the Solidity suite);
 * - chain: a file that starts a chain, a node, a database, a browser or a process of its own
 *   (Hardhat's network, anvil, the whole service, PostgreSQL, playwright, python, spawn);
 * - unit: the rest, on fake ports: seconds, no chain.
 * What a file imports from test/ (its helpers, a shared suite) counts as its own.
 *
 * Usage: node --import tsx scripts/test-tier.ts <unit|chain|contracts> [--list]
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TIERS = ["unit", "chain", "contracts"] as const;
type Tier = (typeof TIERS)[number];

/** What makes a test file more than a unit test: each is a chain, a node, a database or a process. */
const NEEDS_MORE_THAN_PORTS =
  /from "hardhat"|\/helpers\/anvil\.js|\/helpers\/postgres\.js|chain-helpers\.js|adapters\/main\.js|embedded-chain\/|playwright-core|node:child_process|python3/;

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith(".test.ts") ? [relative(ROOT, path)] : [];
  });
}

/** Relative imports of a TypeScript file, as repository paths of .ts files. */
const RELATIVE_IMPORT = /(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)\.js"/g;

/** Each file's text, read once: the helpers are imported by many tests. */
const sources = new Map<string, string>();
function read(file: string): string {
  let source = sources.get(file);
  if (source === undefined) {
    source = readFileSync(join(ROOT, file), "utf8");
    sources.set(file, source);
  }
  return source;
}

/** The source of `file` and of every file under test/ it imports, directly or not. */
function sourceWithHelpers(file: string, seen = new Set<string>()): string {
  if (seen.has(file)) return "";
  seen.add(file);
  const source = read(file);
  let all = source;
  for (const [, path] of source.matchAll(RELATIVE_IMPORT)) {
    const imported = relative(ROOT, resolve(ROOT, dirname(file), `${path}.ts`));
    if (imported.startsWith("test/")) all += sourceWithHelpers(imported, seen);
  }
  return all;
}

export function tierOf(file: string, source: string): Tier {
  if (file.startsWith("test/contracts/")) return "contracts";
  return NEEDS_MORE_THAN_PORTS.test(source) ? "chain" : "unit";
}

const [tier, flag] = process.argv.slice(2);
if (!TIERS.includes(tier as Tier)) {
  console.error(`usage: test-tier.ts <${TIERS.join("|")}> [--list]`);
  process.exit(2);
}
const files = testFiles(join(ROOT, "test"))
  .filter((file) => tierOf(file, sourceWithHelpers(file)) === tier)
  .sort();
if (flag === "--list") {
  console.log(files.join("\n"));
} else if (files.length === 0) {
  // hardhat test without files would run every test.
  console.log(`no ${tier} tests`);
} else {
  const run = spawnSync("npx", ["hardhat", "test", "--no-compile", ...files], { cwd: ROOT, stdio: "inherit" });
  process.exit(run.status ?? 1);
}
