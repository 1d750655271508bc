/**
 * What one trade may be and how it is carried out: the amount limits (MAX_/MIN_SELL_TOKENS,
 * MAX_/MIN_USD), the fee cap, confirmations and reorg depth, and the lifecycle monitor's timing.
 */
import { decimalToBaseUnits, TOKEN_DECIMALS } from "../../../core/index.js";
import type { AppConfig } from "./config.js";
import type { Env } from "./schema.js";

export function tradeSettings(e: Env, problems: string[]): Pick<AppConfig, "limits" | "trade"> {
  const maxSellTokens = decimalToBaseUnits(e.MAX_SELL_TOKENS, TOKEN_DECIMALS, "down") ?? 0n;
  if (maxSellTokens <= 0n) problems.push("MAX_SELL_TOKENS: must be at least 1e-18");
  const minSellTokens = decimalToBaseUnits(e.MIN_SELL_TOKENS, TOKEN_DECIMALS, "up") ?? 0n;
  if (minSellTokens > maxSellTokens) problems.push("MIN_SELL_TOKENS: must not be more than MAX_SELL_TOKENS");
  // Compared exactly, at more decimals than any stable coin has.
  if ((decimalToBaseUnits(e.MIN_USD, 36, "up") ?? 0n) > (decimalToBaseUnits(e.MAX_USD, 36, "down") ?? 0n)) {
    problems.push("MIN_USD: must not be more than MAX_USD");
  }
  const feeCap = decimalToBaseUnits(e.MAX_FEE_PER_GAS_GWEI, 9, "down") ?? 0n;
  if (feeCap <= 0n) problems.push("MAX_FEE_PER_GAS_GWEI: must be greater than 0");
  if (e.MONITOR_LEASE_MS < 3 * e.MONITOR_INTERVAL_MS) {
    problems.push(
      "MONITOR_LEASE_MS: must be at least 3 × MONITOR_INTERVAL_MS, so a live monitor renews its lease in time",
    );
  }
  // Watched only as deep as it is answered, a confirmed trade would stop being watched for reorgs at once.
  if (e.REORG_DEPTH <= e.CONFIRMATIONS)
    problems.push(
      `REORG_DEPTH: must be at least CONFIRMATIONS + 1, so a confirmed trade is still watched for reorgs (REORG_DEPTH=${e.REORG_DEPTH}, CONFIRMATIONS=${e.CONFIRMATIONS})`,
    );
  return {
    limits: { maxSellTokens, maxUsd: e.MAX_USD, minSellTokens, minUsd: e.MIN_USD },
    trade: {
      lifetimeS: e.TRADE_LIFETIME_S,
      slippageBps: e.SLIPPAGE_BPS,
      feeCap,
      confirmations: e.CONFIRMATIONS,
      reorgDepth: e.REORG_DEPTH,
      resubmitAfterMs: e.RESUBMIT_AFTER_MS,
      intervalMs: e.MONITOR_INTERVAL_MS,
      leaseMs: e.MONITOR_LEASE_MS,
    },
  };
}
