/**
 * `npm start`: runs the service. Without RPC_URL it brings its own chain (see
 * adapters/main.ts); with RPC_URL it trades on that chain. Logs are JSON lines on
 * stdout; the operator banner (API URL, key, ready-to-paste commands) goes to stderr.
 *
 * SIGINT/SIGTERM stop it gracefully: no new requests, in-flight trades finish and are
 * answered, then exit code 0. A signal sent to the whole process group (systemd, Docker,
 * Kubernetes) reaches node twice, directly and through npm's forwarding: every signal after
 * the first is the same shutdown, which keeps draining. Past SHUTDOWN_TIMEOUT_MS + 10 s, or
 * after a bug (an uncaught exception), it exits with code 1.
 *
 * The production build (`npm run build`, then `npm run start:prod`) runs this file compiled,
 * as dist/scripts/start.js, with production dependencies only: no tsx, no Hardhat. It serves
 * an existing chain (RPC_URL); the embedded chain is a development tool and needs them.
 */
import "./require-node.js";

import { ConfigError } from "../adapters/config/env.js";
import { startService, type RunningService } from "../adapters/main.js";
import { banner } from "./banner.js";

async function main(): Promise<void> {
  let service: RunningService;
  try {
    service = await startService({
      embeddedChain: async () => {
        if (import.meta.url.endsWith(".js")) {
          throw new ConfigError([
            "RPC_URL: is required by the production build, which serves an existing chain; set it (see .env.example), or run `npm start` in a checkout with the development dependencies for the embedded chain",
          ]);
        }
        return (await import("./embedded-chain-process.js")).startEmbeddedChainProcess;
      },
    });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`Cannot start: ${error.message}\nSee .env.example for every variable.\n`);
    } else {
      process.stderr.write(`Cannot start: ${(error as Error).message}\n`);
    }
    process.exit(1);
  }
  const { log } = service;
  let stopping: Promise<void> | undefined;
  const stop = (reason: { signal: NodeJS.Signals } | { err: unknown }) => {
    if (stopping !== undefined) {
      if ("signal" in reason) log.info({ signal: reason.signal }, "already shutting down: still draining");
      else log.error({ err: reason.err }, "unexpected error while shutting down");
      return;
    }
    const code = "err" in reason ? 1 : 0;
    if ("err" in reason) log.fatal({ err: reason.err }, "unexpected error: shutting down");
    else log.info({ signal: reason.signal }, "shutting down");
    const deadline = setTimeout(() => {
      log.error({ afterMs: service.config.shutdownTimeoutMs + 10_000 }, "shutdown took too long: exiting");
      process.exit(1);
    }, service.config.shutdownTimeoutMs + 10_000);
    deadline.unref();
    stopping = service.close().then(
      () => {
        log.info("stopped");
        process.exit(code);
      },
      (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => stop({ signal }));
  process.on("uncaughtException", (err) => stop({ err }));
  process.on("unhandledRejection", (err) => stop({ err }));
  process.stderr.write(`${banner(service)}\n`);
}

await main();
