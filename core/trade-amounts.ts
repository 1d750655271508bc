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
 * log (the first of them), the gas from gasUsed and effectiveGasPrice. Never throws: a receipt
 * without those gives nulls.
 */
export function tradeAmounts(receipt: TransactionReceipt): TradeAmounts {
  let amountIn: bigint | null = null;
  let amountOut: bigint | null = null;
  for (const log of Object.values(receipt.events ?? {})) {
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
