import { expect } from "chai";
import fc from "fast-check";

import {
  InvalidArgumentError,
  MAX_QUOTE_SLIPPAGE_BPS,
  QuoteExpiredError,
  QuoteMismatchError,
  QuoteNotFoundError,
  QuoteUsedError,
  parseQuoteId,
  parseQuoteRequest,
  quoteMinOut,
  redeemQuote,
  type StoredQuote,
  type TradeConfig,
  type TradeOrder,
} from "../../core/index.js";
import { MemoryJournal } from "../helpers/memory-journal.js";
import { CONFIG, CUSTOMER, DAI, USDT, WALLET, expectInvalid } from "./fixtures.js";

const OTHER_WALLET = "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb";

function body(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { kind: "sell", amount: "2.5", usdAddress: USDT.address, ...overrides };
}

describe("parseQuoteRequest", () => {
  describe("when the request is valid", () => {
    it("quotes the only wallet, paying itself for the estimate, at 50 bps by default", () => {
      const quote = parseQuoteRequest(body(), CONFIG, [WALLET]);
      expect(quote).to.deep.equal({
        order: { kind: "sell", wallet: WALLET, destinatary: WALLET, amount: 25n * 10n ** 17n, stable: USDT },
        destinataryNamed: false,
        slippageBps: 50,
        issues: [],
      });
    });

    it("takes the named wallet, destinatary and slippage, and a buy's amount in the coin's decimals", () => {
      const quote = parseQuoteRequest(
        body({
          kind: "buy",
          userAddress: OTHER_WALLET,
          destinatary: CUSTOMER,
          slippageBps: 0,
          usdAddress: DAI.address,
        }),
        CONFIG,
        [WALLET, OTHER_WALLET],
      );
      expect(quote.order).to.deep.equal({
        kind: "buy",
        wallet: OTHER_WALLET,
        destinatary: CUSTOMER,
        amount: 25n * 10n ** 17n,
        stable: DAI,
      });
      expect(quote.destinataryNamed).to.equal(true);
      expect(quote.slippageBps).to.equal(0);
    });

    it("turns the service's amount limits into issues with their numbers", () => {
      const config: TradeConfig = { ...CONFIG, limits: { ...CONFIG.limits, minSellTokens: 10n ** 18n, minUsd: "5" } };
      expect(parseQuoteRequest(body({ amount: "0.5" }), config, [WALLET]).issues).to.deep.equal([
        {
          type: "amount_below_minimum",
          message: "amount 0.5 tokens is below the service's minimum of 1 tokens",
          details: { amount: "0.5", minimum: "1" },
        },
      ]);
      expect(
        parseQuoteRequest(body({ kind: "remittance", amount: "10000.01" }), config, [WALLET]).issues,
      ).to.deep.equal([
        {
          type: "amount_above_maximum",
          message: "amount 10000.01 USD is above the service's maximum of 10000 USD",
          details: { amount: "10000.01", maximum: "10000" },
        },
      ]);
    });
  });

  describe("when the request is not valid", () => {
    it("names userAddress when the service has several wallets and none is named", () => {
      expectInvalid(
        () => parseQuoteRequest(body(), CONFIG, [WALLET, OTHER_WALLET]),
        "userAddress",
        /several|2 wallets/,
      );
    });

    it("refuses a forbidden destinatary only when one is named", () => {
      const config: TradeConfig = {
        ...CONFIG,
        forbiddenDestinataries: [{ address: WALLET, what: "an exchange wallet" }],
      };
      expect(parseQuoteRequest(body(), config, [WALLET]).order.destinatary).to.equal(WALLET);
      expectInvalid(() => parseQuoteRequest(body({ destinatary: WALLET }), config, [WALLET]), "destinatary");
    });

    it("names the first bad field, in the order kind, userAddress, destinatary, amount, usdAddress, slippageBps", () => {
      const cases: Array<[unknown, string]> = [
        ["sell", "request"],
        [null, "request"],
        [body({ kind: undefined }), "kind"],
        [body({ kind: "Sell" }), "kind"],
        [body({ kind: "swap", userAddress: 1 }), "kind"],
        [body({ userAddress: 1, destinatary: 1 }), "userAddress"],
        [body({ destinatary: 1, amount: 1 }), "destinatary"],
        [body({ amount: undefined }), "amount"],
        [body({ amount: 2.5 }), "amount"],
        [body({ usdAddress: undefined }), "usdAddress"],
        [body({ slippageBps: MAX_QUOTE_SLIPPAGE_BPS + 1 }), "slippageBps"],
        [body({ slippageBps: 0.5 }), "slippageBps"],
        [body({ slippageBps: "10" }), "slippageBps"],
        [body({ minOut: "1" }), "minOut"],
        [body({ userAddress: "0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed" }), "userAddress"],
        [body({ amount: "-1" }), "amount"],
        [body({ amount: "1000000000000.000000000000000001" }), "amount"],
      ];
      for (const [input, field] of cases) expectInvalid(() => parseQuoteRequest(input, CONFIG, [WALLET]), field);
    });

    it("throws nothing but InvalidArgumentError for any JSON value", () => {
      fc.assert(
        fc.property(fc.jsonValue(), fc.record({ kind: fc.string(), slippageBps: fc.jsonValue() }), (value, partial) => {
          for (const input of [value, { ...body(), ...partial }]) {
            try {
              parseQuoteRequest(input, CONFIG, [WALLET]);
            } catch (error) {
              expect(error).to.be.instanceOf(InvalidArgumentError);
            }
          }
        }),
      );
    });
  });
});

