/**
 * PricePort on the chain. USD is the swap's own checked token/USD price, so a quote and
 * an execution agree; EUR and CHF divide it by the EUR/USD and CHF/USD feeds.
 * A stale, zero or negative feed gives PriceUnavailableError, never a made-up number.
 */
import { Contract, formatUnits, type Provider } from "ethers";

import { PriceUnavailableError, type CashCurrency, type PricePort, type PriceRecord } from "../../core/index.js";
import { AGGREGATOR_ABI, SWAP_ABI } from "./abi.js";
import { toDomainError } from "./chain-errors.js";

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
}

export class ChainPriceAdapter implements PricePort {
  readonly #swap: Contract;
  readonly #eurUsd: Contract;
  readonly #chfUsd: Contract;

  constructor(private readonly options: PriceAdapterOptions) {
    this.#swap = new Contract(options.swap, SWAP_ABI, options.provider);
    this.#eurUsd = new Contract(options.feeds.eurUsd, AGGREGATOR_ABI, options.provider);
    this.#chfUsd = new Contract(options.feeds.chfUsd, AGGREGATOR_ABI, options.provider);
  }

  async getPrice(): Promise<PriceRecord> {
    try {
      const [[price, priceDecimals], maxAge, eur, chf, block] = await Promise.all([
        this.#swap.getFunction("currentPrice")() as Promise<[bigint, bigint]>,
        this.#swap.getFunction("maxPriceAge")() as Promise<bigint>,
        this.#readFeed(this.#eurUsd, "EUR/USD"),
        this.#readFeed(this.#chfUsd, "CHF/USD"),
        this.options.provider.getBlock("latest"),
      ]);
      const now = BigInt(block?.timestamp ?? Math.floor(Date.now() / 1000));
      for (const feed of [eur, chf]) {
        // An answer stamped after the latest block we read is fresh (the block read may lag a moment).
        if (feed.updatedAt < now && now - feed.updatedAt > maxAge) {
          throw new PriceUnavailableError(`the ${feed.name} feed was last updated at ${feed.updatedAt}, older than ${maxAge} s`);
        }
      }
      // usd = price / 10^d; eur = usd / (eurAnswer / 10^e) = price * 10^e / (eurAnswer * 10^d)
      const usd = (price * RATE_SCALE) / 10n ** priceDecimals;
      const rates: Record<CashCurrency, bigint> = {
        CHF: (price * 10n ** chf.decimals * RATE_SCALE) / (chf.answer * 10n ** priceDecimals),
        EUR: (price * 10n ** eur.decimals * RATE_SCALE) / (eur.answer * 10n ** priceDecimals),
        USD: usd,
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

  async #readFeed(feed: Contract, name: string) {
    const [decimals, round] = (await Promise.all([feed.getFunction("decimals")(), feed.getFunction("latestRoundData")()])) as [
      bigint,
      [bigint, bigint, bigint, bigint, bigint],
    ];
    const answer = round[1];
    if (answer <= 0n) throw new PriceUnavailableError(`the ${name} feed answered ${answer}`);
    return { name, decimals, answer, updatedAt: round[3] };
  }
}

function toNumbers(rates: Record<CashCurrency, bigint>): Record<CashCurrency, number> {
  return {
    CHF: Number(formatUnits(rates.CHF, RATE_DECIMALS)),
    EUR: Number(formatUnits(rates.EUR, RATE_DECIMALS)),
    USD: Number(formatUnits(rates.USD, RATE_DECIMALS)),
  };
}
