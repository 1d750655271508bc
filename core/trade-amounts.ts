import { keccak256Utf8 } from "./keccak.js";
import type { TransactionReceipt } from "./types.js";

/**
 * The topics of the swap's trade events (contracts/interfaces/ITokenSwap.sol). Each has three
 * indexed addresses and three words of data: Sold(tokenAmount, stableAmount, price),
 * Bought and Remitted(stableAmount, tokenAmount, price). The first word is what the trade
 * paid in, the second what it paid out.
 */
const SWAP_EVENT_TOPICS = new Set(
  [
    "Sold(address,address,address,uint256,uint256,uint256)",
    "Bought(address,address,address,uint256,uint256,uint256)",
    "Remitted(address,address,address,uint256,uint256,uint256)",
  ].map((signature) => `0x${keccak256Utf8(signature)}`),
);

const WORD = 64; // hex digits in a 32-byte word

/** What a mined trade moved, in base units, and what its transaction cost, in wei. */
export interface TradeAmounts {
  /** Paid in: tokens (18 decimals) for a sell, the stable coin's base units for a buy or remittance. Null without a swap event. */
  amountIn: bigint | null;
  /** Paid out: the stable coin's base units for a sell, tokens for a buy or remittance. Null without a swap event. */
  amountOut: bigint | null;
  /** gasUsed × effectiveGasPrice. Null when the receipt does not carry both as integers. */
  gasWei: bigint | null;
}

/**
 * Reads a trade's amounts from its receipt: in and out from the swap's Sold, Bought or Remitted
 * log (the first of them that the swap, the receipt's `to`, emitted), the gas from gasUsed and effectiveGasPrice. Never throws: a receipt
 * without those gives nulls.
 */
export function tradeAmounts(receipt: TransactionReceipt): TradeAmounts {
  let amountIn: bigint | null = null;
  let amountOut: bigint | null = null;
  // The trade's transaction calls the swap: only the swap's own log counts (another contract in
  // the same transaction, a coin among them, could emit a log with the same topic).
  const swap = typeof receipt.to === "string" ? receipt.to.toLowerCase() : undefined;
  for (const log of Object.values(receipt.events ?? {})) {
    if (swap === undefined || log?.address?.toLowerCase() !== swap) continue;
    const topic = log?.raw?.topics?.[0];
    const data = log?.raw?.data;
    if (typeof topic !== "string" || !SWAP_EVENT_TOPICS.has(topic.toLowerCase()) || typeof data !== "string") continue;
    const hex = data.startsWith("0x") ? data.slice(2) : data;
    if (hex.length < 2 * WORD || !/^[0-9a-fA-F]*$/.test(hex)) continue;
    amountIn = BigInt(`0x${hex.slice(0, WORD)}`);
    amountOut = BigInt(`0x${hex.slice(WORD, 2 * WORD)}`);
    break;
  }
  const { gasUsed, effectiveGasPrice } = receipt;
  const gasWei =
    Number.isSafeInteger(gasUsed) && Number.isSafeInteger(effectiveGasPrice) && gasUsed >= 0 && effectiveGasPrice >= 0
      ? BigInt(gasUsed) * BigInt(effectiveGasPrice)
      : null;
  return { amountIn, amountOut, gasWei };
}

/**
 * The native coin's USD price as the journal keeps it with a trade: USD per whole coin, scaled
 * by 10^18, so that every Chainlink USD feed (8 or 18 decimals) fits exactly.
 */
export const NATIVE_USD_DECIMALS = 18;

/**
 * Gas in USD as the journal keeps and sums it: wei (18 decimals) × the native coin's price
 * (NATIVE_USD_DECIMALS), so USD scaled by 10^36, exact; nothing is rounded.
 */
export const GAS_USD_DECIMALS = 36;

/**
 * A feed's answer (`decimals` places) as USD per native coin at NATIVE_USD_DECIMALS; null when
 * it is not a positive price, or has more decimals than that (it would not be exact).
 */
export function nativeUsdOf(answer: bigint, decimals: number): bigint | null {
  if (answer <= 0n || !Number.isInteger(decimals) || decimals < 0 || decimals > NATIVE_USD_DECIMALS) return null;
  return answer * 10n ** BigInt(NATIVE_USD_DECIMALS - decimals);
}

/** Wei in USD at GAS_USD_DECIMALS: wei × the native coin's price (NATIVE_USD_DECIMALS), exact. */
export function gasUsdOf(gasWei: bigint, nativeUsd: bigint): bigint {
  return gasWei * nativeUsd;
}

/** A non-negative amount at `from` decimals, rounded up to `to` (≤ `from`) decimals. */
export function roundUpDecimals(amount: bigint, from: number, to: number): bigint {
  const step = 10n ** BigInt(from - to);
  return (amount + step - 1n) / step;
}
