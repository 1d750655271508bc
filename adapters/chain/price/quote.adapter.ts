/**
 * QuotePort on the chain: what a trade would pay out now, and what stands in its way, read at
 * one block (the latest) and sending nothing.
 *
 * - expected out: the swap's own quoteSell/quoteBuy views, which run the trade's SwapMath on the
 *   feed's answer; when they revert (a stale or broken price), the same SwapMath here;
 * - the price: the feed the swap reads now (its round id, answer and updatedAt);
 * - gas: eth_estimateGas on the trade's calldata (with the quote's minOut and a deadline), or,
 *   when that call cannot succeed now (a balance short, the allowance not yet set, the swap
 *   paused), TYPICAL_TRADE_GAS;
 * - the native coin's USD price (the network fee in USD): its feed, when the deployment names
 *   one, in the same batch as the reads above, checked against its feed rule; never an issue;
 * - issues: the wallet's balance, the swap's reserves (sell), paused, the feed policy
 *   (feed-policy.ts) and the fee cap, each with its numbers. Trades in flight are not counted:
 *   a trade reserves what it spends when it runs.
 */
import { Contract, Interface, type JsonRpcApiProvider, toQuantity } from "ethers";

import {
  UnknownWalletError,
  formatUnits,
  type ChainQuote,
  type QuoteIssue,
  type QuotePort,
  type TradeKind,
  type TradeOrder,
} from "../../../core/index.js";
import { FeeOracle, gwei } from "../blocks/index.js";
import { toDomainError } from "../rpc/index.js";
import { AGGREGATOR_ABI, ERC20_ABI, SWAP_ABI, staticCallEncoder } from "../tx/index.js";
import { FEED_SETTINGS, checkSequencer, compareToBounds, policyNow, type FeedGuard } from "./feed-policy.js";

/**
 * Gas a trade's call uses when it cannot be estimated now: the estimates on this repository's
 * contracts (EDR and anvil, 2026-11) for a first payment to a fresh destinatary, its most
 * expensive case, rounded up (a sell: 134,016; a buy or a remittance: 105,308). A sell burns the
 * tokens and pays the stable coin out; a buy or a remittance takes the stable coin and mints.
 * test/adapters/transport/quote.chain.test.ts checks the estimates stay under them.
 */
export const TYPICAL_TRADE_GAS: Readonly<Record<TradeKind, bigint>> = {
  sell: 140_000n,
  buy: 110_000n,
  remittance: 110_000n,
};

const TOKEN_UNIT = 10n ** 18n;
const swapInterface = new Interface(SWAP_ABI);
const SWAP_CALL = {
  sell: staticCallEncoder(swapInterface, "sell"),
  buy: staticCallEncoder(swapInterface, "buy"),
  remittance: staticCallEncoder(swapInterface, "buyAndRemit"),
} as const;

export interface QuoteAdapterOptions {
  provider: JsonRpcApiProvider;
  swap: string;
  token: { address: string; symbol: string };
  /** The exchange wallets (checksummed): a quote for another is refused like a trade. */
  wallets: readonly string[];
  /** The feed policy's guard, shared with the price and the trades. */
  feeds: FeedGuard;
  /** The trade settings a quote follows: the deadline's distance and the fee cap (wei). */
  lifetimeS: number;
  feeCap: bigint;
}

/** latestRoundData's answer. */
type Round = [roundId: bigint, answer: bigint, startedAt: bigint, updatedAt: bigint, answeredInRound: bigint];

/** SwapMath (contracts/libraries/SwapMath.sol), both ways, rounding down as the swap does. */
export function swapMathOut(
  kind: TradeKind,
  amount: bigint,
  price: bigint,
  priceDecimals: number,
  stableDecimals: number,
) {
  if (price <= 0n) return 0n;
  const priceUnit = 10n ** BigInt(priceDecimals);
  const stableUnit = 10n ** BigInt(stableDecimals);
  return kind === "sell"
    ? (amount * price * stableUnit) / (TOKEN_UNIT * priceUnit)
    : (amount * TOKEN_UNIT * priceUnit) / (price * stableUnit);
}

export class ChainQuoteAdapter implements QuotePort {
  readonly #opts: QuoteAdapterOptions;
  readonly #fees: FeeOracle;
  readonly #swap: Contract;
  readonly #wallets: Set<string>;

