/**
 * What the token is worth: the price adapter (PricePort) and its cache, the feed policy (each
 * feed's age and bounds, the L2 sequencer) that prices and trades alike obey, and the quote
 * adapter (QuotePort), which prices a trade before it is made.
 */
export { CachedPricePort, type CachedPriceOptions } from "./cached-price.js";
export {
  DEFAULT_FEED_POLICY,
  DEFAULT_FX_MAX_AGE_S,
  DEFAULT_NATIVE_USD_MAX_AGE_S,
  DEFAULT_SEQUENCER_GRACE_S,
  FEED_SETTINGS,
  FeedGuard,
  SEQUENCER_SETTINGS,
  checkFeed,
  checkSequencer,
  compareToBounds,
  policyNow,
  type FeedBounds,
  type FeedGuardOptions,
  type FeedKey,
  type FeedPolicy,
  type FeedReading,
  type FeedRule,
  type TradeReads,
} from "./feed-policy.js";
export { ChainPriceAdapter, type PriceAdapterOptions } from "./price.adapter.js";
export { ChainQuoteAdapter, TYPICAL_TRADE_GAS, swapMathOut, type QuoteAdapterOptions } from "./quote.adapter.js";
