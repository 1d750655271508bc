/**
 * The embedded chain in its own process. `npm start` and `npm run bench` run the Hardhat
 * chain (EDR and its JSON-RPC server) in a child process, so that the chain's request
 * handling and the service's do not queue behind each other on one event loop: on a
 * machine with two cores or more, each gets one. The service talks to the chain over its
 * JSON-RPC URL, exactly as it talks to a real node.
 *
 * A process rather than a worker thread: EDR keeps process-wide native state, and a second
 * chain thread started after the first ended crashes the process (it dies with SIGSEGV).
 *
 * The child (child.ts) runs `startEmbeddedChain` and forwards its log lines
 * here, into the caller's logger. `close()` stops the chain and waits for the child to
 * exit. The child exits by itself when this process goes away, even on kill -9 (its IPC
 * channel closes), so no chain is left behind.
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

import type { Logger } from "pino";

import type { EmbeddedChain, EmbeddedChainOptions } from "../../adapters/dev-mode.js";

/** What the child is started with (the logger stays here: its lines are forwarded). */
export interface ChildOptions extends Omit<EmbeddedChainOptions, "log"> {
  logLevel: string;
}

/** Messages from the child. */
export type FromChainProcess =
  | { type: "log"; line: string }
  | { type: "ready"; chain: Omit<EmbeddedChain, "close"> }
  | { type: "failed"; message: string }
  | { type: "closed" };

/** Messages to the child: its options first, then (once ready) the request to close. */
export type ToChainProcess = { type: "start"; options: ChildOptions } | { type: "close" };

const CHILD = fileURLToPath(new URL("./child.ts", import.meta.url));
const STOP_TIMEOUT_MS = 15_000;

export async function startEmbeddedChainProcess(options: EmbeddedChainOptions): Promise<EmbeddedChain> {
  const { log, ...rest } = options;
  // The child loads TypeScript through tsx, resolved from here (not from the working directory).
  const child = fork(CHILD, [], {
    execArgv: ["--import", import.meta.resolve("tsx")],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  let closing = false;

  const ready = new Promise<Omit<EmbeddedChain, "close">>((resolve, reject) => {
    child.on("message", (message: FromChainProcess) => {
      if (message.type === "log") forward(log, message.line);
      else if (message.type === "ready") resolve(message.chain);
      else if (message.type === "failed") reject(new Error(message.message));
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      reject(new Error(`the embedded chain's process exited (${signal ?? `code ${code}`}) before the chain was ready`));
      if (!closing)
        log.error(
          { code, signal },
          "the embedded chain's process stopped: trades and quotes now fail with unavailable",
        );
    });
  });
  child.send({ type: "start", options: { ...rest, logLevel: log.level } } satisfies ToChainProcess);

  let chain: Omit<EmbeddedChain, "close">;
  try {
    chain = await ready;
  } catch (error) {
    closing = true;
    await stopped(child);
    throw error;
  }
  return {
    ...chain,
    ...(child.pid !== undefined ? { pid: child.pid } : {}),
    async close() {
      if (closing) return;
      closing = true;
      if (child.connected) child.send({ type: "close" } satisfies ToChainProcess);
      await stopped(child);
    },
  };
}

/** Waits for the child to exit by itself (it does once its chain is closed); kills it after 15 s. */
async function stopped(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<boolean>((resolve) => child.once("exit", () => resolve(true)));
  const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), STOP_TIMEOUT_MS).unref());
  if (!(await Promise.race([exited, timer]))) {
    child.kill("SIGKILL");
    await exited;
  }
}

/** Writes one of the child's pino lines through the caller's logger, at its level. */
function forward(log: Logger, line: string): void {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    log.warn({ line }, "unparsable log line from the embedded chain");
    return;
  }
  const { level, msg, time: _time, pid: _pid, hostname: _hostname, ...fields } = record;
  const label = typeof level === "number" ? log.levels.labels[level] : undefined;
  const write =
    label !== undefined && label in log ? (log as unknown as Record<string, Logger["info"]>)[label]! : log.info;
  write.call(log, fields, typeof msg === "string" ? msg : "");
}
