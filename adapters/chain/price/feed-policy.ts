/**
 * Price feeds as Chainlink advises (docs.chain.link, "Using Data Feeds", "L2 Sequencer Uptime
 * Feeds"): before an answer is used, check
 * - its age against a maximum that suits the feed: the token feed's may be short; FX feeds such
 *   as EUR/USD and CHF/USD have 24 h heartbeats and no updates while the FX market is closed
 *   (Friday 22:00 to Sunday 22:00 UTC), so theirs must span a weekend;
 * - optionally, that it lies within bounds the operator sets (a circuit breaker: a feed stuck at
 *   its aggregator's minAnswer or maxAnswer, or a broken one, is refused rather than used);
 * - on an L2, that the sequencer is up, and has been for a grace period: while it is down the
 *   feeds cannot update, and right after it comes back their answers may still be old news.
 *
 * A feed that fails a check makes the price, and every trade, `unavailable`
 * (PriceUnavailableError), naming the feed and the setting; nothing is quoted or signed at a
 * stale or out-of-bounds price. The swap contract checks the token feed's age again on chain
 * (its `maxPriceAge`), when the trade executes.
 *
 * "Now" is the later of this machine's clock and the latest block's timestamp, so a node that
 * lags behind cannot make an old answer look fresh.
 */
import { Contract, Interface, type Provider } from "ethers";

import { PriceUnavailableError, nativeUsdOf } from "../../../core/index.js";
import { AGGREGATOR_ABI, SWAP_ABI } from "../tx/index.js";

/** What each feed's rule is called where the operator sets it (.env.example); errors name it. */
export const FEED_SETTINGS = {
  tokenUsd: { feed: "token/USD", maxAge: "FEED_MAX_AGE_TOKEN_USD_S", bounds: "FEED_BOUNDS_TOKEN_USD" },
  eurUsd: { feed: "EUR/USD", maxAge: "FEED_MAX_AGE_EUR_USD_S", bounds: "FEED_BOUNDS_EUR_USD" },
  chfUsd: { feed: "CHF/USD", maxAge: "FEED_MAX_AGE_CHF_USD_S", bounds: "FEED_BOUNDS_CHF_USD" },
  nativeUsd: { feed: "native/USD", maxAge: "FEED_MAX_AGE_NATIVE_USD_S", bounds: "FEED_BOUNDS_NATIVE_USD" },
} as const;
export const SEQUENCER_SETTINGS = { feed: "SEQUENCER_UPTIME_FEED", grace: "SEQUENCER_GRACE_S" } as const;

export type FeedKey = keyof typeof FEED_SETTINGS;

/** Accepted answers, inclusive, as plain decimals in the pair's units ("0.5", "2"). */
export interface FeedBounds {
  min: string;
  max: string;
}

export interface FeedRule {
  /** Oldest accepted answer, in seconds. For the token feed, unset means the swap's own `maxPriceAge`. */
  maxAgeS?: number;
  bounds?: FeedBounds;
}

export interface FeedPolicy {
  tokenUsd: FeedRule;
  eurUsd: FeedRule;
  chfUsd: FeedRule;
  /**
   * The native coin's USD feed (NATIVE_USD_FEED or the deployment's feeds.nativeUsd), read only
   * for the gas in USD of quotes and trades: an answer that fails its rule leaves those null and
   * refuses nothing. Unset: DEFAULT_NATIVE_USD_MAX_AGE_S.
   */
  nativeUsd?: FeedRule;
  /** An L2's sequencer uptime feed (answer 0 = up, 1 = down; startedAt = when that began). */
  sequencer?: { address: string; graceS: number };
}

/**
 * Default maximum age of the FX feeds: 96 h. A 24 h heartbeat, with the last update up to a
 * heartbeat before Friday's close, then a 48 h weekend, is 72 h; the rest is margin for a
 * heartbeat's delay and a holiday next to a weekend.
 */
export const DEFAULT_FX_MAX_AGE_S = 96 * 3600;

/**
 * Default maximum age of the native coin's USD feed: 25 h. Chainlink's ETH/USD beats hourly on
 * Ethereum and daily on some L2s (Arbitrum); a day and an hour of margin covers both.
 */
export const DEFAULT_NATIVE_USD_MAX_AGE_S = 25 * 3600;

/** Default grace period after an L2 sequencer comes back up: an hour, as in Chainlink's example. */
export const DEFAULT_SEQUENCER_GRACE_S = 3600;

export const DEFAULT_FEED_POLICY: FeedPolicy = {
  tokenUsd: {},
  eurUsd: { maxAgeS: DEFAULT_FX_MAX_AGE_S },
  chfUsd: { maxAgeS: DEFAULT_FX_MAX_AGE_S },
  nativeUsd: { maxAgeS: DEFAULT_NATIVE_USD_MAX_AGE_S },
};

