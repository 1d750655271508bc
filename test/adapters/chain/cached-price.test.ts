import { expect } from "chai";
import { BrowserProvider, HDNodeWallet, parseUnits } from "ethers";
import { network } from "hardhat";

import { CachedPricePort } from "../../../adapters/chain/price/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import { createChainAdapter } from "../../../adapters/chain/index.js";
import { loadConfig } from "../../../adapters/config/env.js";
import { PriceUnavailableError, type PricePort, type PriceRecord } from "../../../core/index.js";
import { suiteFixture } from "../../helpers/suite.js";

const connection = await network.create();
const deploySuite = () => suiteFixture(connection.ethers);
const EXCHANGE_KEY = HDNodeWallet.fromPhrase(
  "test test test test test test test test test test test junk",
  undefined,
  "m/44'/60'/0'/0/1",
).privateKey;

/** A price port that counts its reads; each read answers a new USD rate (1, 2, 3, ...). */
class CountingPricePort implements PricePort {
  calls = 0;
  /** When set, the next reads reject with it. */
  failure: Error | undefined;
  /** When set, reads wait for `release()`. */
  #gate: { promise: Promise<void>; open: () => void } | undefined;

  hold(): void {
    let open!: () => void;
    const promise = new Promise<void>((resolve) => (open = resolve));
    this.#gate = { promise, open };
  }

  release(): void {
    this.#gate?.open();
    this.#gate = undefined;
  }

  async getPrice(): Promise<PriceRecord> {
    this.calls += 1;
    const call = this.calls;
    if (this.#gate) await this.#gate.promise;
    if (this.failure) throw this.failure;
    return {
      cryptoCurrency: "TTK",
      rateForCashCurrency: { CHF: call, EUR: call, USD: call },
      rateWithDiscountForCashCurrency: {},
    };
  }
}

/** A hand-driven monotonic clock. */
function clock(start = 1_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe("the price cache (CachedPricePort)", function () {
  it("serves a second quote within the TTL from memory: the port is read once", async function () {
    const port = new CountingPricePort();
    const time = clock();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: time.now });
    const first = await cache.getPrice();
    time.advance(999);
    const second = await cache.getPrice();
    expect(port.calls).to.equal(1);
    expect(second).to.deep.equal(first);
  });

  it("holds its record as current() exactly while getPrice would serve it from memory", async function () {
    const port = new CountingPricePort();
    const time = clock();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: time.now });
    expect(cache.current(), "nothing read yet").to.equal(undefined);
    port.hold();
    const reading = cache.getPrice();
    expect(cache.current(), "a read in flight is not at hand").to.equal(undefined);
    port.release();
    const first = await reading;
    time.advance(999);
    expect(cache.current()).to.equal(first);
    time.advance(1);
    expect(cache.current(), "expired").to.equal(undefined);
    port.failure = new PriceUnavailableError("stale");
    await cache.getPrice().catch(() => {});
    expect(cache.current(), "after a failed refresh").to.equal(undefined);
    expect(new CachedPricePort(port, { ttlMs: 0 }).current(), "TTL 0 holds nothing").to.equal(undefined);
    expect(port.calls, "current() never reads the port").to.equal(2);
  });

  it("reads the port again once the TTL has passed, and serves the new record", async function () {
    const port = new CountingPricePort();
    const time = clock();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: time.now });
    expect((await cache.getPrice()).rateForCashCurrency.USD).to.equal(1);
    time.advance(1000);
    expect((await cache.getPrice()).rateForCashCurrency.USD).to.equal(2);
    expect(port.calls).to.equal(2);
  });

  it("counts a record's age from the start of its read, so a slow read is never served past the TTL", async function () {
    const port = new CountingPricePort();
    const time = clock();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: time.now });
    port.hold();
    const pending = cache.getPrice();
    time.advance(600); // the read takes 600 ms
    port.release();
    await pending;
    time.advance(400); // 1000 ms after the read started: too old
    await cache.getPrice();
    expect(port.calls).to.equal(2);
  });

  it("shares one read between 100 concurrent misses", async function () {
    const port = new CountingPricePort();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: clock().now });
    port.hold();
    const quotes = Array.from({ length: 100 }, () => cache.getPrice());
    await Promise.resolve();
    port.release();
    const records = await Promise.all(quotes);
    expect(port.calls).to.equal(1);
    expect(new Set(records.map((r) => r.rateForCashCurrency.USD))).to.deep.equal(new Set([1]));
  });

  it("does not cache an error: the next call reads the port again and can succeed", async function () {
    const port = new CountingPricePort();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: clock().now });
    port.failure = new PriceUnavailableError("the EUR/USD feed answered 0");
    let caught: unknown;
    await cache.getPrice().catch((error: unknown) => (caught = error));
    expect(caught).to.be.instanceOf(PriceUnavailableError);
    port.failure = undefined;
    expect((await cache.getPrice()).rateForCashCurrency.USD).to.equal(2);
    expect(port.calls).to.equal(2);
  });

  it("gives every caller that joined a failing read its error, then reads again", async function () {
    const port = new CountingPricePort();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: clock().now });
    port.failure = new PriceUnavailableError("stale");
    port.hold();
    const quotes = Array.from({ length: 10 }, () =>
      cache.getPrice().then(
        () => "ok",
        (error: unknown) => error,
      ),
    );
    port.release();
    const outcomes = await Promise.all(quotes);
    expect(outcomes.every((o) => o instanceof PriceUnavailableError)).to.equal(true);
    expect(port.calls).to.equal(1);
    port.failure = undefined;
    await cache.getPrice();
    expect(port.calls).to.equal(2);
  });

  it("does not serve a record cached before a failed refresh once it has expired", async function () {
    const port = new CountingPricePort();
    const time = clock();
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: time.now });
    await cache.getPrice();
    time.advance(1500);
    port.failure = new PriceUnavailableError("stale");
    let caught: unknown;
    await cache.getPrice().catch((error: unknown) => (caught = error));
    expect(caught).to.be.instanceOf(PriceUnavailableError);
  });

  it("recovers when the port throws synchronously", async function () {
    let calls = 0;
    const port: PricePort = {
      getPrice() {
        calls += 1;
        if (calls === 1) throw new PriceUnavailableError("sync");
        return Promise.resolve({
          cryptoCurrency: "TTK",
          rateForCashCurrency: { CHF: 1, EUR: 1, USD: 1 },
          rateWithDiscountForCashCurrency: {},
        });
      },
    };
    const cache = new CachedPricePort(port, { ttlMs: 1000, now: clock().now });
    let caught: unknown;
    await cache.getPrice().catch((error: unknown) => (caught = error));
    expect(caught).to.be.instanceOf(PriceUnavailableError);
    expect((await cache.getPrice()).rateForCashCurrency.USD).to.equal(1);
    expect(calls).to.equal(2);
  });

  it("with a TTL of 0 sends every call to the port, concurrent ones included", async function () {
    const port = new CountingPricePort();
    const cache = new CachedPricePort(port, { ttlMs: 0, now: clock().now });
    await cache.getPrice();
    await cache.getPrice();
    await Promise.all(Array.from({ length: 5 }, () => cache.getPrice()));
    expect(port.calls).to.equal(7);
  });

  it("refuses a negative or non-finite TTL", function () {
    const port = new CountingPricePort();
    expect(() => new CachedPricePort(port, { ttlMs: -1 })).to.throw(RangeError, /ttlMs/);
    expect(() => new CachedPricePort(port, { ttlMs: Number.NaN })).to.throw(RangeError, /ttlMs/);
  });

  it("works on the real clock: a 200 ms TTL expires", async function () {
    const port = new CountingPricePort();
    const cache = new CachedPricePort(port, { ttlMs: 200 });
    await cache.getPrice();
    await cache.getPrice();
    expect(port.calls).to.equal(1);
    await new Promise((resolve) => setTimeout(resolve, 250));
    await cache.getPrice();
    expect(port.calls).to.equal(2);
  });
});

