/**
 * A trade under a quote is signed with its deadline no later than the quote's expiry, so it needs
 * time left to be mined by then: two of the chain's blocks (core's minTimeLeftMs). Checked when
 * the trade is proven and again as it is signed; a trade without it is refused (quote_expired),
 * never signed with a deadline it cannot meet.
 */
import { QuoteExpiredError, minTimeLeftMs, type QuoteTerms } from "../../../core/index.js";

/**
 * What is left of `quote` now, in ms.
 * @param blockTimeMs the chain's block time as measured (block-times.ts), undefined while unknown
 * @throws QuoteExpiredError when that is less than two of the chain's blocks
 */
export function quoteLeftMs(quote: QuoteTerms, blockTimeMs: number | undefined): number {
  const now = Date.now();
  const needed = minTimeLeftMs(blockTimeMs);
  if (quote.expiresAt - now < needed)
    throw new QuoteExpiredError(quote.quoteId, new Date(quote.expiresAt), { now, neededMs: needed });
  return quote.expiresAt - now;
}
