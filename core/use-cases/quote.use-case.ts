import { bytesToHex, randomBytes } from "@noble/hashes/utils.js";

import { callerOf, coinToLimitUsd } from "../access/authorize.js";
import type { Caller } from "../access/policy.js";
import { QuoteExpiredError, QuoteMismatchError, QuoteNotFoundError, QuoteUsedError } from "../errors.js";
import type { TradeJournal } from "../ports/journal.port.js";
import type { QuoteIssue, QuotePort, QuoteStore, StoredQuote } from "../ports/quote.port.js";
import { GAS_USD_DECIMALS, gasUsdOf, roundUpDecimals } from "../trade-amounts.js";
import type { TradeKind, TradeOrder } from "../types.js";
import { formatUnits } from "../validation/amount.js";
import { parseQuoteRequest, quoteMinOut } from "../validation/quote-request.js";
import { TOKEN_DECIMALS, type TradeConfig } from "../validation/trade-request.js";
import { policyIssues, type TradeAccess } from "./trade-authorize.js";

/** An amount as decimal text in whole units, and in base units. */
export interface QuoteAmount {
  value: string;
  baseUnits: string;
}

/** The answer to a quote request (POST /api/v1/token/quote). */
export interface QuoteView {
  /** Names the quote in a trade's Quote-Id header; unguessable. */
  quoteId: string;
  /** ISO 8601: a trade naming the quote after this is refused (quote_expired). */
  expiresAt: string;
  kind: TradeKind;
  userAddress: string;
  /** Null when the request named none: the quote then binds none. */
  destinatary: string | null;
  usdAddress: string;
  slippageBps: number;
  /** Tokens for a sell, USD (the stable coin) for a buy or a remittance. */
  amountIn: QuoteAmount;
  /** What the trade pays out at the price read, exactly as the swap computes it. */
  expectedOut: QuoteAmount;
  /** `expectedOut` less `slippageBps`, rounded down: the trade's minimum out on chain. */
  minOut: QuoteAmount;
  /** The token feed's round the quote was priced at: USD per token, exact. */
  price: { usd: string; roundId: string; updatedAt: string };
  /** Gas units of the trade's call: estimated on its calldata, or a typical figure (`estimated` false). */
  gas: { units: string; estimated: boolean; priceWei: string };
  /**
   * `gas.units` × `gas.priceWei`, and in USD at the native coin's feed read at the same block,
   * rounded up to NETWORK_FEE_USD_DECIMALS (an estimate of a cost never understates it). `usd`
   * is null when the service has no native-coin price (no feed in the deployment, or its answer
   * fails the feed policy).
   */
  networkFee: { wei: string; usd: string | null };
  /** Why a trade would be refused now; empty when nothing is known to stand in its way. */
  issues: QuoteIssue[];
}

/** A quote operation as the transports call it: raw body in, quote out. */
export type QuoteUseCase = (input: unknown, context?: { scope?: string; caller?: Caller }) => Promise<QuoteView>;

export interface QuoteOptions {
  /** How long a quote may be used, in ms. */
  ttlMs: number;
  /** The exchange wallets (a quote without `userAddress` is for the only one). */
  wallets: readonly string[];
  /** Wall clock in ms (tests inject one). Default Date.now. */
  clock?: () => number;
  /** The access policy, for the issues it would raise (not_permitted, destinatary_denied, limit_exceeded). */
  access?: TradeAccess;
  /** Where the limits are counted, to read their room. */
  journal?: TradeJournal;
}

/** Decimals of a quote's `networkFee.usd`: a millionth of a dollar, the base unit of USDC and USDT. */
export const NETWORK_FEE_USD_DECIMALS = 6;

/** Default of QUOTE_TTL_MS: thirty seconds, as 0x and Uniswap quotes last about that long. */
export const DEFAULT_QUOTE_TTL_MS = 30_000;

const amount = (value: bigint, decimals: number): QuoteAmount => ({
  value: formatUnits(value, decimals),
  baseUnits: value.toString(),
});

/** A fee in wei, and in USD at `nativeUsd` rounded up to NETWORK_FEE_USD_DECIMALS (null without a price). */
function networkFee(wei: bigint, nativeUsd: bigint | null): QuoteView["networkFee"] {
  if (nativeUsd === null) return { wei: wei.toString(), usd: null };
  const usd = roundUpDecimals(gasUsdOf(wei, nativeUsd), GAS_USD_DECIMALS, NETWORK_FEE_USD_DECIMALS);
  return { wei: wei.toString(), usd: formatUnits(usd, NETWORK_FEE_USD_DECIMALS) };
}

/**
 * Builds the quote use case: validate, read the chain (QuotePort), then record the quote in the
 * journal (QuoteStore) for a trade to name. A quote with issues is answered and recorded too: a
 * trade naming it is refused for the issue itself, if it still stands.
 */