describe("the chain adapter's price", function () {
  async function adapterWith(priceCacheMs?: number) {
    const suite = await connection.networkHelpers.loadFixture(deploySuite);
    const adapter = await createChainAdapter({
      provider: new BrowserProvider(connection.provider, undefined, { cacheTimeout: -1 }),
      privateKeys: [EXCHANGE_KEY],
      addresses: suite.addresses,
      journal: new MemoryJournal(),
      ...(priceCacheMs === undefined ? {} : { priceCacheMs }),
    });
    return { adapter, feeds: suite.feeds };
  }

  it("is cached for a second by default: a feed update within the TTL is not seen yet", async function () {
    const { adapter, feeds } = await adapterWith();
    expect((await adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(1.25);
    await feeds.tokenUsd.updateAnswer(parseUnits("2", 8));
    expect((await adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(1.25);
  });

  it("follows the feed on the next call once the TTL has passed", async function () {
    const { adapter, feeds } = await adapterWith(50);
    expect((await adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(1.25);
    await feeds.tokenUsd.updateAnswer(parseUnits("2", 8));
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect((await adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(2);
  });

  it("reads the chain on every call with priceCacheMs 0", async function () {
    const { adapter, feeds } = await adapterWith(0);
    expect((await adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(1.25);
    await feeds.tokenUsd.updateAnswer(parseUnits("2", 8));
    expect((await adapter.price.getPrice()).rateForCashCurrency.USD).to.equal(2);
  });
});

describe("PRICE_CACHE_MS", function () {
  it("defaults to 1000 ms and accepts 0 (off) up to 60000", function () {
    expect(loadConfig({}).priceCacheMs).to.equal(1000);
    expect(loadConfig({ PRICE_CACHE_MS: "" }).priceCacheMs).to.equal(1000);
    expect(loadConfig({ PRICE_CACHE_MS: "0" }).priceCacheMs).to.equal(0);
    expect(loadConfig({ PRICE_CACHE_MS: "60000" }).priceCacheMs).to.equal(60_000);
  });

  for (const bad of ["-1", "1.5", "60001", "1s"]) {
    it(`refuses ${JSON.stringify(bad)}, naming the variable`, function () {
      expect(() => loadConfig({ PRICE_CACHE_MS: bad })).to.throw(/PRICE_CACHE_MS: must be an integer from 0 to 60000/);
    });
  }
});
