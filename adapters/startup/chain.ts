/**
 * The chain step of the composition root: the JSON-RPC provider over every endpoint (pinned to
 * the chain they all serve), and the chain adapter on it: trades, prices, quotes, the wallets'
 * lifecycle monitors.
 */
import type { Logger } from "pino";

import { ChainUnavailableError } from "../../core/index.js";
import {
  createChainAdapter,
  createRpcProvider,
  redactUrl,
  type ChainAdapter,
  WatchSettingsError,
} from "../chain/index.js";
import { ConfigError, type AppConfig } from "../config/env.js";
import type { ServiceMetrics } from "../observability/metrics.js";
import type { ChainSource } from "./chain-source.js";
import type { ServiceJournal } from "./journal.js";
import type { Shutdown } from "./shutdown.js";

/** The chain adapter, its provider pinned to the chain id every endpoint serves. */
export async function startChainAdapter(
  config: AppConfig,
  chain: ChainSource,
  journal: ServiceJournal,
  context: { instanceId: string; metrics: ServiceMetrics | undefined; log: Logger; shutdown: Shutdown },
): Promise<ChainAdapter> {
  const { instanceId, metrics, log, shutdown } = context;
  // Pin the chain id: an unpinned ethers provider asks eth_chainId again before many calls.
  // With several endpoints, each must serve the same chain: one on another chain is a
  // misconfiguration that would sign trades nobody can mine, so the start stops.
  const pinnedChainId =
    chain.embeddedChainId === undefined ? await probeChainId(chain.rpcUrls, log) : BigInt(chain.embeddedChainId);
  // The suite's addresses mean nothing on another chain: at best every call fails, at worst
  // other contracts answer at them.
  if (
    config.chain.mode === "rpc" &&
    chain.deployedChainId !== undefined &&
    BigInt(chain.deployedChainId) !== pinnedChainId
  ) {
    throw new ConfigError([
      `DEPLOYMENT_FILE: ${config.chain.deploymentFile} is for chain ${chain.deployedChainId}, but RPC_URL serves chain ${pinnedChainId}`,
    ]);
  }
  const timeoutMs = config.chain.mode === "rpc" ? config.chain.rpcTimeoutMs : 10_000;
  const provider = createRpcProvider(chain.rpcUrls, pinnedChainId, timeoutMs, {
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
      signers: chain.signers,
      addresses: chain.addresses,
      ...(config.cashDiscountBps !== undefined ? { cashDiscountBps: config.cashDiscountBps } : {}),
      priceCacheMs: config.priceCacheMs,
      receiptTimeoutMs: config.receiptTimeoutMs,
      journal,
      trade: config.trade,
      stuckAfterMs: config.stuckAfterMs,
      feedPolicy: config.feedPolicy,
      // The embedded chain's block time is its setting (automine: a block with each transaction).
      ...(config.chain.mode === "embedded" ? { blockTimeMs: config.chain.blockTimeMs ?? 0 } : {}),
      log:
        metrics === undefined
          ? log.child({ component: "lifecycle" })
          : metrics.countingLifecycle(log.child({ component: "lifecycle" })),
      instanceId,
      watch: { settings: config.watch, log: log.child({ component: "watch" }), observer: metrics?.watchObserver },
    });
  } catch (error) {
    provider.destroy();
    // A threshold that names no asset of the deployment, or has more decimals than its asset.
    if (error instanceof WatchSettingsError) throw new ConfigError([...error.problems]);
    throw error;
  }
  shutdown.push(() => adapter.close());
  return adapter;
}

/**
 * Starts the wallets' lifecycle monitors: every nonce the journal holds unfinished (a previous
 * run's, another instance's, and from now on this run's) is seen through to its end: confirmed,
 * re-sent, re-priced, or freed by a no-op.
 */
export async function startLifecycle(adapter: ChainAdapter, journal: ServiceJournal, log: Logger): Promise<void> {
  for (const wallet of adapter.wallets) {
    const open = await journal.openSlots(wallet);
    if (open.length > 0)
      log.warn(
        { wallet, nonces: open.map((slot) => slot.nonce) },
        "seeing through transactions left unconfirmed by a previous run",
      );
  }
  // The wallet watch first: the pauses the journal holds are in force before any trade is taken.
  await adapter.lifecycle.watch?.start();
  adapter.start();
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
