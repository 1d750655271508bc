/**
 * The service as production runs it: `npm run build`'s compiled JavaScript, in a directory of
 * its own with `package.json` and a node_modules holding the production dependencies only
 * (`npm ls --omit=dev`), copied: no tsx, no Hardhat, no compiler can be reached from it.
 * Built once per test process, under the temp directory, and removed when the process exits
 * (about 42 MB each).
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

let built: string | undefined;

/** The production app directory: dist's content, package.json, production node_modules. */
export function productionApp(): string {
  if (built !== undefined) return built;
  const app = mkdtempSync(join(tmpdir(), "token-service-prod-"));
  process.once("exit", () => rmSync(app, { recursive: true, force: true }));
  // What `npm run build` runs, into the app directory instead of the checkout's dist/.
  execFileSync(
    process.execPath,
    [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", join(ROOT, "tsconfig.build.json"), "--outDir", app],
    { cwd: ROOT, stdio: "pipe" },
  );
  copyFileSync(join(ROOT, "package.json"), join(app, "package.json"));
  const listed = execFileSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], {
    cwd: ROOT,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  })
    .split("\n")
    .filter((path) => path.startsWith(join(ROOT, "node_modules")));
  for (const path of listed) {
    const target = join(app, relative(ROOT, path));
    if (existsSync(target)) continue; // inside a package copied already
    mkdirSync(join(target, ".."), { recursive: true });
    cpSync(path, target, { recursive: true, dereference: true });
  }
  built = app;
  return app;
}

/** The command that starts the production build (run it with `cwd: productionApp()`). */
export function productionEntry(): string[] {
  return [process.execPath, join(productionApp(), "scripts", "start.js")];
}
