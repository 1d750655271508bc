/**
 * `node --import tsx --import ./scripts/bench-records/register.ts …`: the records bench's service
 * process (scripts/bench-records.ts) loads every `<module>.ab.ts` under adapters/ in place of
 * `<module>.ts`, so that its driver can switch each replacement of docs/decisions/ to the library
 * it replaced between rounds (adapters/shared/records.ab.ts). Nothing else is loaded differently.
 * After tsx's own hooks, so that the paths compared are those of the .ts files.
 */
import { existsSync, globSync } from "node:fs";
import { register } from "node:module";
import { fileURLToPath } from "node:url";

const ROOT = new URL("../../", import.meta.url);

/** The URL of each module that has a stand-in, and its stand-in's. */
const standIns: Record<string, string> = {};
for (const file of globSync("adapters/**/*.ab.ts", { cwd: fileURLToPath(ROOT) })) {
  const module = file.replace(/\.ab\.ts$/, ".ts");
  if (existsSync(new URL(module, ROOT))) standIns[new URL(module, ROOT).href] = new URL(file, ROOT).href;
}

register("./hooks.ts", import.meta.url, { data: { standIns } });
