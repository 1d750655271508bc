import { expect } from "chai";
import fc from "fast-check";

import {
  bumped,
  gwei,
  marketFees,
  noopFees,
  replacementFees,
  tradeFees,
} from "../../../adapters/chain/blocks/index.js";
import { minimumOut } from "../../../adapters/chain/trade/index.js";
import { FeesTooHighError } from "../../../core/index.js";

const GWEI = 10n ** 9n;
const fee = fc.bigInt({ min: 0n, max: 10n ** 15n });
const fees = fc
  .tuple(fee, fee)
  .map(([a, b]) =>
    a >= b ? { maxFeePerGas: a, maxPriorityFeePerGas: b } : { maxFeePerGas: b, maxPriorityFeePerGas: a },
  );

describe("fees", function () {
  it("offers 2 x the next base fee + the priority fee for a new transaction", function () {
    expect(marketFees({ baseFee: 30n * GWEI, priorityFee: 2n * GWEI })).to.deep.equal({
      maxFeePerGas: 62n * GWEI,
      maxPriorityFeePerGas: 2n * GWEI,
    });
  });

  it("bumps both fields by more than 10 %: geth's replacement rule", function () {
    fc.assert(
      fc.property(fees, (last) => {
        const next = bumped(last);
        expect(next.maxFeePerGas * 10n).to.be.greaterThan(last.maxFeePerGas * 11n - 10n);
        expect(next.maxFeePerGas * 100n >= last.maxFeePerGas * 110n).to.equal(true);
        expect(next.maxPriorityFeePerGas * 100n >= last.maxPriorityFeePerGas * 110n).to.equal(true);
        expect(next.maxPriorityFeePerGas <= next.maxFeePerGas).to.equal(true);
      }),
    );
    expect(bumped({ maxFeePerGas: 0n, maxPriorityFeePerGas: 0n })).to.deep.equal({
      maxFeePerGas: 1n,
      maxPriorityFeePerGas: 1n,
    });
  });

  describe("a replacement", function () {
    it("takes the market's fees when they are higher: a trade caught by a spike catches up in one", function () {
      const last = { maxFeePerGas: 2_240_000_000n, maxPriorityFeePerGas: 1n };
      const spiked = marketFees({ baseFee: 100n * GWEI, priorityFee: GWEI });
      expect(replacementFees(last, spiked, 500n * GWEI)).to.deep.equal(spiked);
    });

    it("takes the last + 10 % + 1 wei when the market is lower", function () {
      const last = { maxFeePerGas: 10n * GWEI, maxPriorityFeePerGas: GWEI };
      expect(replacementFees(last, { maxFeePerGas: GWEI, maxPriorityFeePerGas: 1n }, 500n * GWEI)).to.deep.equal({
        maxFeePerGas: 11n * GWEI + 1n,
        maxPriorityFeePerGas: 1_100_000_001n,
      });
    });

    it("never bids above the cap, and is not made when the cap leaves no room for a valid bump", function () {
      fc.assert(
        fc.property(fees, fees, fee, (last, market, cap) => {
          const next = replacementFees(last, market, cap);
          if (next === null) {
            const least = bumped(last);
            expect(least.maxFeePerGas > cap || least.maxPriorityFeePerGas > cap).to.equal(true);
            return;
          }
          expect(next.maxFeePerGas <= cap).to.equal(true);
          expect(next.maxPriorityFeePerGas <= next.maxFeePerGas).to.equal(true);
          const least = bumped(last);
          expect(
            next.maxFeePerGas >= least.maxFeePerGas && next.maxPriorityFeePerGas >= least.maxPriorityFeePerGas,
          ).to.equal(true);
        }),
      );
      expect(
        replacementFees(
          { maxFeePerGas: 50n * GWEI, maxPriorityFeePerGas: GWEI },
          marketFees({ baseFee: 100n * GWEI, priorityFee: GWEI }),
          50n * GWEI,
        ),
      ).to.equal(null);
    });
  });

  describe("the no-op that frees an expired nonce", function () {
    it("bids the market's fees up to the cap", function () {
      const last = { maxFeePerGas: 2n * GWEI, maxPriorityFeePerGas: GWEI };
      expect(noopFees(last, marketFees({ baseFee: 100n * GWEI, priorityFee: 2n * GWEI }), 50n * GWEI)).to.deep.equal({
        maxFeePerGas: 50n * GWEI,
        maxPriorityFeePerGas: 2n * GWEI,
      });
    });

    it("outbids the last broadcast even above the cap, so the cap never wedges the wallet", function () {
      fc.assert(
        fc.property(fees, fees, fee, (last, market, cap) => {
          const noop = noopFees(last, market, cap);
          const least = bumped(last);
          expect(
            noop.maxFeePerGas >= least.maxFeePerGas && noop.maxPriorityFeePerGas >= least.maxPriorityFeePerGas,
          ).to.equal(true);
          expect(noop.maxPriorityFeePerGas <= noop.maxFeePerGas).to.equal(true);
        }),
      );
      const atCap = { maxFeePerGas: 50n * GWEI, maxPriorityFeePerGas: GWEI };
      expect(
        noopFees(atCap, marketFees({ baseFee: 100n * GWEI, priorityFee: GWEI }), 50n * GWEI).maxFeePerGas,
      ).to.equal(55n * GWEI + 1n);
    });
  });

  describe("a new trade's fees", function () {
    it("are the market's, capped, with the tip cut to what the cap leaves above the base fee", function () {
      expect(tradeFees({ baseFee: GWEI, priorityFee: GWEI }, 100n * GWEI)).to.deep.equal({
        maxFeePerGas: 3n * GWEI,
        maxPriorityFeePerGas: GWEI,
      });
      expect(tradeFees({ baseFee: 40n * GWEI, priorityFee: 2n * GWEI }, 50n * GWEI)).to.deep.equal({
        maxFeePerGas: 50n * GWEI,
        maxPriorityFeePerGas: 2n * GWEI,
      });
      expect(tradeFees({ baseFee: 49n * GWEI, priorityFee: 2n * GWEI }, 50n * GWEI)).to.deep.equal({
        maxFeePerGas: 50n * GWEI,
        maxPriorityFeePerGas: GWEI,
      });
    });

    it("are refused while the next base fee is above the cap, saying why", function () {
      expect(() => tradeFees({ baseFee: 100n * GWEI + 1n, priorityFee: GWEI }, 100n * GWEI))
        .to.throw(FeesTooHighError)
        .with.property(
          "message",
          "the chain's base fee is 100.000000001 gwei, above this service's cap of 100 gwei; nothing was sent: retry once fees fall",
        );
    });
  });

  it("writes wei as exact gwei", function () {
    expect([gwei(0n), gwei(2_240_000_000n), gwei(1n), gwei(100n * GWEI)]).to.deep.equal([
      "0",
      "2.24",
      "0.000000001",
      "100",
    ]);
  });
});

describe("minimumOut", function () {
  it("keeps the payout less the slippage, rounded up: the tolerance is never wider than configured", function () {
    expect(minimumOut(2_500_000n, 100)).to.equal(2_475_000n);
    expect(minimumOut(1_000_001n, 100)).to.equal(990_001n); // 990000.99 rounds up
    expect(minimumOut(5n, 0)).to.equal(5n);
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 40n }), fc.integer({ min: 0, max: 5_000 }), (out, bps) => {
        const min = minimumOut(out, bps);
        expect(min * 10_000n >= out * BigInt(10_000 - bps)).to.equal(true);
        expect((min - 1n) * 10_000n < out * BigInt(10_000 - bps)).to.equal(true);
        expect(min <= out).to.equal(true);
      }),
    );
  });
});
