/**
 * `npm start`: runs the service. Without RPC_URL it brings its own chain (see
 * adapters/main.ts); with RPC_URL it trades on that chain. Logs are JSON lines on
 * stdout; the operator banner (API URL, key, ready-to-paste commands) goes to stderr.
 * SIGINT/SIGTERM stop it gracefully (in-flight trades finish) with exit code 0.
 */
import closeWithGrace from "close-with-grace";

import { ConfigError } from "../adapters/config/env.js";
import { startService, type RunningService } from "../adapters/main.js";
import { banner } from "./banner.js";

async function main(): Promise<void> {
  let service: RunningService;
  try {
    service = await startService({
      embeddedChain: async () => (await import("./embedded-chain-process.js")).startEmbeddedChainProcess,
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
  closeWithGrace(
    { delay: service.config.shutdownTimeoutMs + 10_000, logger: { error: (message: unknown) => log.error({ detail: String(message) }, "shutdown") } },
    async ({ signal, err }) => {
      if (err) log.fatal({ err }, "unexpected error: shutting down");
      else log.info({ signal }, "shutting down");
      await service.close();
      log.info("stopped");
    },
  );
  process.stderr.write(`${banner(service)}\n`);
}

await main();