describe("quoteMinOut", () => {
  it("rounds down, and is the expected amount at 0 bps", () => {
    expect(quoteMinOut(1_000_001n, 50)).to.equal(995_000n); // 995000.995
    expect(quoteMinOut(1_000_001n, 0)).to.equal(1_000_001n);
    expect(quoteMinOut(1n, 1)).to.equal(0n);
  });

  it("never promises more than the expected amount less the slippage, nor a unit less than that rounds to", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 200n }), fc.integer({ min: 0, max: 1000 }), (expected, bps) => {
        const min = quoteMinOut(expected, bps);
        expect(min * 10_000n <= expected * BigInt(10_000 - bps)).to.equal(true);
        expect((min + 1n) * 10_000n > expected * BigInt(10_000 - bps)).to.equal(true);
      }),
    );
  });
});

describe("parseQuoteId", () => {
  it("takes only the ids the service issues", () => {
    expect(parseQuoteId(`q_${"a1".repeat(16)}`)).to.equal(`q_${"a1".repeat(16)}`);
    for (const bad of ["", "q_", `q_${"A1".repeat(16)}`, `q_${"a1".repeat(17)}`, `x_${"a1".repeat(16)}`])
      expectInvalid(() => parseQuoteId(bad), "Quote-Id");
  });
});

describe("redeemQuote", () => {
  const order: TradeOrder = { kind: "sell", wallet: WALLET, destinatary: CUSTOMER, amount: 10n ** 18n, stable: USDT };
  const stored = (overrides: Partial<StoredQuote> = {}): StoredQuote => ({
    id: `q_${"0".repeat(31)}1`,
    scope: "s",
    kind: "sell",
    wallet: WALLET,
    destinatary: CUSTOMER,
    stable: USDT.address,
    amount: 10n ** 18n,
    minOut: 1_240_000n,
    expiresAt: new Date(Date.now() + 10_000),
    createdAt: new Date(),
    tradeId: null,
    ...overrides,
  });

  async function refusal(quote: StoredQuote | undefined, against: TradeOrder = order, scope = "s"): Promise<unknown> {
    const journal = new MemoryJournal();
    if (quote) await journal.saveQuote(quote);
    return redeemQuote(journal, `q_${"0".repeat(31)}1`, against, scope, "t1", Date.now()).then(
      () => undefined,
      (error: unknown) => error,
    );
  }

  it("uses the quote for the trade and answers its terms", async () => {
    const journal = new MemoryJournal();
    const quote = stored();
    await journal.saveQuote(quote);
    expect(await redeemQuote(journal, quote.id, order, "s", "t1", Date.now())).to.deep.equal({
      quoteId: quote.id,
      minOut: 1_240_000n,
      expiresAt: quote.expiresAt.getTime(),
    });
    expect((await journal.getQuote(quote.id))?.tradeId).to.equal("t1");
  });

  it("refuses an unknown quote, or another scope's, as not found", async () => {
    expect(await refusal(undefined)).to.be.instanceOf(QuoteNotFoundError);
    expect(await refusal(stored(), order, "other")).to.be.instanceOf(QuoteNotFoundError);
  });

  it("names the first field that differs from the quote", async () => {
    const cases: Array<[Partial<TradeOrder>, string]> = [
      [{ kind: "buy" }, "kind"],
      [{ wallet: "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb" }, "userAddress"],
      [{ destinatary: WALLET }, "destinatary"],
      [{ stable: DAI }, "usdAddress"],
      [{ amount: 10n ** 18n + 1n }, "amount"],
    ];
    for (const [change, field] of cases) {
      const error = await refusal(stored(), { ...order, ...change });
      expect(error).to.be.instanceOf(QuoteMismatchError);
      expect((error as QuoteMismatchError).field).to.equal(field);
    }
    expect(await refusal(stored({ destinatary: null }), { ...order, destinatary: WALLET })).to.equal(undefined);
  });

  it("refuses a used quote and an expired one", async () => {
    expect(await refusal(stored({ tradeId: "t0" }))).to.be.instanceOf(QuoteUsedError);
    expect(await refusal(stored({ expiresAt: new Date(Date.now() - 1) }))).to.be.instanceOf(QuoteExpiredError);
  });
});