/** One feed's latest round. */
export interface FeedReading {
  answer: bigint;
  decimals: number;
  startedAt: bigint;
  updatedAt: bigint;
}

/** A plain decimal ("1.25") as an exact fraction: value / 10^scale. */
function fraction(text: string): { value: bigint; scale: number } {
  const [whole, part = ""] = text.split(".");
  return { value: BigInt(`${whole}${part}`), scale: part.length };
}

/** Whether `answer` / 10^decimals is below (-1), within (0) or above (1) the bounds; exact. */
export function compareToBounds(answer: bigint, decimals: number, bounds: FeedBounds): -1 | 0 | 1 {
  // answer / 10^d < v / 10^s  ⇔  answer · 10^s < v · 10^d
  const side = (bound: string) => {
    const { value, scale } = fraction(bound);
    const left = answer * 10n ** BigInt(scale);
    const right = value * 10n ** BigInt(decimals);
    return left < right ? -1 : left > right ? 1 : 0;
  };
  if (side(bounds.min) < 0) return -1;
  if (side(bounds.max) > 0) return 1;
  return 0;
}

/** An integer answer at `decimals` as decimal text (150000000, 8 → "1.5"). */
function decimalText(answer: bigint, decimals: number): string {
  const negative = answer < 0n;
  const digits = (negative ? -answer : answer).toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const part = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${part === "" ? "" : `.${part}`}`;
}

/**
 * Checks one feed's reading against its rule at `now` (unix seconds).
 * @param swapMaxAgeS the swap's `maxPriceAge`, the token feed's limit when its rule sets none
 * @throws PriceUnavailableError naming the feed and the setting
 */
export function checkFeed(key: FeedKey, reading: FeedReading, rule: FeedRule, now: bigint, swapMaxAgeS?: bigint): void {
  const { feed, maxAge, bounds } = FEED_SETTINGS[key];
  if (reading.updatedAt === 0n)
    throw new PriceUnavailableError(`the ${feed} feed has no complete round (updatedAt is 0)`);
  if (reading.answer <= 0n) throw new PriceUnavailableError(`the ${feed} feed answered ${reading.answer}`);
  const limit =
    rule.maxAgeS !== undefined
      ? { seconds: BigInt(rule.maxAgeS), name: maxAge }
      : swapMaxAgeS !== undefined
        ? { seconds: swapMaxAgeS, name: "the swap's maxPriceAge" }
        : undefined;
  // An answer stamped after "now" is fresh (a block read may lag a moment behind another).
  const age = now - reading.updatedAt;
  if (limit !== undefined && age > limit.seconds) {
    throw new PriceUnavailableError(
      `the ${feed} feed was last updated ${age} s ago (at ${reading.updatedAt}), more than ${limit.name} allows (${limit.seconds} s)`,
    );
  }
  if (rule.bounds !== undefined && compareToBounds(reading.answer, reading.decimals, rule.bounds) !== 0) {
    throw new PriceUnavailableError(
      `the ${feed} feed answered ${decimalText(reading.answer, reading.decimals)}, outside ${bounds} (${rule.bounds.min}-${rule.bounds.max})`,
    );
  }
}

/**
 * Checks an L2 sequencer uptime feed's reading at `now` (unix seconds): up (answer 0), and for
 * longer than the grace period.
 * @throws PriceUnavailableError naming the setting
 */
export function checkSequencer(reading: FeedReading, graceS: number, now: bigint): void {
  if (reading.answer !== 0n)
    throw new PriceUnavailableError(`the L2 sequencer is down (${SEQUENCER_SETTINGS.feed} answered ${reading.answer})`);
  // Chainlink: startedAt is 0 while the uptime feed's round is not initialised (Arbitrum).
  if (reading.startedAt === 0n)
    throw new PriceUnavailableError(
      `the L2 sequencer's status is unknown (${SEQUENCER_SETTINGS.feed} has no started round)`,
    );
  const up = now - reading.startedAt;
  if (up <= BigInt(graceS)) {
    throw new PriceUnavailableError(
      `the L2 sequencer came back up ${up} s ago; feeds are used again once ${SEQUENCER_SETTINGS.grace} (${graceS} s) has passed`,
    );
  }
}

/** The later of this machine's clock and `chainTimestamp`, in unix seconds. */
export function policyNow(chainTimestamp: number | bigint, clock: () => number = Date.now): bigint {
  const local = BigInt(Math.floor(clock() / 1000));
  const chain = BigInt(chainTimestamp);
  return local > chain ? local : chain;
}

