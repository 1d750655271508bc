/**
 * The composition root: startService reads as the list of its steps, each a function in
 * adapters/startup/ a reader can open: the configuration, the chain and its wallets' signers
 * (chain-source.ts), the journal with its upkeep and webhooks (journal.ts), the chain adapter
 * (chain.ts), metrics and the API on one port (transports.ts), the use cases (use-cases.ts), and
 * the shutdown of all of it, last opened first closed (shutdown.ts). scripts/start.ts is the
 * command line around it; what only dev mode needs (the embedded chain, its throwaway journal, a
 * generated api key, .dev/deployment.json) is in dev-mode.ts.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

import type { Logger } from "pino";

import type { DeploymentAddresses } from "./chain/index.js";
import { loadConfig, type AppConfig } from "./config/env.js";
import { type DevDeployment, type StartEmbeddedChain, writeDevDeployment } from "./dev-mode.js";
import { ServiceMetrics } from "./observability/metrics.js";
import { watcherScopes } from "./startup/access.js";
import { createLogger } from "./shared/logger.js";
import { openAccess } from "./startup/access.js";
import { startAudit } from "./startup/audit.js";
import { startChainAdapter, startLifecycle } from "./startup/chain.js";
import { connectChain } from "./startup/chain-source.js";
import { openServiceJournal, type WebhookWatchers } from "./startup/journal.js";
import { Shutdown } from "./startup/shutdown.js";
import { serveApi, serveMetrics } from "./startup/transports.js";
import { wireUseCases } from "./startup/use-cases.js";
import type { ApiServer } from "./transport/index.js";

export { forbiddenDestinataries } from "./startup/use-cases.js";

export interface RunningService {
  mode: "embedded" | "rpc";
  config: AppConfig;
  apiUrl: string;
  /** Prometheus metrics (GET), unless METRICS_PORT is 0. */
  metricsUrl?: string;
  rpcUrl: string;
  chainId: number;
  wallets: string[];
  addresses: DeploymentAddresses;
  /** Set when no API_KEYS/API_KEYS_FILE was given (embedded mode only): the key to call the API with. */
  generatedApiKey?: string;
  /** Embedded mode: the chain's process id, when it runs in its own process. */
  chainPid?: number;
  /** Embedded mode: the file written once the API listened. */
  deploymentFile?: string;
  deployment?: DevDeployment;
  server: ApiServer;
  log: Logger;
  /** Graceful stop: the API first (in-flight trades finish), then the chain adapter, then the embedded chain. */
  close(): Promise<void>;
}

export interface StartServiceOptions {
  env?: NodeJS.ProcessEnv;
  /** Required without RPC_URL; loaded lazily so that production mode never loads Hardhat. */
  embeddedChain?: () => Promise<StartEmbeddedChain>;
  /** Defaults to a pino logger at LOG_LEVEL on stdout. */
  log?: Logger;
  /** Directory .dev/deployment.json is written under. Default: the working directory. */
  rootDir?: string;
}

/**
 * Starts the whole service, step by step; a step that fails closes what the earlier ones opened.
 * @throws ConfigError naming the bad or missing variable (nothing is started then)
 */
export async function startService(options: StartServiceOptions = {}): Promise<RunningService> {
  const config = loadConfig(options.env ?? process.env);
  const log = options.log ?? createLogger({ level: config.logLevel });
  const shutdown = new Shutdown(log);
  try {
    // METRICS_PORT 0 turns metrics off: nothing is counted.
    const metrics = config.metricsPort === 0 ? undefined : new ServiceMetrics();
    const chain = await connectChain(config, options.embeddedChain, log, shutdown);
    // This instance's name in the journal's leases (the wallets it monitors, the trades it accepted).
    const instanceId = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
    const context = { instanceId, metrics, log, shutdown };
    // Which endpoints' keys get the events about the wallets and the swap: the access file's watchers.
    const watchers: WebhookWatchers = { scopes: () => [] };
    // The journal first: it also assigns the wallets' nonces (shared by every instance on PostgreSQL),
    // and keeps the audit log, whose stop record is written once everything opened after it closed.
    const journal = await openServiceJournal(config, { ...context, watchers });
    const audit = startAudit(config, journal.ports.audit, context);
    // ACCESS_FILE, checked against the wallets and coins, and reloaded when it changes (absent: every key a trader).
    const access = await openAccess(config, {
      wallets: chain.signers.map((signer) => signer.address),
      coins: new Map(Object.entries(chain.addresses.stableCoins).map(([symbol, address]) => [address, symbol])),
      log,
      shutdown,
      audit: journal.ports.audit,
      ...(metrics && { observer: metrics.access }),
    });
    if (access !== undefined) {
      watchers.scopes = () => watcherScopes(access.current());
      await watchers.register?.();
    }
    const adapter = await startChainAdapter(config, chain, journal, context);
    const metricsUrl = await serveMetrics(config, metrics, adapter, context);
    const useCases = wireUseCases(config, adapter, journal, chain.addresses, metrics, access?.current);
    await startLifecycle(adapter, journal, log);
    const { server, generatedApiKey } = await serveApi(config, useCases, adapter, { ...context, access });

    const service: RunningService = {
      mode: config.chain.mode,
      config,
      apiUrl: server.url,
      ...(metricsUrl === undefined ? {} : { metricsUrl }),
      rpcUrl: chain.rpcUrl,
      chainId: Number(adapter.chainId),
      wallets: adapter.wallets,
      addresses: chain.addresses,
      ...(generatedApiKey !== undefined ? { generatedApiKey } : {}),
      ...(chain.chainPid !== undefined ? { chainPid: chain.chainPid } : {}),
      server,
      log,
      close: shutdown.run,
    };
    if (config.chain.mode === "embedded") await writeDeployment(service, options.rootDir ?? process.cwd());
    await audit.started();
    return service;
  } catch (error) {
    await shutdown.run();
    throw error;
  }
}

/** Dev mode: .dev/deployment.json, what a developer's scripts need to call the embedded chain and the API. */
async function writeDeployment(service: RunningService, rootDir: string): Promise<void> {
  const { addresses } = service;
  const deployment: DevDeployment = {
    chainId: service.chainId,
    rpcUrl: service.rpcUrl,
    apiUrl: service.apiUrl,
    exchangeWallet: service.wallets[0]!,
    token: addresses.token,
    swap: addresses.swap,
    stableCoins: { ...addresses.stableCoins },
    feeds: { ...addresses.feeds },
  };
  const file = await writeDevDeployment(rootDir, deployment);
  service.deployment = deployment;
  service.deploymentFile = file;
  service.log.info({ file }, "deployment written");
}
