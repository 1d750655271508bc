/**
 * The feed policy (adapters/chain/price/feed-policy.ts): each feed's maximum age, optional bounds and
 * the L2 sequencer uptime feed, first as pure rules, then on EDR through the chain adapter: the
 * price and the trades are refused (`unavailable`) with the wallet's nonce unmoved.
 */
import { expect } from "chai";
import { BrowserProvider, HDNodeWallet, parseUnits } from "ethers";
import { network } from "hardhat";

import { createChainAdapter } from "../../../adapters/chain/index.js";
import {
  DEFAULT_FX_MAX_AGE_S,
  checkFeed,
  checkSequencer,
  compareToBounds,
  policyNow,
  type FeedPolicy,
  type FeedReading,
} from "../../../adapters/chain/price/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import { PriceUnavailableError, type TradeKind } from "../../../core/index.js";
import { suiteFixture } from "../../helpers/suite.js";

const connection = await network.create();
const { ethers, networkHelpers } = connection;
const MNEMONIC = "test test test test test test test test test test test junk";
const keyOf = (index: number) => HDNodeWallet.fromPhrase(MNEMONIC, undefined, `m/44'/60'/0'/0/${index}`).privateKey;
const PRICE = parseUnits("1.25", 8);

const reading = (answer: bigint, updatedAt: bigint, decimals = 8, startedAt = updatedAt): FeedReading => ({
  answer,
  decimals,
  startedAt,
  updatedAt,
});

/** The error `fn` throws (it must throw). */
function thrown(fn: () => void): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a throw");
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a rejection");
}