export interface FeedGuardOptions {
  provider: Provider;
  swap: string;
  policy: FeedPolicy;
  /** The native coin's USD feed, when the deployment names one: the gas in USD of quotes and trades. */
  nativeUsd?: string;
  /** Wall clock in ms (tests inject one). Default Date.now. */
  clock?: () => number;
}

/** latestRoundData's answer. */
type Round = [roundId: bigint, answer: bigint, startedAt: bigint, updatedAt: bigint, answeredInRound: bigint];

/**
 * Where a trade's feed reads go: the trade adapter's call batcher (call-batcher.ts), so that they
 * ride in the eth_call that proves the trade. An eth_call's answer, at the latest block.
 */
export interface TradeReads {
  read(to: string, data: string): Promise<string>;
}

const aggregatorInterface = new Interface(AGGREGATOR_ABI);
const swapInterface = new Interface(SWAP_ABI);

/** `method()` of `to`, through `reads`, decoded as an ethers Contract would decode it. */
async function callVia(reads: TradeReads, iface: Interface, to: string, method: string) {
  return iface.decodeFunctionResult(method, await reads.read(to, iface.encodeFunctionData(method)));
}

/**
 * Reads the feeds and checks them against the policy: the token feed (the one the swap reads
 * now) and the sequencer for a trade; all three and the sequencer for a quote.
 */
export class FeedGuard {
  readonly #opts: FeedGuardOptions;
  readonly #swap: Contract;
  /** The feeds' contracts, by address. */
  readonly #feeds = new Map<string, Contract>();
  /** Decimals never change for a feed address. */
  readonly #decimals = new Map<string, Promise<number>>();
  /** The swap's token feed, as last read (the swap's owner may replace it). */
  #tokenFeed?: string;
  /** The native coin's USD price for trades, read once per block (the head it was read at). */
  #nativeForTrades?: { block: number; price: Promise<bigint | null> };

  constructor(options: FeedGuardOptions) {
    this.#opts = options;
    this.#swap = new Contract(options.swap, SWAP_ABI, options.provider);
  }

