/**
 * The use-cases step of the composition root: the core's use cases on the chain adapter and the
 * journal, metered when metrics are on; and where a trade must never pay out to.
 */
import { type AccessPolicy, createUseCases } from "../../core/index.js";
import type { ChainAdapter, DeploymentAddresses } from "../chain/index.js";
import type { AppConfig } from "../config/env.js";
import type { ServiceMetrics } from "../observability/metrics.js";
import type { ServiceJournal } from "./journal.js";

export type UseCases = ReturnType<typeof createUseCases>;

export function wireUseCases(
  config: AppConfig,
  adapter: ChainAdapter,
  journal: ServiceJournal,
  addresses: DeploymentAddresses,
  metrics: ServiceMetrics | undefined,
  policy?: () => AccessPolicy,
): UseCases {
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
    audit: journal.ports.audit,
    approvals: journal,
    watch: journal,
    replacer: adapter.lifecycle.replacer,
    ...(policy && { policy }),
  });
  // A resume is in force here at once (the other instances read it at their next reading).
  const resume = created.resumeWallet;
  created.resumeWallet = async (address, context) => {
    const resumed = await resume(address, context);
    await adapter.refreshPauses();
    return resumed;
  };
  // With metrics on, quotes are counted by outcome, trades naming one by theirs, and the policy's refusals by reason.
  if (metrics === undefined) return created;
  if (policy !== undefined) metrics.access.watchLimits({ policy, journal });
  return metrics.access.meteredRefusals(metrics.meteredQuotes(created));
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
