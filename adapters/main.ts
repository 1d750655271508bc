/**
 * The composition root: reads the configuration, builds the chain adapter (on RPC_URL, or on
 * the embedded chain of dev mode), wires the use cases, and serves every protocol on one port.
 * scripts/start.ts is the command line around it; what only dev mode needs (the embedded
 * chain, its throwaway journal, a generated api key, .dev/deployment.json) is in dev-mode.ts.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { join } from "node:path";

import type { Logger } from "pino";

import { ChainUnavailableError, createUseCases } from "../core/index.js";
import {
  createChainAdapter,
  createRpcProvider,
  keystoreSigner,
  KeystoreError,
  rawKeySigner,
  redactUrl,
  type ChainAdapter,
  type DeploymentAddresses,
  type TransactionSigner,
} from "./chain/index.js";
import { readDeploymentFile } from "./config/deployment-file.js";
import { ConfigError, loadConfig, type AppConfig, type RpcChainConfig } from "./config/env.js";
import {
  type DevDeployment,
  generateApiKey,
  startDevChain,
  type StartEmbeddedChain,
  temporaryJournalDir,
  writeDevDeployment,
} from "./dev-mode.js";
import { openJournal } from "./journal/index.js";
import { createLogger } from "./shared/logger.js";
import { ServiceMetrics } from "./observability/metrics.js";
import { createApiKeyVerifier } from "./transport/api-key.js";
import { TrustedProxies } from "./transport/client-address.js";
import { createHttpHandler } from "./transport/http-handler.js";
import { startServer, type ApiServer } from "./transport/server.js";
import { WebhookDeliverer } from "./webhooks/deliverer.js";
import { wakingJournal } from "./webhooks/waking-journal.js";

/** How long after its expiry a quote is kept (a late trade naming it is told quote_expired), then swept: 10 minutes. */
const QUOTE_SWEEP_GRACE_MS = 600_000;

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
 * Starts the whole service.
 * @throws ConfigError naming the bad or missing variable (nothing is started then)
 */
