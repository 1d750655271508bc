/**
 * The settings of trades and of their transactions' lifecycle, as the configuration gives them
 * (adapters/config/env/trade.ts), with their defaults: the trade adapter takes what its calldata
 * promises (trade/options.ts), the lifecycle monitors their timing (lifecycle/options.ts).
 */
import type { LifecycleSettings } from "./lifecycle/index.js";
import type { TradeCallSettings } from "./trade/index.js";

export type TradeSettings = TradeCallSettings & LifecycleSettings;

/** Defaults of TradeSettings (docs/operations.md, "On a real chain", explains each). */
export const DEFAULT_TRADE_SETTINGS: TradeSettings = {
  lifetimeS: 300,
  slippageBps: 100,
  confirmations: 1,
  reorgDepth: 64,
  resubmitAfterMs: 30_000,
  intervalMs: 1_000,
  leaseMs: 15_000,
  feeCap: 100n * 10n ** 9n,
  minAgeMs: 3_000,
};
