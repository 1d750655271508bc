/**
 * The embedded chain's thread (started by embedded-chain-thread.ts): runs the chain,
 * posts its log lines and its addresses to the parent, and closes it when asked.
 */
import { parentPort, workerData } from "node:worker_threads";

import { pino } from "pino";

import { startEmbeddedChain } from "./embedded-chain.js";
import type { FromChainWorker, ToChainWorker, WorkerOptions } from "./embedded-chain-thread.js";

const port = parentPort!;
const post = (message: FromChainWorker) => port.postMessage(message);
const { logLevel, ...options } = workerData as WorkerOptions;
const log = pino({ level: logLevel }, { write: (line: string) => post({ type: "log", line }) });

try {
  const { close, ...chain } = await startEmbeddedChain({ ...options, log });
  port.on("message", (message: ToChainWorker) => {
    if (message.type !== "close") return;
    close()
      .catch((error: unknown) => log.error({ err: error }, "error while closing the embedded chain"))
      .finally(() => post({ type: "closed" }));
  });
  post({ type: "ready", chain });
} catch (error) {
  post({ type: "failed", message: (error as Error).message });
}