export async function startService(options: StartServiceOptions = {}): Promise<RunningService> {
  const config = loadConfig(options.env ?? process.env);
  const log = options.log ?? createLogger({ level: config.logLevel });
  const closers: Array<() => Promise<void>> = [];
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) {
      await close().catch((error: unknown) => log.error({ err: error }, "error while closing"));
    }
  };

  // METRICS_PORT 0 turns metrics off: nothing is counted.
  const metrics = config.metricsPort === 0 ? undefined : new ServiceMetrics();
  let metricsUrl: string | undefined;
  try {
    let rpcUrl: string;
    let rpcUrls: string[];
    let addresses: DeploymentAddresses;
    let signers: TransactionSigner[];
    let embeddedChainId: number | undefined;
    /** The chain the deployment file says the suite is on (when it says). */
    let deployedChainId: number | undefined;
    let chainPid: number | undefined;
    if (config.chain.mode === "embedded") {
      const chain = await startDevChain(config.chain, options.embeddedChain, log);
      closers.push(() => chain.close());
      rpcUrl = chain.rpcUrl;
      rpcUrls = [rpcUrl];
      addresses = chain.addresses;
      signers = [rawKeySigner(chain.exchangeWallet.privateKey)];
      embeddedChainId = chain.chainId;
      chainPid = chain.pid;
    } else {
      rpcUrl = config.chain.rpcUrl;
      rpcUrls = config.chain.rpcUrls;
      const { chainId: fileChainId, ...fileAddresses } = readDeploymentFile(config.chain.deploymentFile);
      // NATIVE_USD_FEED names the native coin's USD feed where the deployment file does not (or overrides it).
      const nativeUsd = config.chain.nativeUsdFeed ?? fileAddresses.feeds.nativeUsd;
      addresses = {
        ...fileAddresses,
        feeds: {
          tokenUsd: fileAddresses.feeds.tokenUsd,
          eurUsd: fileAddresses.feeds.eurUsd,
          chfUsd: fileAddresses.feeds.chfUsd,
          ...(nativeUsd === undefined ? {} : { nativeUsd }),
        },
      };
      deployedChainId = fileChainId;
      signers = await loadSigners(config.chain, log);
      log.info({ rpcUrls: rpcUrls.map(redactUrl), swap: addresses.swap }, "using an existing chain");
    }

    // The journal first: it also assigns the wallets' nonces (shared by every instance on PostgreSQL).
    let dataDir = config.journal.dataDir;
    if (config.chain.mode === "embedded" && config.journal.url === undefined) {
      const temporary = await temporaryJournalDir();
      closers.push(() => temporary.remove());
      dataDir = temporary.dir;
    }
    // This instance's name in the journal's leases (the wallets it monitors, the trades it accepted).
    const instanceId = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
    const opened = await openJournal({
      dataDir,
      instanceId,
      leaseMs: config.trade.leaseMs,
      ...(config.journal.url !== undefined ? { url: config.journal.url } : {}),
    });
    closers.push(() => opened.close());
    // With metrics on, every journal operation (a commit each) is timed.
    const metered = metrics === undefined ? opened : metrics.meteredJournal(opened);
    // With webhooks, each write that can add an event wakes the deliverer (set below).
    let wakeDeliverer = () => {};
    const journal = config.webhooks.endpoints.length === 0 ? metered : wakingJournal(metered, () => wakeDeliverer());
    // Trades accepted and never signed by a process that is gone (a crash, or a dead instance)
    // were never paid: their Idempotency-Keys work again. Now, and every lease period after.
    // So are this process's own left unsigned for a whole trade lifetime (a discard the journal
    // kept refusing): a trade is signed moments after it is accepted (its fees, a preflight, its
    // turn in the wallet's queue), and forgetting one still on its way only makes it fail unpaid.
    const staleAfterMs = config.trade.lifetimeS * 1000;
    const forget = async () => {
      const forgotten = await journal.forgetUnsigned(staleAfterMs);
      if (forgotten > 0)
        log.warn(
          { trades: forgotten },
          "forgot trades a stopped process accepted and never signed, or left unsigned for a trade's lifetime (nothing was paid); their Idempotency-Keys work again",
        );
    };
    await forget();
    // Quotes that expired QUOTE_SWEEP_GRACE_MS ago are deleted (until then a late trade naming one
    // is told quote_expired rather than quote_not_found), on the same beat.
    const sweepQuotes = () => journal.sweepQuotes(new Date(Date.now() - QUOTE_SWEEP_GRACE_MS));
    const sweeper = setInterval(() => {
      void forget().catch((error: unknown) => log.warn({ err: error }, "could not forget unsigned trades"));
      void sweepQuotes().catch((error: unknown) => log.warn({ err: error }, "could not sweep expired quotes"));
    }, config.trade.leaseMs);
    sweeper.unref();
    closers.push(async () => clearInterval(sweeper));
    log.info(
      { journal: config.journal.url === undefined ? join(dataDir, "journal.sqlite") : "postgres" },
      "trade journal open",
    );
    // Webhooks: from now on the journal writes an event with each change of a trade of a key with an
    // endpoint, in the change's own transaction; the deliverer sends them (closed before the journal).
    const webhookEndpoints = new Map(
      config.webhooks.endpoints.map(({ apiKeyId, ...endpoint }) => [apiKeyId, endpoint]),
    );
    await journal.setWebhookScopes([...webhookEndpoints.keys()]);
    if (webhookEndpoints.size > 0) {
      const deliverer = new WebhookDeliverer({
        outbox: journal,
        endpoints: webhookEndpoints,
        log: log.child({ component: "webhooks" }),
        holder: instanceId,
        allowPrivate: config.webhooks.allowPrivate,
        retry: { windowMs: config.webhooks.retryWindowMs },
        ...(metrics === undefined ? {} : { onOutcome: (outcome) => metrics.webhookOutcome(outcome) }),
      });
      deliverer.start();
      wakeDeliverer = () => deliverer.wake();
      closers.push(() => deliverer.close());
      log.info({ endpoints: webhookEndpoints.size }, "webhook deliverer started");
    }
    metrics?.watchWebhooks(journal);

    // Pin the chain id: an unpinned ethers provider asks eth_chainId again before many calls.
    // With several endpoints, each must serve the same chain: one on another chain is a
    // misconfiguration that would sign trades nobody can mine, so the start stops.
    const pinnedChainId = embeddedChainId === undefined ? await probeChainId(rpcUrls, log) : BigInt(embeddedChainId);
    // The suite's addresses mean nothing on another chain: at best every call fails, at worst
    // other contracts answer at them.
    if (config.chain.mode === "rpc" && deployedChainId !== undefined && BigInt(deployedChainId) !== pinnedChainId) {
      throw new ConfigError([
        `DEPLOYMENT_FILE: ${config.chain.deploymentFile} is for chain ${deployedChainId}, but RPC_URL serves chain ${pinnedChainId}`,
      ]);
    }
    const timeoutMs = config.chain.mode === "rpc" ? config.chain.rpcTimeoutMs : 10_000;
    const provider = createRpcProvider(rpcUrls, pinnedChainId, timeoutMs, {
      ...(config.chain.mode === "rpc" ? { batchMaxCount: config.chain.rpcBatchSize } : {}),
      onEndpointChange: ({ url, up, reason }) => {
        if (up) log.info({ rpcEndpoint: url }, "JSON-RPC endpoint is back up");
        else log.warn({ rpcEndpoint: url, reason }, "JSON-RPC endpoint failed; resting it and using the others");
      },
      ...(metrics === undefined ? {} : { onRequest: (record) => metrics.rpc(record) }),
    });
    let adapter: ChainAdapter;
    try {
      adapter = await createChainAdapter({
        provider,
        signers,
        addresses,
        ...(config.cashDiscountBps !== undefined ? { cashDiscountBps: config.cashDiscountBps } : {}),
        priceCacheMs: config.priceCacheMs,
        receiptTimeoutMs: config.receiptTimeoutMs,
        journal,
        trade: config.trade,
        stuckAfterMs: config.stuckAfterMs,
        feedPolicy: config.feedPolicy,
        log:
          metrics === undefined
            ? log.child({ component: "lifecycle" })
            : metrics.countingLifecycle(log.child({ component: "lifecycle" })),
        instanceId,
      });
    } catch (error) {
      provider.destroy();
      throw error;
    }
    closers.push(() => adapter.close());

    if (metrics !== undefined) {
      metrics.watch(adapter.walletSource());
      const served = await metrics.serve(config.host, config.metricsPort);
      closers.push(() => served.close());
      metricsUrl = served.url;
      log.info({ url: served.url }, "metrics served");
    }

    const created = createUseCases({
      trade: metrics === undefined ? adapter.trade : metrics.meteredTrades(adapter.trade),
      price: adapter.price,
      config: {
        stableCoins: adapter.stableCoins,
        limits: config.limits,
        forbiddenDestinataries: forbiddenDestinataries(addresses, adapter.wallets),
      },
      journal,
      inFlightWaitMs: config.idempotencyWaitMs,
      quote: adapter.quote,
      quotes: journal,
      wallets: adapter.wallets,
      quoteTtlMs: config.quoteTtlMs,
      webhooks: journal,
    });
    // With metrics on, quotes are counted by outcome, and trades naming one by theirs.
    const useCases = metrics === undefined ? created : metrics.meteredQuotes(created);
    // Every nonce the journal holds unfinished (a previous run's, another instance's, and from
    // now on this run's) is seen through to its end: confirmed, re-sent, re-priced, or freed by a no-op.
    for (const wallet of adapter.wallets) {
      const open = await journal.openSlots(wallet);
      if (open.length > 0)
        log.warn(
          { wallet, nonces: open.map((slot) => slot.nonce) },
          "seeing through transactions left unconfirmed by a previous run",
        );
    }
    adapter.start();

    // The configuration holds no key only in embedded mode (loadConfig requires one on RPC_URL).
    const generatedApiKey = config.apiKeys.length === 0 ? generateApiKey() : undefined;
    const apiKeys = generatedApiKey === undefined ? config.apiKeys : [generatedApiKey];

    const closing = new AbortController();
    // One rule for the client's address, for the refused-key throttle and the connections per address.
    const trustedProxies = new TrustedProxies(config.trustedProxies);
    const handler = createHttpHandler({
      useCases,
      verifier: createApiKeyVerifier(apiKeys),
      readiness: () => adapter.readiness(),
      log,
      bodyLimitBytes: config.bodyLimitBytes,
      closing: closing.signal,
      corsOrigins: config.corsOrigins,
      rateLimits: config.rateLimits,
      trustedProxies,
      ...(metrics === undefined ? {} : { metrics }),
    });
    const server = await startServer({
      handler,
      host: config.host,
      port: config.port,
      ...(config.tls ? { tls: config.tls } : {}),
      log,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
      trustedProxies,
    });
    closers.push(() => server.close());
    // Closers run last first: gRPC health turns NOT_SERVING and its Watch streams end, then the server drains.
    closers.push(async () => closing.abort());

    const chainId = Number(adapter.chainId);
    const service: RunningService = {
      mode: config.chain.mode,
      config,
      apiUrl: server.url,
      ...(metricsUrl === undefined ? {} : { metricsUrl }),
      rpcUrl,
      chainId,
      wallets: adapter.wallets,
      addresses,
      ...(generatedApiKey !== undefined ? { generatedApiKey } : {}),
      ...(chainPid !== undefined ? { chainPid } : {}),
      server,
      log,
      close: closeAll,
    };

    if (config.chain.mode === "embedded") {
      const deployment: DevDeployment = {
        chainId,
        rpcUrl,
        apiUrl: server.url,
        exchangeWallet: adapter.wallets[0]!,
        token: addresses.token,
        swap: addresses.swap,
        stableCoins: { ...addresses.stableCoins },
        feeds: { ...addresses.feeds },
      };
      const file = await writeDevDeployment(options.rootDir ?? process.cwd(), deployment);
      service.deployment = deployment;
      service.deploymentFile = file;
      log.info({ file }, "deployment written");
    }
    return service;
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** Where a trade must never send what it pays out: the suite's own contracts and the exchange wallets. */
export function forbiddenDestinataries(
  addresses: DeploymentAddresses,
  wallets: readonly string[],
): Array<{ address: string; what: string }> {
  return [
    { address: addresses.swap, what: "the swap contract" },
    { address: addresses.token, what: "the token contract" },
    ...Object.entries(addresses.stableCoins).map(([symbol, address]) => ({ address, what: `the ${symbol} contract` })),
    { address: addresses.feeds.tokenUsd, what: "the token/USD price feed" },
    { address: addresses.feeds.eurUsd, what: "the EUR/USD price feed" },
    { address: addresses.feeds.chfUsd, what: "the CHF/USD price feed" },
    ...(addresses.feeds.nativeUsd === undefined
      ? []
      : [{ address: addresses.feeds.nativeUsd, what: "the native coin's USD price feed" }]),
    ...wallets.map((address) => ({ address, what: "an exchange wallet of this service" })),
  ];
}

/** The exchange wallets' signers: decrypted from EXCHANGE_KEYSTORE once, or the raw EXCHANGE_PRIVATE_KEYS. */
async function loadSigners(chain: RpcChainConfig, log: Logger): Promise<TransactionSigner[]> {
  if (chain.keystore === undefined) return chain.privateKeys.map(rawKeySigner);
  const started = Date.now();
  const signers: TransactionSigner[] = [];
  for (const { path, json } of chain.keystore.files) {
    try {
      signers.push(await keystoreSigner(json, chain.keystore.password, path));
    } catch (error) {
      if (error instanceof KeystoreError) throw new ConfigError([`EXCHANGE_KEYSTORE: ${error.message}`]);
      throw error;
    }
  }
  log.info({ wallets: signers.map((s) => s.address), ms: Date.now() - started }, "exchange wallet keystores decrypted");
  return signers;
}

/**
 * Each endpoint's chain id, asked at start. Endpoints that do not answer are left to the
 * provider's failover (and logged); two that answer different chains stop the start.
 * @throws ChainUnavailableError when no endpoint answers
 * @throws ConfigError when the endpoints serve different chains
 */
async function probeChainId(urls: readonly string[], log: Logger): Promise<bigint> {
  const answers = await Promise.all(
    urls.map(async (url) => {
      const probe = createRpcProvider(url, undefined, 10_000);
      try {
        return { url, chainId: (await probe.getNetwork()).chainId };
      } catch {
        log.warn(
          { rpcEndpoint: redactUrl(url) },
          "JSON-RPC endpoint did not answer at start-up; the others serve until it does",
        );
        return { url, chainId: undefined };
      } finally {
        probe.destroy();
      }
    }),
  );
  const answered = answers.filter((a): a is { url: string; chainId: bigint } => a.chainId !== undefined);
  const first = answered[0];
  if (first === undefined) {
    throw new ChainUnavailableError(`no JSON-RPC endpoint answered at start-up (${urls.map(redactUrl).join(", ")})`);
  }
  const other = answered.find((a) => a.chainId !== first.chainId);
  if (other !== undefined) {
    throw new ConfigError([
      `RPC_URL: ${redactUrl(other.url)} serves chain ${other.chainId} but ${redactUrl(first.url)} serves chain ${first.chainId}; every endpoint must serve the same chain`,
    ]);
  }
  return first.chainId;
}