  /** Whether the policy checks anything for a trade that the swap does not check itself. */
  get #checksTrades(): boolean {
    const { tokenUsd, sequencer } = this.#opts.policy;
    return tokenUsd.maxAgeS !== undefined || tokenUsd.bounds !== undefined || sequencer !== undefined;
  }

  get policy(): FeedPolicy {
    return this.#opts.policy;
  }

  /**
   * For a trade at `head`: the token feed and the sequencer pass. Which feed the swap reads, its
   * round and the sequencer's are read now, in the same JSON-RPC batch as the trade's preflight,
   * so the bounds are checked on the answer the preflight priced the trade at. Its age against
   * the swap's maxPriceAge is the swap's own check, in the preflight and again on execution;
   * with no other rule for trades (the default), nothing is read. With `reads`, the reads ride in
   * the eth_call that proves the trade.
   * @throws PriceUnavailableError
   */
  async forTrade(head: { timestamp: number }, reads?: TradeReads): Promise<void> {
    // Without a rule of its own for the token feed, or a sequencer, the swap's checks are all
    // there is to make: nothing to read (the default costs a trade nothing).
    if (!this.#checksTrades) return;
    const [token, sequencer] = await Promise.all([this.#swapFeedRound(reads), this.#readSequencer(reads)]);
    const now = policyNow(head.timestamp, this.#opts.clock);
    this.#checkSequencer(sequencer, now);
    checkFeed("tokenUsd", token, this.#opts.policy.tokenUsd, now);
  }

  /**
   * For a quote: every feed passes at the latest block's `timestamp`.
   * @throws PriceUnavailableError
   */
  checkQuote(read: {
    token: FeedReading;
    eurUsd: FeedReading;
    chfUsd: FeedReading;
    swapMaxAgeS: bigint;
    sequencer?: FeedReading;
    timestamp: number;
  }): void {
    const now = policyNow(read.timestamp, this.#opts.clock);
    this.#checkSequencer(read.sequencer, now);
    checkFeed("tokenUsd", read.token, this.#opts.policy.tokenUsd, now, read.swapMaxAgeS);
    checkFeed("eurUsd", read.eurUsd, this.#opts.policy.eurUsd, now);
    checkFeed("chfUsd", read.chfUsd, this.#opts.policy.chfUsd, now);
  }

  /** Whether the deployment names a native-coin USD feed. */
  get hasNativeUsd(): boolean {
    return this.#opts.nativeUsd !== undefined;
  }

  /**
   * The native coin's USD price for a trade signed at `head`: read once per block and shared by
   * every trade at it, so trades arriving together cost one eth_call, issued alongside their
   * preflight (one JSON-RPC batch; with `reads`, in the eth_call that proves it). Null without a
   * feed, or when it cannot be read or fails the policy: the price is informational and never
   * stops a trade.
   */
  nativeUsdForTrade(head: { number: number; timestamp: number }, reads?: TradeReads): Promise<bigint | null> {
    const address = this.#opts.nativeUsd;
    if (address === undefined) return Promise.resolve(null);
    const cached = this.#nativeForTrades;
    if (cached !== undefined && cached.block === head.number) return cached.price;
    const price = this.read(address, undefined, reads)
      .then((reading) => this.nativeUsdOf(reading, head.timestamp))
      .catch(() => null);
    this.#nativeForTrades = { block: head.number, price };
    return price;
  }

  /**
   * The native coin's feed, read at `blockTag` (a quote's pinned block) or the latest; undefined
   * without a feed.
   */
  readNativeUsd(blockTag?: string): Promise<FeedReading | undefined> {
    const address = this.#opts.nativeUsd;
    return address === undefined ? Promise.resolve(undefined) : this.read(address, blockTag);
  }

  /**
   * A native-coin reading as USD per coin at NATIVE_USD_DECIMALS, if it passes its rule at
   * `timestamp` (the block's, or this machine's clock if later); else null.
   */
  nativeUsdOf(reading: FeedReading | undefined, timestamp: number): bigint | null {
    if (reading === undefined) return null;
    const rule = this.#opts.policy.nativeUsd ?? { maxAgeS: DEFAULT_NATIVE_USD_MAX_AGE_S };
    try {
      checkFeed("nativeUsd", reading, rule, policyNow(timestamp, this.#opts.clock));
    } catch {
      return null;
    }
    return nativeUsdOf(reading.answer, reading.decimals);
  }

  /**
   * The latest round of the feed at `address` (at `blockTag`, default the latest block), with its
   * decimals; through `reads` (at the latest block) when given.
   */
  async read(address: string, blockTag?: string, reads?: TradeReads): Promise<FeedReading> {
    let feed = this.#feeds.get(address);
    if (feed === undefined) {
      feed = new Contract(address, AGGREGATOR_ABI, this.#opts.provider);
      this.#feeds.set(address, feed);
    }
    let decimals = this.#decimals.get(address);
    if (decimals === undefined) {
      decimals = (
        reads === undefined
          ? (feed.getFunction("decimals")() as Promise<bigint>)
          : callVia(reads, aggregatorInterface, address, "decimals").then((result) => result[0] as bigint)
      ).then(Number);
      decimals.catch(() => this.#decimals.delete(address));
      this.#decimals.set(address, decimals);
    }
    const latest = feed.getFunction("latestRoundData");
    const [places, round] = await Promise.all([
      decimals,
      (reads !== undefined && blockTag === undefined
        ? callVia(reads, aggregatorInterface, address, "latestRoundData")
        : blockTag === undefined
          ? latest()
          : latest({ blockTag })) as Promise<Round>,
    ]);
    return { answer: round[1], decimals: places, startedAt: round[2], updatedAt: round[3] };
  }

  /** The sequencer's reading, when the policy names an uptime feed. */
  readSequencer(): Promise<FeedReading | undefined> {
    return this.#readSequencer();
  }

  #readSequencer(reads?: TradeReads): Promise<FeedReading | undefined> {
    const sequencer = this.#opts.policy.sequencer;
    return sequencer === undefined ? Promise.resolve(undefined) : this.read(sequencer.address, undefined, reads);
  }

  /** The swap's token feed (its latest round) and its maximum age, read now. */
  async tokenFeed(): Promise<{ token: FeedReading; swapMaxAgeS: bigint }> {
    const [token, swapMaxAgeS] = await Promise.all([
      this.#swapFeedRound(),
      this.#swap.getFunction("maxPriceAge")() as Promise<bigint>,
    ]);
    return { token, swapMaxAgeS };
  }

  /**
   * The latest round of the feed the swap reads now. The feed last seen is read alongside the
   * swap's answer; on the first read, or once the swap's owner has replaced it, the new one is.
   */
  async #swapFeedRound(reads?: TradeReads): Promise<FeedReading> {
    const known = this.#tokenFeed;
    const [address, guessed] = await Promise.all([
      reads === undefined
        ? (this.#swap.getFunction("priceFeed")() as Promise<string>)
        : callVia(reads, swapInterface, this.#opts.swap, "priceFeed").then((result) => result[0] as string),
      known === undefined ? undefined : this.read(known, undefined, reads),
    ]);
    this.#tokenFeed = address;
    return guessed !== undefined && address.toLowerCase() === known!.toLowerCase()
      ? guessed
      : this.read(address, undefined, reads);
  }

  #checkSequencer(reading: FeedReading | undefined, now: bigint): void {
    const sequencer = this.#opts.policy.sequencer;
    if (sequencer !== undefined && reading !== undefined) checkSequencer(reading, sequencer.graceS, now);
  }
}
