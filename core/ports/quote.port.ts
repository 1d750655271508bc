import type { TradeKind, TradeOrder } from "../types.js";

/**
 * Why a trade quoted now would be refused, as 0x's quote lists its `issues`. A quote with issues
 * is still answered; each issue names its numbers in `details`, as exact decimal text.
 *
 * - `balance_short`: the wallet holds less than the trade spends (`asset`, `balance`, `needed`);
 * - `reserves_short`: a sell pays the stable coin out of the swap's reserves, which hold less
 *   (`asset`, `reserves`, `needed`);
 * - `trading_paused`: the swap is paused;
 * - `price_stale`: the token feed's answer is older than the feed policy or the swap allow
 *   (`updatedAt`, `ageSeconds`, `maxAgeSeconds`);
 * - `price_out_of_bounds`: the answer is outside the operator's bounds (`price`, `min`, `max`);
 * - `price_unavailable`: another feed check fails (a non-positive answer, an L2 sequencer down);
 * - `fees_too_high`: the chain's base fee is above the service's fee cap (`baseFeeWei`, `capWei`);
 * - `amount_below_minimum`, `amount_above_maximum`: the service's limits (`amount`, `minimum` or `maximum`);
 * - `not_permitted`: the access policy refuses the caller this trade (a role or a scope);
 * - `destinatary_denied`: the destinatary is on the denylist, or not on the key's own list;
 * - `limit_exceeded`: a spending limit has no room for it (`limit`, `window`, and the room left:
 *   `maxUsd`, `roomUsd`, `tradeUsd` and/or `maxTrades`, `roomTrades`).
 */
export type QuoteIssueType =
  | "balance_short"
  | "reserves_short"
  | "trading_paused"
  | "price_stale"
  | "price_out_of_bounds"
  | "price_unavailable"
  | "fees_too_high"
  | "amount_below_minimum"
  | "amount_above_maximum"
  | "not_permitted"
  | "destinatary_denied"
  | "limit_exceeded";

export interface QuoteIssue {
  type: QuoteIssueType;
  /** What is wrong, in words. */
  message: string;
  /** The numbers, as exact decimal text (amounts in whole units of their asset, fees in wei, ages in seconds). */
  details: Record<string, string>;
}

/** What the chain says about a trade right now, read at one block. */
export interface ChainQuote {
  /** What the trade pays out at the current price, in the output's base units, as the swap computes it. */
  expectedOut: bigint;
  /** The token feed's latest round, the one the swap prices with. */
  price: { answer: bigint; decimals: number; roundId: bigint; updatedAt: number };
  /** Gas units the trade's call uses: estimated on its calldata, or a typical figure when it cannot succeed now. */
  gas: { units: bigint; estimated: boolean };
  /** Wei per gas unit the trade is expected to pay now (base fee plus tip). */
  gasPriceWei: bigint;
  /**
   * USD per native coin at NATIVE_USD_DECIMALS (core/trade-amounts.ts), from the native coin's
   * feed at the same block; null when the deployment names no such feed, or its answer fails the
   * feed policy (too old, out of bounds). Never an issue: the price refuses no trade.
   */
  nativeUsd: bigint | null;
  issues: QuoteIssue[];
}

/** Reads what a quote needs from the chain, sending nothing. */
export interface QuotePort {
  /**
   * @param order - the trade quoted (its `destinatary` may be the wallet itself when none was named)
   * @param minOut - the minimum out the quote will promise for `expectedOut`: the gas is estimated on that calldata
   * @throws UnknownWalletError when the service does not sign for the order's wallet;
   *         ChainUnavailableError when the chain cannot be asked
   */
  quote(order: TradeOrder, minOut: (expectedOut: bigint) => bigint): Promise<ChainQuote>;
}

/** A quote as the journal keeps it until a trade uses it or it is swept. */
export interface StoredQuote {
  id: string;
  /** Who asked: a hash of the api key. Only trades sent with the same key may use it. */
  scope: string;
  kind: TradeKind;
  /** Checksummed addresses. */
  wallet: string;
  /** Null: the quote named none, and binds none. */
  destinatary: string | null;
  stable: string;
  /** The amount in, in base units. */
  amount: bigint;
  /** The least the trade may pay out, in the output's base units. */
  minOut: bigint;
  expiresAt: Date;
  createdAt: Date;
  /** The trade that used it, once one did. */
  tradeId: string | null;
}

/**
 * The quotes, in the journal's storage, so that a quote issued by one instance is used at most
 * once across every instance sharing it.
 */
export interface QuoteStore {
  saveQuote(quote: StoredQuote): Promise<void>;
  getQuote(id: string): Promise<StoredQuote | undefined>;
  /**
   * Marks the quote used by `tradeId`, if it is `scope`'s, unused, and expires after `now`: one
   * conditional write, so of several trades naming one quote (on any instance) exactly one wins.
   * @returns whether this call used it
   */
  consumeQuote(id: string, scope: string, tradeId: string, now: Date): Promise<boolean>;
  /** Gives a quote back if `tradeId` used it (the trade was refused before anything was signed). */
  releaseQuote(id: string, tradeId: string): Promise<void>;
  /** Deletes the quotes that expired before `before`; returns how many. */
  sweepQuotes(before: Date): Promise<number>;
}
