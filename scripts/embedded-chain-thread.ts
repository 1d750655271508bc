/**
 * The embedded chain on its own thread. `npm start` and `npm run bench` run the Hardhat
 * chain (EDR and its JSON-RPC server) in a worker thread, so the chain's request handling
 * and the service's do not queue behind each other on one event loop: on a machine with
 * two cores or more, each gets a core. The service still talks to the chain over its
 * JSON-RPC URL, exactly as it talks to a real node.
 *
 * The worker (embedded-chain.worker.ts) runs `startEmbeddedChain` and forwards its log
 * lines here, into the caller's logger. `close()` stops the chain and ends the thread.
 */
import { Worker } from "node:worker_threads";

import type { Logger } from "pino";

import type { EmbeddedChain, EmbeddedChainOptions } from "../adapters/main.js";

/** What the worker is started with (the logger stays here: its lines are forwarded). */
export interface WorkerOptions extends Omit<EmbeddedChainOptions, "log"> {
  logLevel: string;
}

/** Messages from the worker. */
export type FromChainWorker =
  | { type: "log"; line: string }
  | { type: "ready"; chain: Omit<EmbeddedChain, "close"> }
  | { type: "failed"; message: string }
  | { type: "closed" };

export type ToChainWorker = { type: "close" };

const WORKER = new URL("./embedded-chain.worker.ts", import.meta.url);

export async function startEmbeddedChainThread(options: EmbeddedChainOptions): Promise<EmbeddedChain> {
  const { log, ...rest } = options;
  const workerData: WorkerOptions = { ...rest, logLevel: log.level };
  // The worker loads TypeScript through the same tsx loader as this process (resolved from
  // here, so it does not depend on the working directory).
  const worker = new Worker(WORKER, { workerData, execArgv: ["--import", import.meta.resolve("tsx")] });
  let closing = false;
  let onClosed: (() => void) | undefined;

  const ready = new Promise<Omit<EmbeddedChain, "close">>((resolve, reject) => {
    worker.on("message", (message: FromChainWorker) => {
      if (message.type === "log") forward(log, message.line);
      else if (message.type === "ready") resolve(message.chain);
      else if (message.type === "failed") reject(new Error(message.message));
      else if (message.type === "closed") onClosed?.();
    });
    worker.on("error", (error) => {
      reject(error);
      log.error({ err: error }, "the embedded chain's thread failed");
    });
    worker.on("exit", (code) => {
      reject(new Error(`the embedded chain's thread exited with code ${code} before the chain was ready`));
      if (!closing) log.error({ code }, "the embedded chain's thread stopped: trades and quotes now fail with unavailable");
    });
  });

  let chain: Omit<EmbeddedChain, "close">;
  try {
    chain = await ready;
  } catch (error) {
    closing = true;
    await worker.terminate();
    throw error;
  }
  return {
    ...chain,
    async close() {
      if (closing) return;
      closing = true;
      const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
      const closed = new Promise<void>((resolve) => (onClosed = resolve));
      worker.postMessage({ type: "close" } satisfies ToChainWorker);
      // The chain closes its server and connection, then the thread is ended: a timer or
      // socket left behind by Hardhat must not keep it (and the process) alive.
      await Promise.race([closed, exited, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
      await worker.terminate();
      await exited;
    },
  };
}

/** Writes one of the worker's pino lines through the caller's logger, at its level. */
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
  const write = label !== undefined && label in log ? (log as unknown as Record<string, Logger["info"]>)[label]! : log.info;
  write.call(log, fields, typeof msg === "string" ? msg : "");
}
