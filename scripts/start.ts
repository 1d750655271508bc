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
 * an existing chain (RPC_URL); the embedded chain is a development tool and needs them. Both
 * first check the Node.js version (scripts/require-node.ts), before loading anything else.
 */
import "./require-node.js";

import type { RunningService } from "../adapters/main.js";

// Loaded only once the Node.js check above has passed: ESM links every static import before it
// runs any module, so an older Node.js would fail on node:sqlite before the check could speak.
const { ConfigError } = await import("../adapters/config/env.js");
const { startService } = await import("../adapters/main.js");
const { banner } = await import("./banner.js");

/** Running as the production build (dist/scripts/start.js, plain node), not from the sources through tsx. */
const COMPILED = import.meta.url.endsWith(".js");

/** Why the production build stops without RPC_URL: one line, without a stack trace. */
class NoEmbeddedChainError extends Error {
  constructor() {
    super(
      "RPC_URL is not set, and the embedded chain needs the development dependencies this production build runs without " +
        "(`npm install`, then `npm start`); set RPC_URL to serve an existing chain (see .env.example)",
    );
  }
}

async function main(): Promise<void> {
  let service: RunningService;
  try {
    service = await startService({
      embeddedChain: async () => {
        if (COMPILED) throw new NoEmbeddedChainError();
        return (await import("./embedded-chain/parent.js")).startEmbeddedChainProcess;
      },
    });
  } catch (error) {
    if (error instanceof NoEmbeddedChainError) {
      process.stderr.write(`Cannot start: ${error.message}\n`);
    } else if (error instanceof ConfigError) {
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