export function quoteUseCase(
  port: QuotePort,
  store: QuoteStore,
  config: TradeConfig,
  options: QuoteOptions,
): QuoteUseCase {
  const clock = options.clock ?? Date.now;
  return async (input, context = {}) => {
    const { order, destinataryNamed, slippageBps, issues } = parseQuoteRequest(input, config, options.wallets);
    const chain = await port.quote(order, (expected) => quoteMinOut(expected, slippageBps));
    const minOut = quoteMinOut(chain.expectedOut, slippageBps);
    // What the access policy would do: its refusals and limits, as issues (nothing counted).
    const payout = order.kind === "sell" ? chain.expectedOut : order.amount;
    const policy = await policyIssues(
      options.access,
      options.journal,
      callerOf(context),
      order,
      coinToLimitUsd(payout, order.stable.decimals),
      destinataryNamed,
    );
    const now = clock();
    const quote: StoredQuote = {
      id: `q_${bytesToHex(randomBytes(16))}`,
      scope: context.scope ?? "",
      kind: order.kind,
      wallet: order.wallet,
      destinatary: destinataryNamed ? order.destinatary : null,
      stable: order.stable.address,
      amount: order.amount,
      minOut,
      expiresAt: new Date(now + options.ttlMs),
      createdAt: new Date(now),
      tradeId: null,
    };
    await store.saveQuote(quote);
    const [inDecimals, outDecimals] =
      order.kind === "sell" ? [TOKEN_DECIMALS, order.stable.decimals] : [order.stable.decimals, TOKEN_DECIMALS];
    return {
      quoteId: quote.id,
      expiresAt: quote.expiresAt.toISOString(),
      kind: order.kind,
      userAddress: order.wallet,
      destinatary: quote.destinatary,
      usdAddress: order.stable.address,
      slippageBps,
      amountIn: amount(order.amount, inDecimals),
      expectedOut: amount(chain.expectedOut, outDecimals),
      minOut: amount(minOut, outDecimals),
      price: {
        usd: formatUnits(chain.price.answer, chain.price.decimals),
        roundId: chain.price.roundId.toString(),
        updatedAt: new Date(chain.price.updatedAt * 1000).toISOString(),
      },
      gas: {
        units: chain.gas.units.toString(),
        estimated: chain.gas.estimated,
        priceWei: chain.gasPriceWei.toString(),
      },
      networkFee: networkFee(chain.gas.units * chain.gasPriceWei, chain.nativeUsd),
      issues: [...issues, ...chain.issues, ...policy],
    };
  };
}

/**
 * A quote with less than this left (ms) is expired for trading, on any chain: its trade would
 * have too little time to be mined. On a chain with blocks slower than 1.5 s the least is two of
 * its blocks (minTimeLeftMs).
 */
export const QUOTE_MIN_LEFT_MS = 3_000;

/**
 * The least time a quote must have left when its trade is accepted, and again when it is signed:
 * two of the chain's blocks (`blockTimeMs`, as the chain adapter measures it), and never less than
 * QUOTE_MIN_LEFT_MS. A trade signed with its deadline at the quote's expiry is then mined before
 * it even when it misses the next block.
 */
export function minTimeLeftMs(blockTimeMs: number | undefined): number {
  return Math.max(QUOTE_MIN_LEFT_MS, 2 * (blockTimeMs ?? 0));
}

/**
 * The quote a trade names, checked against the trade and used (consumeQuote) for `tradeId`.
 * @returns the terms the trade executes under
 * @throws QuoteNotFoundError, QuoteMismatchError, QuoteExpiredError or QuoteUsedError; nothing is used then
 */
export async function redeemQuote(
  store: QuoteStore,
  quoteId: string,
  order: TradeOrder,
  scope: string,
  tradeId: string,
  now: number,
  minLeftMs = QUOTE_MIN_LEFT_MS,
): Promise<NonNullable<TradeOrder["quote"]>> {
  const quote = await store.getQuote(quoteId);
  if (quote === undefined || quote.scope !== scope) throw new QuoteNotFoundError(quoteId);
  const differs = (field: string, quoted: string, asked: string) => {
    if (quoted.toLowerCase() !== asked.toLowerCase()) throw new QuoteMismatchError(field, quoteId, quoted);
  };
  differs("kind", quote.kind, order.kind);
  differs("userAddress", quote.wallet, order.wallet);
  if (quote.destinatary !== null) differs("destinatary", quote.destinatary, order.destinatary);
  differs("usdAddress", quote.stable, order.stable.address);
  const decimals = order.kind === "sell" ? TOKEN_DECIMALS : order.stable.decimals;
  if (quote.amount !== order.amount)
    throw new QuoteMismatchError("amount", quoteId, formatUnits(quote.amount, decimals));
  if (quote.tradeId !== null) throw new QuoteUsedError(quoteId);
  // Its trade's deadline is no later than its expiry: too close to it, the trade could not be
  // mined in time, and would only spend gas and a nonce on a no-op. Expired for trading.
  const usableUntil = quote.expiresAt.getTime() - minLeftMs;
  if (usableUntil <= now) throw new QuoteExpiredError(quoteId, quote.expiresAt, { now, neededMs: minLeftMs });
  if (!(await store.consumeQuote(quoteId, scope, tradeId, new Date(now + minLeftMs)))) {
    // Another trade won the race, or the quote expired meanwhile: read again to say which.
    const after = await store.getQuote(quoteId);
    if (after === undefined) throw new QuoteNotFoundError(quoteId);
    if (after.tradeId !== null && after.tradeId !== tradeId) throw new QuoteUsedError(quoteId);
    throw new QuoteExpiredError(quoteId, after.expiresAt, { now, neededMs: minLeftMs });
  }
  return { quoteId, minOut: quote.minOut, expiresAt: quote.expiresAt.getTime() };
}