describe("the feed policy", function () {
  describe("its rules", function () {
    const NOW = 1_800_000_000n;

    it("compares an answer with bounds exactly, whatever their decimals", function () {
      const bounds = { min: "1.5", max: "2.00000000001" };
      expect(compareToBounds(150_000_000n, 8, bounds)).to.equal(0); // 1.5, the minimum itself
      expect(compareToBounds(149_999_999n, 8, bounds)).to.equal(-1);
      expect(compareToBounds(200_000_000n, 8, bounds)).to.equal(0); // 2 < 2.00000000001
      expect(compareToBounds(200_000_001n, 8, bounds)).to.equal(1);
      expect(compareToBounds(2n, 0, { min: "1", max: "2" })).to.equal(0);
      expect(compareToBounds(15n * 10n ** 17n, 18, { min: "1.500000000000000001", max: "3" })).to.equal(-1);
    });

    it("refuses an incomplete round, a non-positive answer, an old one and one out of bounds, naming the feed and the setting", function () {
      expect(thrown(() => checkFeed("eurUsd", reading(PRICE, 0n), {}, NOW)).message).to.equal(
        "price unavailable: the EUR/USD feed has no complete round (updatedAt is 0)",
      );
      expect(thrown(() => checkFeed("chfUsd", reading(0n, NOW), {}, NOW)).message).to.include(
        "the CHF/USD feed answered 0",
      );
      const old = thrown(() => checkFeed("eurUsd", reading(PRICE, NOW - 101n), { maxAgeS: 100 }, NOW));
      expect(old).to.be.instanceOf(PriceUnavailableError);
      expect(old.message).to.equal(
        `price unavailable: the EUR/USD feed was last updated 101 s ago (at ${NOW - 101n}), more than FEED_MAX_AGE_EUR_USD_S allows (100 s)`,
      );
      checkFeed("eurUsd", reading(PRICE, NOW - 100n), { maxAgeS: 100 }, NOW); // exactly the limit: accepted
      checkFeed("eurUsd", reading(PRICE, NOW + 5n), { maxAgeS: 100 }, NOW); // stamped after "now": fresh
      const out = thrown(() =>
        checkFeed("tokenUsd", reading(250_000_000n, NOW), { bounds: { min: "0.5", max: "2" } }, NOW),
      );
      expect(out.message).to.equal(
        "price unavailable: the token/USD feed answered 2.5, outside FEED_BOUNDS_TOKEN_USD (0.5-2)",
      );
    });

    it("gives the token feed the swap's maxPriceAge unless its own is set", function () {
      const answer = reading(PRICE, NOW - 500n);
      checkFeed("tokenUsd", answer, {}, NOW, 600n);
      expect(thrown(() => checkFeed("tokenUsd", answer, {}, NOW, 400n)).message).to.include(
        "more than the swap's maxPriceAge allows (400 s)",
      );
      expect(thrown(() => checkFeed("tokenUsd", answer, { maxAgeS: 300 }, NOW, 600n)).message).to.include(
        "more than FEED_MAX_AGE_TOKEN_USD_S allows (300 s)",
      );
    });

    it("lets FX feeds through a weekend by default, not through a week", function () {
      // Last update Thursday 22:00 UTC, the FX market reopening Sunday 22:00: 72 h.
      checkFeed("eurUsd", reading(PRICE, NOW - 72n * 3600n), { maxAgeS: DEFAULT_FX_MAX_AGE_S }, NOW);
      expect(
        thrown(() => checkFeed("eurUsd", reading(PRICE, NOW - 7n * 86_400n), { maxAgeS: DEFAULT_FX_MAX_AGE_S }, NOW))
          .message,
      ).to.include("FEED_MAX_AGE_EUR_USD_S");
    });

    it("needs the sequencer up for longer than the grace period", function () {
      expect(thrown(() => checkSequencer(reading(1n, NOW - 10_000n, 0), 3600, NOW)).message).to.equal(
        "price unavailable: the L2 sequencer is down (SEQUENCER_UPTIME_FEED answered 1)",
      );
      expect(thrown(() => checkSequencer(reading(0n, NOW, 0, 0n), 3600, NOW)).message).to.include(
        "has no started round",
      );
      expect(thrown(() => checkSequencer(reading(0n, NOW - 3600n, 0), 3600, NOW)).message).to.equal(
        "price unavailable: the L2 sequencer came back up 3600 s ago; feeds are used again once SEQUENCER_GRACE_S (3600 s) has passed",
      );
      checkSequencer(reading(0n, NOW - 3601n, 0), 3600, NOW);
      checkSequencer(reading(0n, NOW, 0), 0, NOW + 1n);
    });

    it("takes now as the later of the machine's clock and the chain's", function () {
      expect(policyNow(1_000, () => 5_000_000)).to.equal(5_000n);
      expect(policyNow(9_000n, () => 5_000_000)).to.equal(9_000n);
    });
  });

  describe("on a chain (EDR), through the chain adapter", function () {
    const deploySuite = () => suiteFixture(ethers);

    /** The suite from its fixture, and an adapter with `policy` (made after the fixture is loaded, if a function). */
    async function deployed(policyOrMake?: FeedPolicy | (() => Promise<FeedPolicy>)) {
      const suite = await networkHelpers.loadFixture(deploySuite);
      const policy = typeof policyOrMake === "function" ? await policyOrMake() : policyOrMake;
      const provider = new BrowserProvider(connection.provider, undefined, { cacheTimeout: -1 });
      const adapter = await createChainAdapter({
        provider,
        privateKeys: [keyOf(1)],
        addresses: suite.addresses,
        journal: new MemoryJournal(),
        priceCacheMs: 0,
        ...(policy === undefined ? {} : { feedPolicy: policy }),
      });
      const dai = adapter.stableCoins.find((c) => c.symbol === "DAI")!;
      const trade = (kind: TradeKind, amount: bigint) =>
        adapter.trade[kind]({
          kind,
          wallet: suite.exchange.address as `0x${string}`,
          destinatary: suite.customer.address as `0x${string}`,
          amount,
          stable: dai,
        });
      const nonce = () => ethers.provider.getTransactionCount(suite.exchange.address, "pending");
      const now = async () => BigInt((await ethers.provider.getBlock("latest"))!.timestamp);
      return { ...suite, adapter, trade, nonce, now };
    }

    /** The price and a sell are both refused with `message`, and no transaction is sent. */
    async function refused(d: Awaited<ReturnType<typeof deployed>>, message: RegExp) {
      const before = await d.nonce();
      const price = await rejection(d.adapter.price.getPrice());
      expect(price).to.be.instanceOf(PriceUnavailableError);
      expect(price.message).to.match(message);
      const sell = await rejection(d.trade("sell", 10n ** 18n));
      expect(sell).to.be.instanceOf(PriceUnavailableError);
      expect(sell.message).to.match(message);
      expect(await d.nonce()).to.equal(before);
    }

    it("quotes from FX feeds last updated 72 h ago (a weekend) by default, and refuses at 97 h naming the setting", async function () {
      const d = await deployed();
      const now = await d.now();
      await d.feeds.eurUsd.updateRoundData(parseUnits("1.08", 8), now - 72n * 3600n, now - 72n * 3600n);
      expect((await d.adapter.price.getPrice()).rateForCashCurrency.EUR).to.be.a("number");
      await d.feeds.chfUsd.updateRoundData(parseUnits("1.12", 8), now - 97n * 3600n, now - 97n * 3600n);
      const error = await rejection(d.adapter.price.getPrice());
      expect(error).to.be.instanceOf(PriceUnavailableError);
      expect(error.message).to.match(
        /the CHF\/USD feed was last updated \d+ s ago .* more than FEED_MAX_AGE_CHF_USD_S allows \(345600 s\)/,
      );
      // Trades are priced by the token feed alone: a stale FX feed does not stop them.
      const receipt = await d.trade("sell", 10n ** 18n);
      expect(receipt.status).to.equal(true);
    });

    it("refuses the price and trades when the token feed is older than its own maximum age, though the swap would take it", async function () {
      const d = await deployed({ tokenUsd: { maxAgeS: 600 }, eurUsd: {}, chfUsd: {} });
      const now = await d.now();
      await d.feeds.tokenUsd.updateRoundData(PRICE, now - 700n, now - 700n);
      await refused(
        d,
        /the token\/USD feed was last updated \d+ s ago .*more than FEED_MAX_AGE_TOKEN_USD_S allows \(600 s\)/,
      );
      // The swap's own maximum (25 h) accepts it: without the setting, the same sell goes through.
      const lax = await deployed();
      await lax.feeds.tokenUsd.updateRoundData(PRICE, now - 700n, now - 700n);
      expect((await lax.trade("sell", 10n ** 18n)).status).to.equal(true);
    });

    it("refuses the price and trades while the token feed answers outside its bounds, and serves again once it is back", async function () {
      const d = await deployed({ tokenUsd: { bounds: { min: "0.5", max: "2" } }, eurUsd: {}, chfUsd: {} });
      await d.feeds.tokenUsd.updateAnswer(parseUnits("2.00000001", 8));
      await refused(d, /the token\/USD feed answered 2\.00000001, outside FEED_BOUNDS_TOKEN_USD \(0\.5-2\)/);
      await d.feeds.tokenUsd.updateAnswer(parseUnits("0.49", 8));
      await refused(d, /answered 0\.49, outside FEED_BOUNDS_TOKEN_USD/);
      await d.feeds.tokenUsd.updateAnswer(parseUnits("2", 8));
      expect((await d.adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(2);
      expect((await d.trade("buy", 10n ** 18n)).status).to.equal(true);
    });

    it("refuses the price, not trades, while an FX feed is outside its bounds", async function () {
      const d = await deployed({ tokenUsd: {}, eurUsd: { bounds: { min: "0.8", max: "1.5" } }, chfUsd: {} });
      await d.feeds.eurUsd.updateAnswer(parseUnits("0.1", 8));
      expect((await rejection(d.adapter.price.getPrice())).message).to.include(
        "the EUR/USD feed answered 0.1, outside FEED_BOUNDS_EUR_USD (0.8-1.5)",
      );
      expect((await d.trade("sell", 10n ** 18n)).status).to.equal(true);
    });

    it("follows the feed the swap reads now, when its owner replaces it", async function () {
      const d = await deployed({ tokenUsd: { bounds: { min: "0.5", max: "2" } }, eurUsd: {}, chfUsd: {} });
      expect((await d.trade("sell", 10n ** 18n)).status).to.equal(true); // the guard has read the first feed
      const replacement = await ethers.deployContract("MockAggregator", [8, "TTK / USD", parseUnits("5", 8)]);
      await d.swap.connect(d.owner).setPriceFeed(await replacement.getAddress());
      await refused(d, /answered 5, outside FEED_BOUNDS_TOKEN_USD/);
    });

    describe("with an L2 sequencer uptime feed", function () {
      async function withSequencer(graceS = 3600) {
        let sequencer: Awaited<ReturnType<typeof suiteFixture>>["feeds"]["eurUsd"] | undefined;
        const d = await deployed(async () => {
          sequencer = await ethers.deployContract("MockAggregator", [0, "L2 Sequencer Uptime Status Feed", 0]);
          return {
            tokenUsd: {},
            eurUsd: {},
            chfUsd: {},
            sequencer: { address: await sequencer!.getAddress(), graceS },
          };
        });
        return { ...d, sequencer: sequencer! };
      }

      it("refuses the price and trades within the grace period after the sequencer came up, and serves after it", async function () {
        const d = await withSequencer();
        // Deployed "up" just now: within the hour's grace.
        await refused(
          d,
          /the L2 sequencer came back up \d+ s ago; feeds are used again once SEQUENCER_GRACE_S \(3600 s\) has passed/,
        );
        const now = await d.now();
        await d.sequencer.updateRoundData(0, now - 3601n, now - 3601n);
        expect((await d.adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(1.25);
        expect((await d.trade("sell", 10n ** 18n)).status).to.equal(true);
      });

      it("refuses the price and trades while the sequencer is down", async function () {
        const d = await withSequencer(0);
        await networkHelpers.time.increase(5);
        expect((await d.trade("sell", 10n ** 18n)).status).to.equal(true);
        await d.sequencer.updateAnswer(1);
        await refused(d, /the L2 sequencer is down \(SEQUENCER_UPTIME_FEED answered 1\)/);
      });

      it("stops the start when SEQUENCER_UPTIME_FEED is not a feed", async function () {
        const suite = await networkHelpers.loadFixture(deploySuite);
        const provider = new BrowserProvider(connection.provider, undefined, { cacheTimeout: -1 });
        const error = await rejection(
          createChainAdapter({
            provider,
            privateKeys: [keyOf(1)],
            addresses: suite.addresses,
            journal: new MemoryJournal(),
            feedPolicy: {
              tokenUsd: {},
              eurUsd: {},
              chfUsd: {},
              sequencer: { address: suite.customer.address, graceS: 3600 },
            },
          }),
        );
        expect(error.message).to.match(
          new RegExp(`^SEQUENCER_UPTIME_FEED: ${suite.customer.address} is not a readable uptime feed`),
        );
      });
    });
  });
});
