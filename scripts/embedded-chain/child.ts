/**
 * The embedded chain's process (started by parent.ts): runs the chain,
 * sends its log lines and its addresses to the parent, closes it when asked, and exits
 * when the parent goes away.
 */
import { pino } from "pino";

import type { EmbeddedChain } from "../../adapters/dev-mode.js";
import { startEmbeddedChain } from "./chain.js";
import type { FromChainProcess, ToChainProcess } from "./parent.js";

/** Sends a message to the parent; resolves once it is on its way (so exiting next cannot drop it). */
const post = (message: FromChainProcess) =>
  new Promise<void>((resolve) => {
    if (!process.connected) return resolve();
    process.send!(message, undefined, {}, () => resolve());
  });
let chain: EmbeddedChain | undefined;
let stopping = false;

async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  // A client holding a keep-alive connection to the chain's server would keep close() waiting
  // (and the chain answering it): after a moment, this process goes anyway.
  await Promise.race([chain?.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
  await post({ type: "closed" });
  process.disconnect?.();
  process.exit(0);
}

// Hardhat's server reports some failures (a port in use) as an 'error' event nobody
// handles: the parent hears of it as the reason the chain failed, or stopped.
process.on("uncaughtException", (error) => {
  void post({ type: "failed", message: error.message }).finally(() => process.exit(1));
});
// A signal to the whole process group (Ctrl-C, systemd, Docker) reaches this process too: the
// service decides when its chain stops (after the trades in flight), so it is not this one's.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => {});
// The parent is gone (it exited, or was killed): the chain goes too.
process.on("disconnect", () => void stop());
process.on("message", (message: ToChainProcess) => {
  if (message.type === "close") void stop();
  else if (message.type === "start") {
    const { logLevel, ...options } = message.options;
    const log = pino({ level: logLevel }, { write: (line: string) => void post({ type: "log", line }) });
    startEmbeddedChain({ ...options, log }).then(
      (started) => {
        chain = started;
        const { close: _close, ...addresses } = started;
        void post({ type: "ready", chain: addresses });
        if (stopping) void started.close();
      },
      async (error: unknown) => {
        await post({ type: "failed", message: (error as Error).message });
        process.disconnect?.();
        process.exit(1);
      },
    );
  }
});
