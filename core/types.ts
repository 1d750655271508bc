/**
 * The domain's data: what a client asks for, and what the service answers.
 * The shapes of `TransactionReceipt`, `EventLog` and `PriceRecord` are the wire
 * format of docs/SPEC.md (sections 2.2 to 2.4), which existing clients parse
 * as web3.js 1.x output. Field order follows the SPEC.
 */

/** A 0x-prefixed, 40-hex-digit address, already validated. */
export type Address = `0x${string}`;

/** The three trading operations. */
export type TradeKind = "sell" | "buy" | "remittance";

/** The trade request body, as sent by clients (SPEC 2.1). Every field is a string. */
export interface TradeRequest {
  userAddress: string;
  destinatary: string;
  amount: string;
  usdAddress: string;
}

/** A stable coin the service trades against. */
export interface StableCoin {
  symbol: "DAI" | "USDT" | "USDC";
  address: Address;
  decimals: number;
}

/**
 * A trade that passed validation. `amount` is in base units:
 * token base units (18 decimals) for sell, stable-coin base units for buy and remittance.
 */
export interface TradeOrder {
  kind: TradeKind;
  wallet: Address;
  destinatary: Address;
  amount: bigint;
  stable: StableCoin;
  /** What the quote the trade names (header Quote-Id) promised it; absent for a trade without one. */
  quote?: QuoteTerms;
}

/** A quote's promise, as a trade that names it executes under it. */
export interface QuoteTerms {
  /** The quote's id (Quote-Id), for the refusals that name it. */
  quoteId: string;
  /** The least the trade may pay out, in the output's base units: the contract's minimum out. */
  minOut: bigint;
  /** When the quote expires, in ms since the epoch: the trade's deadline is no later. */
  expiresAt: number;
}

/** One event log inside a receipt (SPEC 2.3), as web3.js 1.x formats a log that is not in the ABI. */
export interface EventLog {
  address: string;
  blockHash: string;
  blockNumber: number;
  logIndex: number;
  removed: boolean;
  transactionHash: string;
  transactionIndex: number;
  id: string;
  returnValues: Record<string, never>;
  signature: null;
  raw: { data: string; topics: string[] };
}

/** A mined transaction receipt (SPEC 2.2), as web3.js 1.x `send()` resolves it. */
export interface TransactionReceipt {
  blockHash: string;
  blockNumber: number;
  contractAddress: null;
  cumulativeGasUsed: number;
  effectiveGasPrice: number;
  from: string;
  gasUsed: number;
  logsBloom: string;
  status: boolean;
  to: string;
  transactionHash: string;
  transactionIndex: number;
  type: string;
  events: Record<string, EventLog>;
}

/** Fiat currencies the price is quoted in (SPEC 4, rule 3). */
export const CASH_CURRENCIES = ["CHF", "EUR", "USD"] as const;
export type CashCurrency = (typeof CASH_CURRENCIES)[number];

/** The price record (SPEC 2.4). */
export interface PriceRecord {
  cryptoCurrency: string;
  rateForCashCurrency: Record<CashCurrency, number>;
  /** `{}` unless a cash discount is configured; then the same three keys. */
  rateWithDiscountForCashCurrency: Record<CashCurrency, number> | Record<string, never>;
}
