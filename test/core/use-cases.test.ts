import { expect } from "chai";

import {
  ChainUnavailableError,
  InsufficientFundsError,
  InvalidArgumentError,
  PriceUnavailableError,
  UnknownWalletError,
  createUseCases,
  type PricePort,
  type PriceRecord,
  type TradeKind,
  type TradeOrder,
  type TradeResolution,
} from "../../core/index.js";
import { WholeTradePort } from "../helpers/whole-trade-port.js";
import { CONFIG, CUSTOMER, USDT, WALLET, fakeReceipt, request } from "./fixtures.js";

const PRICE: PriceRecord = {
  cryptoCurrency: "TKN",
  rateForCashCurrency: { CHF: 0.91, EUR: 0.95, USD: 1.02 },
  rateWithDiscountForCashCurrency: {},
};

/** A trade port that records its calls and answers with a receipt, or with `failure`. */
class FakeTradePort extends WholeTradePort {
  readonly calls: Array<{ method: TradeKind; order: TradeOrder }> = [];
  failure: Error | undefined;

  protected async run(method: TradeKind, order: TradeOrder) {
    this.calls.push({ method, order });
    if (this.failure) throw this.failure;
    return fakeReceipt(order);
  }
  async resolve(): Promise<TradeResolution> {
    return { state: "dropped" };
  }
}

class FakePricePort implements PricePort {
  calls = 0;
  answer: () => Promise<PriceRecord> = async () => PRICE;
  getPrice() {
    this.calls++;
    return this.answer();
  }
}

function setup() {
  const trade = new FakeTradePort();
  const price = new FakePricePort();
  return { trade, price, useCases: createUseCases({ trade, price, config: CONFIG }) };
}

