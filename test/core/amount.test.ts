import { expect } from "chai";

import { decimalToBaseUnits, formatUnits, parseAmount } from "../../core/index.js";
import { expectInvalid } from "./fixtures.js";

const TOKEN = 10n ** 18n;
const BIG = 10n ** 40n; // a maximum that never gets in the way

describe("parseAmount", () => {
  describe("when the amount is a plain decimal", () => {
    const cases: Array<[string, number, bigint]> = [
      ["10", 6, 10_000_000n],
      ["0.5", 6, 500_000n],
      ["1.5", 6, 1_500_000n],
      ["0.000001", 6, 1n],
      ["123456.654321", 6, 123_456_654_321n],
      ["1.5", 18, 1_500_000_000_000_000_000n],
      ["0.000000000000000001", 18, 1n],
      ["1000", 18, 1000n * TOKEN],
      ["1.500000000", 6, 1_500_000n],
      ["010", 6, 10_000_000n],
      ["00.5", 6, 500_000n],
      ["7", 0, 7n],
      ["7.0", 0, 7n],
    ];
    for (const [text, decimals, expected] of cases) {
      it(`converts "${text}" with ${decimals} decimals to exactly ${expected} base units`, () => {
        expect(parseAmount("amount", text, decimals, BIG)).to.equal(expected);
      });
    }

    it("converts amounts beyond Number's precision exactly", () => {
      expect(parseAmount("amount", "9007199254740993.123456789012345678", 18, BIG)).to.equal(
        9_007_199_254_740_993_123_456_789_012_345_678n,
      );
    });
  });

  describe("when the text is not a plain decimal", () => {
    const cases: Array<[string, unknown]> = [
      ["an empty string", ""],
      ["a leading space", " 1"],
      ["a trailing space", "1 "],
      ["a plus sign", "+1"],
      ["a minus sign", "-1"],
      ["an exponent", "1e3"],
      ["a trailing point", "1."],
      ["a leading point", ".5"],
      ["hex", "0x10"],
      ["a comma", "1,5"],
      ["two points", "1.2.3"],
      ["an underscore", "1_000"],
      ["Infinity", "Infinity"],
      ["NaN", "NaN"],
      ["non-ASCII digits", "١٢"],
    ];
    for (const [what, value] of cases) {
      it(`refuses ${what}, naming the field`, () => {
        expectInvalid(() => parseAmount("amount", value, 6, BIG), "amount", /^amount: must be a plain decimal number/);
      });
    }
  });

  describe("when the amount is not a string", () => {
    for (const value of [10, 1.5, 10n, null, undefined, true, {}, ["1"]]) {
      it(`refuses ${typeof value === "bigint" ? `${value}n` : (JSON.stringify(value) ?? "undefined")}, naming the field`, () => {
        expectInvalid(() => parseAmount("amount", value, 6, BIG), "amount", /^amount: must be a string/);
      });
    }
  });

  describe("when the text is too long", () => {
    it("accepts 100 characters", () => {
      expect(parseAmount("amount", "1".repeat(100), 6, BIG ** 3n)).to.equal(BigInt("1".repeat(100)) * 10n ** 6n);
    });

    it("refuses 101 characters before looking at them", () => {
      expectInvalid(() => parseAmount("amount", "1".repeat(101), 6, BIG ** 3n), "amount", /at most 100 characters/);
    });
  });

  describe("when the amount has more decimal places than the currency", () => {
    it("refuses 7 places for a 6-decimal coin instead of truncating, saying at most 6 decimal places", () => {
      expectInvalid(
        () => parseAmount("amount", "0.0000001", 6, BIG),
        "amount",
        /^amount: must have at most 6 decimal places$/,
      );
    });

    it("refuses 19 places for the 18-decimal token", () => {
      expectInvalid(
        () => parseAmount("amount", "1.0000000000000000001", 18, BIG),
        "amount",
        /at most 18 decimal places$/,
      );
    });

    it("refuses any fraction for a 0-decimal currency", () => {
      expectInvalid(() => parseAmount("amount", "1.5", 0, BIG), "amount", /at most 0 decimal places$/);
    });
  });

  describe("when the amount is zero", () => {
    for (const text of ["0", "0.0", "0.000000", "000"]) {
      it(`refuses "${text}"`, () => {
        expectInvalid(() => parseAmount("amount", text, 6, BIG), "amount", /^amount: must be greater than 0$/);
      });
    }

    it("refuses zero written with more places than the currency has", () => {
      expectInvalid(() => parseAmount("amount", "0.00000000", 6, BIG), "amount", /greater than 0/);
    });
  });

  describe("when the amount is at or over the maximum", () => {
    const max = 10_000n * 10n ** 6n;

    it("accepts exactly the maximum", () => {
      expect(parseAmount("amount", "10000", 6, max)).to.equal(max);
      expect(parseAmount("amount", "10000.000000", 6, max)).to.equal(max);
    });

    it("refuses one base unit more, stating the maximum in human units", () => {
      expectInvalid(
        () => parseAmount("amount", "10000.000001", 6, max, { unit: "USD" }),
        "amount",
        /^amount: must be at most 10000 USD$/,
      );
    });

    it("states a fractional maximum without trailing zeros", () => {
      expectInvalid(
        () => parseAmount("amount", "2", 18, 15n * 10n ** 17n, { unit: "tokens" }),
        "amount",
        /at most 1\.5 tokens$/,
      );
    });
  });
});

describe("decimalToBaseUnits", () => {
  it("returns undefined for text that is not a plain decimal", () => {
    expect(decimalToBaseUnits("1e3", 6)).to.equal(undefined);
  });

  it("returns undefined for excess places when rounding is exact", () => {
    expect(decimalToBaseUnits("0.1234567", 6)).to.equal(undefined);
  });

  it("cuts excess places off when rounding down", () => {
    expect(decimalToBaseUnits("0.1234567", 6, "down")).to.equal(123_456n);
    expect(decimalToBaseUnits("0.0000009", 6, "down")).to.equal(0n);
  });

  it("refuses a decimals count that is not an integer from 0 to 255", () => {
    expect(() => decimalToBaseUnits("1", -1)).to.throw(RangeError);
    expect(() => decimalToBaseUnits("1", 1.5)).to.throw(RangeError);
  });
});

describe("formatUnits", () => {
  it("writes base units as a decimal without trailing zeros", () => {
    expect(formatUnits(1_500_000n, 6)).to.equal("1.5");
    expect(formatUnits(10_000n * 10n ** 6n, 6)).to.equal("10000");
    expect(formatUnits(1n, 18)).to.equal("0.000000000000000001");
    expect(formatUnits(0n, 6)).to.equal("0");
    expect(formatUnits(-1_500_000n, 6)).to.equal("-1.5");
  });

  it("round-trips with parseAmount", () => {
    for (const units of [1n, 999_999n, 1_000_000n, 123_456_789n]) {
      expect(parseAmount("amount", formatUnits(units, 6), 6, BIG)).to.equal(units);
    }
  });
});