  constructor(options: QuoteAdapterOptions) {
    this.#opts = options;
    this.#fees = new FeeOracle(options.provider);
    this.#swap = new Contract(options.swap, SWAP_ABI, options.provider);
    this.#wallets = new Set(options.wallets.map((w) => w.toLowerCase()));
  }

  async quote(order: TradeOrder, minOut: (expectedOut: bigint) => bigint): Promise<ChainQuote> {
    if (!this.#wallets.has(order.wallet.toLowerCase())) throw new UnknownWalletError(order.wallet);
    try {
      return await this.#quote(order, minOut);
    } catch (error) {
      throw toDomainError(error, { stableDecimals: order.stable.decimals });
    }
  }

  async #quote(order: TradeOrder, minOut: (expectedOut: bigint) => bigint): Promise<ChainQuote> {
    const { provider, token, feeds } = this.#opts;
    const state = await this.#fees.read(true);
    const blockTag = toQuantity(state.head.number);
    const at = { blockTag };
    const sell = order.kind === "sell";
    const spent = sell
      ? { address: token.address, symbol: token.symbol, decimals: 18 }
      : { address: order.stable.address, symbol: order.stable.symbol, decimals: order.stable.decimals };
    const erc20 = (address: string) => new Contract(address, ERC20_ABI, provider);
    const call = <T>(contract: Contract, name: string, ...args: unknown[]) =>
      contract.getFunction(name)(...args, at) as Promise<T>;

    const [feedAddress, maxPriceAge, paused, balance, reserves, viewed, sequencer, native] = await Promise.all([
      call<string>(this.#swap, "priceFeed"),
      call<bigint>(this.#swap, "maxPriceAge"),
      call<boolean>(this.#swap, "paused"),
      call<bigint>(erc20(spent.address), "balanceOf", order.wallet),
      sell ? call<bigint>(erc20(order.stable.address), "balanceOf", this.#opts.swap) : undefined,
      call<bigint>(this.#swap, sell ? "quoteSell" : "quoteBuy", order.stable.address, order.amount).catch(
        () => undefined, // a stale or broken price: computed below from the feed's answer
      ),
      feeds.readSequencer().catch(() => undefined),
      // The network fee in USD only: a feed that cannot be read leaves it null.
      feeds.readNativeUsd(blockTag).catch(() => undefined),
    ]);
    const feed = new Contract(feedAddress, AGGREGATOR_ABI, provider);
    const [round, decimals] = await Promise.all([
      call<Round>(feed, "latestRoundData"),
      call<bigint>(feed, "decimals").then(Number),
    ]);
    const [roundId, answer, , updatedAt] = round;
    const expectedOut = viewed ?? swapMathOut(order.kind, order.amount, answer, decimals, order.stable.decimals);

    const issues: QuoteIssue[] = [];
    if (balance < order.amount) {
      const [has, needs] = [formatUnits(balance, spent.decimals), formatUnits(order.amount, spent.decimals)];
      issues.push({
        type: "balance_short",
        message: `${order.wallet} holds ${has} ${spent.symbol}; the trade spends ${needs}`,
        details: { asset: spent.symbol, balance: has, needed: needs },
      });
    }
    if (reserves !== undefined && reserves < expectedOut) {
      const [has, needs] = [
        formatUnits(reserves, order.stable.decimals),
        formatUnits(expectedOut, order.stable.decimals),
      ];
      issues.push({
        type: "reserves_short",
        message: `the swap's reserves hold ${has} ${order.stable.symbol}; the sell pays out ${needs}`,
        details: { asset: order.stable.symbol, reserves: has, needed: needs },
      });
    }
    if (paused)
      issues.push({ type: "trading_paused", message: "the swap is paused: every trade reverts", details: {} });
    issues.push(...this.#feedIssues({ answer, decimals, updatedAt }, maxPriceAge, state.head.timestamp, sequencer));
    if (state.baseFee > this.#opts.feeCap) {
      issues.push({
        type: "fees_too_high",
        message: `the chain's base fee (${gwei(state.baseFee)} gwei) is above the service's cap (${gwei(this.#opts.feeCap)} gwei): no trade is sent until it falls`,
        details: { baseFeeWei: state.baseFee.toString(), capWei: this.#opts.feeCap.toString() },
      });
    }

    const gas = await this.#gas(order, state.head.timestamp, expectedOut, minOut);
    return {
      expectedOut,
      price: { answer, decimals, roundId, updatedAt: Number(updatedAt) },
      gas,
      gasPriceWei: state.baseFee + state.priorityFee,
      nativeUsd: feeds.nativeUsdOf(native, state.head.timestamp),
      issues,
    };
  }

  /**
   * The gas the trade would use: eth_estimateGas on its calldata (with the quote's minOut of
   * `expectedOut` and a deadline from the head's time), or TYPICAL_TRADE_GAS when that call cannot
   * succeed now.
   */
  async #gas(
    order: TradeOrder,
    headTimestamp: number,
    expectedOut: bigint,
    minOut: (expectedOut: bigint) => bigint,
  ): Promise<ChainQuote["gas"]> {
    const { provider } = this.#opts;
    const deadline = Math.max(Math.floor(Date.now() / 1000), headTimestamp) + this.#opts.lifetimeS;
    const data = SWAP_CALL[order.kind]([
      order.stable.address,
      order.amount,
      order.destinatary,
      minOut(expectedOut),
      BigInt(deadline),
    ]);
    const estimated = await (
      provider.send("eth_estimateGas", [{ from: order.wallet, to: this.#opts.swap, data }, "latest"]) as Promise<string>
    ).then(BigInt, () => undefined);
    return estimated === undefined
      ? { units: TYPICAL_TRADE_GAS[order.kind], estimated: false }
      : { units: estimated, estimated: true };
  }

  /** The feed policy's verdict on the token feed (and the sequencer), as issues with their numbers. */
  #feedIssues(
    reading: { answer: bigint; decimals: number; updatedAt: bigint },
    swapMaxAgeS: bigint,
    headTimestamp: number,
    sequencer: Awaited<ReturnType<FeedGuard["readSequencer"]>>,
  ): QuoteIssue[] {
    const { policy } = this.#opts.feeds;
    const issues: QuoteIssue[] = [];
    const now = policyNow(headTimestamp);
    if (policy.sequencer !== undefined && sequencer !== undefined) {
      try {
        checkSequencer(sequencer, policy.sequencer.graceS, now);
      } catch (error) {
        issues.push({ type: "price_unavailable", message: (error as Error).message, details: {} });
      }
    }
    if (reading.updatedAt === 0n || reading.answer <= 0n) {
      issues.push({
        type: "price_unavailable",
        message: `the ${FEED_SETTINGS.tokenUsd.feed} feed answered ${reading.answer} (updatedAt ${reading.updatedAt})`,
        details: { answer: reading.answer.toString(), updatedAt: reading.updatedAt.toString() },
      });
      return issues;
    }
    const maxAgeS = policy.tokenUsd.maxAgeS !== undefined ? BigInt(policy.tokenUsd.maxAgeS) : swapMaxAgeS;
    // The swap's own rule counts against the block's timestamp, the policy's against "now".
    const age = now - reading.updatedAt;
    const swapAge = BigInt(headTimestamp) - reading.updatedAt;
    if (age > maxAgeS || swapAge > swapMaxAgeS) {
      const limit = age > maxAgeS ? maxAgeS : swapMaxAgeS;
      issues.push({
        type: "price_stale",
        message: `the ${FEED_SETTINGS.tokenUsd.feed} feed was last updated ${age} s ago, more than the ${limit} s allowed`,
        details: {
          updatedAt: new Date(Number(reading.updatedAt) * 1000).toISOString(),
          ageSeconds: age.toString(),
          maxAgeSeconds: limit.toString(),
        },
      });
    }
    const bounds = policy.tokenUsd.bounds;
    if (bounds !== undefined && compareToBounds(reading.answer, reading.decimals, bounds) !== 0) {
      const price = formatUnits(reading.answer, reading.decimals);
      issues.push({
        type: "price_out_of_bounds",
        message: `the ${FEED_SETTINGS.tokenUsd.feed} feed answered ${price}, outside ${FEED_SETTINGS.tokenUsd.bounds} (${bounds.min}-${bounds.max})`,
        details: { price, min: bounds.min, max: bounds.max },
      });
    }
    return issues;
  }
}