/** Awaits `promise` and returns what it rejected with. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  expect.fail("expected the promise to reject");
}

describe("the use cases", () => {
  describe("when a trade request is valid", () => {
    for (const kind of ["sell", "buy", "remittance"] as const) {
      it(`${kind} calls the port's ${kind} once with the validated order and returns its receipt`, async () => {
        const { trade, useCases } = setup();
        const receipt = await useCases[kind](request({ amount: "2" }));
        const amount = kind === "sell" ? 2n * 10n ** 18n : 2_000_000n;
        expect(trade.calls).to.deep.equal([
          { method: kind, order: { kind, wallet: WALLET, destinatary: CUSTOMER, amount, stable: USDT } },
        ]);
        expect(receipt).to.deep.equal(fakeReceipt(trade.calls[0]!.order));
      });
    }
  });

  describe("when a trade request is invalid", () => {
    for (const kind of ["sell", "buy", "remittance"] as const) {
      it(`${kind} rejects with InvalidArgumentError and never calls the port`, async () => {
        const { trade, useCases } = setup();
        const error = await rejection(useCases[kind](request({ amount: "1e3" })));
        expect(error).to.be.instanceOf(InvalidArgumentError);
        expect((error as InvalidArgumentError).field).to.equal("amount");
        expect(trade.calls).to.deep.equal([]);
      });
    }

    it("rejects rather than throws, so callers only need to await", () => {
      const { useCases } = setup();
      const result = useCases.buy(null);
      expect(result).to.be.instanceOf(Promise);
      return result.then(
        () => expect.fail("expected a rejection"),
        (error: unknown) => expect(error).to.be.instanceOf(InvalidArgumentError),
      );
    });
  });

  describe("when the trade port fails", () => {
    for (const failure of [
      new UnknownWalletError(WALLET),
      new InsufficientFundsError("userAddress: holds 1 token, needs 2"),
      new ChainUnavailableError("connection refused"),
      new Error("something unexpected"),
    ]) {
      it(`passes ${failure.name} on unchanged`, async () => {
        const { trade, useCases } = setup();
        trade.failure = failure;
        expect(await rejection(useCases.sell(request()))).to.equal(failure);
      });
    }
  });

  describe("price", () => {
    it("returns the port's record", async () => {
      const { price, useCases } = setup();
      expect(await useCases.price()).to.deep.equal(PRICE);
      expect(price.calls).to.equal(1);
    });

    it("accepts discount rates for the same three currencies", async () => {
      const { price, useCases } = setup();
      const record = { ...PRICE, rateWithDiscountForCashCurrency: { CHF: 0.9, EUR: 0.94, USD: 1 } };
      price.answer = async () => record;
      expect(await useCases.price()).to.deep.equal(record);
    });

    it("passes the port's PriceUnavailableError on unchanged", async () => {
      const { price, useCases } = setup();
      const failure = new PriceUnavailableError("feed is stale");
      price.answer = () => Promise.reject(failure);
      expect(await rejection(useCases.price())).to.equal(failure);
    });

    for (const [what, rates] of [
      ["a zero rate", { CHF: 0, EUR: 0.95, USD: 1.02 }],
      ["a negative rate", { CHF: 0.91, EUR: -0.95, USD: 1.02 }],
      ["a NaN rate", { CHF: 0.91, EUR: 0.95, USD: Number.NaN }],
      ["an infinite rate", { CHF: 0.91, EUR: 0.95, USD: Number.POSITIVE_INFINITY }],
      ["a missing currency", { CHF: 0.91, EUR: 0.95 }],
      ["an extra currency", { CHF: 0.91, EUR: 0.95, USD: 1.02, GBP: 0.8 }],
      ["a rate given as text", { CHF: "0.91", EUR: 0.95, USD: 1.02 }],
    ] as Array<[string, Record<string, unknown>]>) {
      it(`refuses a record with ${what} with PriceUnavailableError`, async () => {
        const { price, useCases } = setup();
        price.answer = async () => ({ ...PRICE, rateForCashCurrency: rates }) as unknown as PriceRecord;
        expect(await rejection(useCases.price())).to.be.instanceOf(PriceUnavailableError);
      });
    }

    it("checks each new record, even after a good one was served from a cache", async () => {
      const { price, useCases } = setup();
      const good = { ...PRICE };
      price.answer = async () => good;
      expect(await useCases.price()).to.equal(good);
      expect(await useCases.price()).to.equal(good); // the same object again: checked once
      price.answer = async () => ({ ...PRICE, rateForCashCurrency: { CHF: 0, EUR: 0.95, USD: 1.02 } });
      expect(await rejection(useCases.price())).to.be.instanceOf(PriceUnavailableError);
      price.answer = async () => good;
      expect(await useCases.price()).to.equal(good);
    });

    describe("now(): the price at hand without waiting", () => {
      /** A port that holds `held` (as a cache holds its fresh record), and answers getPrice with it. */
      const holding = () => {
        const { price, useCases } = setup();
        const port = Object.assign(price, { held: undefined as PriceRecord | undefined, current: () => port.held });
        port.answer = async () => port.held!;
        return { port, useCases };
      };

      it("is the record the port holds once it has passed the checks, without asking the port", async () => {
        const { port, useCases } = holding();
        port.held = { ...PRICE };
        expect(useCases.price.now(), "not checked yet").to.equal(undefined);
        expect(await useCases.price()).to.equal(port.held);
        const calls = port.calls;
        expect(useCases.price.now()).to.equal(port.held);
        expect(port.calls, "getPrice not called").to.equal(calls);
      });

      it("is undefined when the port holds nothing (an expired cache) or a record nobody has checked", async () => {
        const { port, useCases } = holding();
        port.held = { ...PRICE };
        await useCases.price();
        port.held = undefined;
        expect(useCases.price.now()).to.equal(undefined);
        // A new record, here a bad one: only price() may pass it on, after its checks.
        port.held = { ...PRICE, rateForCashCurrency: { CHF: 0, EUR: 0.95, USD: 1.02 } };
        expect(useCases.price.now()).to.equal(undefined);
        expect(await rejection(useCases.price())).to.be.instanceOf(PriceUnavailableError);
        expect(useCases.price.now(), "still not passed").to.equal(undefined);
      });

      it("is undefined for a port without current(): every price asks the port", async () => {
        const { useCases } = setup();
        await useCases.price();
        expect(useCases.price.now()).to.equal(undefined);
      });
    });

    it("refuses a record whose discount rates are partly filled", async () => {
      const { price, useCases } = setup();
      price.answer = async () =>
        ({ ...PRICE, rateWithDiscountForCashCurrency: { CHF: 0.9 } }) as unknown as PriceRecord;
      expect(await rejection(useCases.price())).to.be.instanceOf(PriceUnavailableError);
    });
  });

  describe("when the configuration is unusable", () => {
    it("createUseCases throws at start-up instead of refusing every request", () => {
      const trade = new FakeTradePort();
      const price = new FakePricePort();
      expect(() => createUseCases({ trade, price, config: { ...CONFIG, stableCoins: [] } })).to.throw(TypeError);
    });
  });
});
