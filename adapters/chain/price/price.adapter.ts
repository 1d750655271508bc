/**
 * PricePort on the chain. USD is the swap's own checked token/USD price, so a quote and
 * an execution agree; EUR and CHF divide it by the EUR/USD and CHF/USD feeds.
 * Every feed, and the L2 sequencer when one is configured, must pass the feed policy
 * (feed-policy.ts: age, bounds, sequencer uptime): otherwise PriceUnavailableError, never
 * an old or made-up number.
 */
import { Contract, formatUnits, type Provider } from "ethers";

import type { CashCurrency, PricePort, PriceRecord } from "../../../core/index.js";
import { SWAP_ABI } from "../tx/index.js";
import { toDomainError } from "../rpc/index.js";
import { DEFAULT_FEED_POLICY, FeedGuard, type FeedPolicy } from "./feed-policy.js";

/** Rates are computed in integers at this many decimals, rounded down, then given as JSON numbers. */
const RATE_DECIMALS = 8;
const RATE_SCALE = 10n ** BigInt(RATE_DECIMALS);

export interface PriceAdapterOptions {
  provider: Provider;
  swap: string;
  feeds: { eurUsd: string; chfUsd: string };
  tokenSymbol: string;
  /** Discount for cash currencies, in basis points (0 = none, and the discount record stays `{}`). */
  cashDiscountBps?: number;
  /** The feeds' rules (default DEFAULT_FEED_POLICY); or a guard shared with the trades. */
  policy?: FeedPolicy;
  guard?: FeedGuard;
}

export class ChainPriceAdapter implements PricePort {
  readonly #swap: Contract;
  readonly #guard: FeedGuard;

  constructor(private readonly options: PriceAdapterOptions) {
    this.#swap = new Contract(options.swap, SWAP_ABI, options.provider);
    this.#guard =
      options.guard ??
      new FeedGuard({ provider: options.provider, swap: options.swap, policy: options.policy ?? DEFAULT_FEED_POLICY });
  }

  async getPrice(): Promise<PriceRecord> {
    const guard = this.#guard;
    try {
      const [[price, priceDecimals], { token, swapMaxAgeS }, eur, chf, sequencer, block] = await Promise.all([
        this.#swap.getFunction("currentPrice")() as Promise<[bigint, bigint]>,
        guard.tokenFeed(),
        guard.read(this.options.feeds.eurUsd),
        guard.read(this.options.feeds.chfUsd),
        guard.readSequencer(),
        this.options.provider.getBlock("latest"),
      ]);
      guard.checkQuote({
        token,
        eurUsd: eur,
        chfUsd: chf,
        swapMaxAgeS,
        ...(sequencer === undefined ? {} : { sequencer }),
        timestamp: block?.timestamp ?? 0,
      });
      // usd = price / 10^d; eur = usd / (eurAnswer / 10^e) = price * 10^e / (eurAnswer * 10^d)
      const scale = (feed: { answer: bigint; decimals: number }) =>
        (price * 10n ** BigInt(feed.decimals) * RATE_SCALE) / (feed.answer * 10n ** priceDecimals);
      const rates: Record<CashCurrency, bigint> = {
        CHF: scale(chf),
        EUR: scale(eur),
        USD: (price * RATE_SCALE) / 10n ** priceDecimals,
      };
      const bps = BigInt(this.options.cashDiscountBps ?? 0);
      return {
        cryptoCurrency: this.options.tokenSymbol,
        rateForCashCurrency: toNumbers(rates),
        rateWithDiscountForCashCurrency:
          bps === 0n
            ? {}
            : toNumbers({
                CHF: (rates.CHF * (10_000n - bps)) / 10_000n,
                EUR: (rates.EUR * (10_000n - bps)) / 10_000n,
                USD: (rates.USD * (10_000n - bps)) / 10_000n,
              }),
      };
    } catch (error) {
      throw toDomainError(error);
    }
  }
}

function toNumbers(rates: Record<CashCurrency, bigint>): Record<CashCurrency, number> {
  return {
    CHF: Number(formatUnits(rates.CHF, RATE_DECIMALS)),
    EUR: Number(formatUnits(rates.EUR, RATE_DECIMALS)),
    USD: Number(formatUnits(rates.USD, RATE_DECIMALS)),
  };
}
