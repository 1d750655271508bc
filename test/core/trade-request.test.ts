import { expect } from "chai";

import { assertTradeConfig, maxUsdFor, parseTradeRequest, type TradeConfig } from "../../core/index.js";
import { CONFIG, CUSTOMER, DAI, USDC, USDT, WALLET, expectInvalid, request } from "./fixtures.js";

describe("parseTradeRequest", () => {
  describe("when the request is valid", () => {
    it("turns a buy into an order with the amount in the stable coin's base units", () => {
      expect(parseTradeRequest("buy", request(), CONFIG)).to.deep.equal({
        kind: "buy",
        wallet: WALLET,
        destinatary: CUSTOMER,
        amount: 1_500_000n,
        stable: USDT,
      });
    });

    it("turns a remittance into an order the same way as a buy", () => {
      const order = parseTradeRequest("remittance", request({ usdAddress: USDC.address }), CONFIG);
      expect(order).to.deep.equal({
        kind: "remittance",
        wallet: WALLET,
        destinatary: CUSTOMER,
        amount: 1_500_000n,
        stable: USDC,
      });
    });

    it("reads a buy paid in DAI with DAI's 18 decimals", () => {
      expect(parseTradeRequest("buy", request({ usdAddress: DAI.address }), CONFIG).amount).to.equal(15n * 10n ** 17n);
    });

    it("reads a sell amount in tokens with 18 decimals, whatever the stable coin", () => {
      const order = parseTradeRequest("sell", request({ amount: "0.000000000000000001" }), CONFIG);
      expect(order.amount).to.equal(1n);
      expect(order.stable).to.equal(USDT);
    });

    it("returns checksummed addresses when the client sent lowercase ones", () => {
      const order = parseTradeRequest(
        "sell",
        request({ userAddress: WALLET.toLowerCase(), destinatary: CUSTOMER.toLowerCase() }),
        CONFIG,
      );
      expect(order.wallet).to.equal(WALLET);
      expect(order.destinatary).to.equal(CUSTOMER);
    });

    it("matches the stable coin case-insensitively and returns the configured coin", () => {
      const lower = parseTradeRequest("buy", request({ usdAddress: USDT.address.toLowerCase() }), CONFIG);
      const upper = parseTradeRequest(
        "buy",
        request({ usdAddress: `0x${USDT.address.slice(2).toUpperCase()}` }),
        CONFIG,
      );
      expect(lower.stable).to.equal(USDT);
      expect(upper.stable).to.equal(USDT);
    });

    it("accepts a request object without a prototype", () => {
      const body = Object.assign(Object.create(null) as object, request());
      expect(parseTradeRequest("buy", body, CONFIG).amount).to.equal(1_500_000n);
    });
  });

  describe("when the body is not a plain object", () => {
    for (const [what, value] of [
      ["null", null],
      ["undefined", undefined],
      ["an array", [WALLET, CUSTOMER, "1", USDT.address]],
      ["a string", JSON.stringify(request())],
      ["a number", 1],
      ["a Date", new Date()],
      ["a Map", new Map(Object.entries(request()))],
    ] as Array<[string, unknown]>) {
      it(`refuses ${what}`, () => {
        expectInvalid(() => parseTradeRequest("sell", value, CONFIG), "request", /must be a JSON object/);
      });
    }
  });

  describe("when a field is missing", () => {
    for (const field of ["userAddress", "destinatary", "amount", "usdAddress"]) {
      it(`refuses a request without ${field}, saying it is required`, () => {
        const body = request();
        delete body[field];
        expectInvalid(() => parseTradeRequest("buy", body, CONFIG), field, new RegExp(`^${field}: is required$`));
      });

      it(`treats ${field} set to undefined as missing`, () => {
        expectInvalid(() => parseTradeRequest("buy", request({ [field]: undefined }), CONFIG), field, /is required$/);
      });
    }

    it("reports the first missing field in SPEC order", () => {
      expectInvalid(() => parseTradeRequest("buy", {}, CONFIG), "userAddress", /is required$/);
    });
  });

  describe("when a field is not a string", () => {
    for (const field of ["userAddress", "destinatary", "amount", "usdAddress"]) {
      for (const value of [null, 15, true, { value: "1" }, ["1"]]) {
        it(`refuses ${field} = ${JSON.stringify(value)}, saying it must be a string`, () => {
          expectInvalid(
            () => parseTradeRequest("buy", request({ [field]: value }), CONFIG),
            field,
            new RegExp(`^${field}: must be a string$`),
          );
        });
      }
    }
  });

  describe("when the request has a field that is not in the SPEC", () => {
    it("refuses it, naming the extra field", () => {
      expectInvalid(
        () => parseTradeRequest("buy", request({ memo: "hi" }), CONFIG),
        "memo",
        /^memo: is not a field of a trade request$/,
      );
    });

    it("refuses a __proto__ key that JSON.parse made an own property", () => {
      const body = JSON.parse(`{"__proto__": {}, ${JSON.stringify(request()).slice(1)}`) as unknown;
      expectInvalid(() => parseTradeRequest("buy", body, CONFIG), "__proto__", /is not a field of a trade request$/);
    });

    it("checks the four fields before extra ones", () => {
      expectInvalid(() => parseTradeRequest("buy", { destinatory: CUSTOMER }, CONFIG), "userAddress", /is required$/);
    });
  });

  describe("when an address is invalid", () => {
    it("refuses a malformed userAddress", () => {
      expectInvalid(
        () => parseTradeRequest("sell", request({ userAddress: "0x123" }), CONFIG),
        "userAddress",
        /40-hex-digit/,
      );
    });

    it("refuses a destinatary that fails its checksum", () => {
      const bad = `0xFB${CUSTOMER.slice(4)}`; // the first letter, f, in upper case
      expectInvalid(
        () => parseTradeRequest("sell", request({ destinatary: bad }), CONFIG),
        "destinatary",
        /EIP-55 checksum/,
      );
    });

    it("refuses the zero address as destinatary", () => {
      expectInvalid(
        () => parseTradeRequest("sell", request({ destinatary: `0x${"0".repeat(40)}` }), CONFIG),
        "destinatary",
        /zero address/,
      );
    });

    it("refuses a malformed usdAddress", () => {
      expectInvalid(
        () => parseTradeRequest("buy", request({ usdAddress: "DAI" }), CONFIG),
        "usdAddress",
        /40-hex-digit/,
      );
    });

    it("checks userAddress before destinatary", () => {
      expectInvalid(
        () => parseTradeRequest("buy", request({ userAddress: "x", destinatary: "y" }), CONFIG),
        "userAddress",
      );
    });
  });

  describe("when the stable coin is not supported", () => {
    it("refuses it, naming the address and the supported coins", () => {
      const other = "0x52908400098527886E0F7030069857D2E4169EE7";
      expectInvalid(
        () => parseTradeRequest("buy", request({ usdAddress: other }), CONFIG),
        "usdAddress",
        new RegExp(`^usdAddress: ${other} is not a supported stable coin \\(DAI, USDT, USDC\\)$`),
      );
    });

    it("checks the stable coin before the amount", () => {
      expectInvalid(
        () => parseTradeRequest("buy", request({ usdAddress: WALLET, amount: "-1" }), CONFIG),
        "usdAddress",
        /not a supported stable coin/,
      );
    });
  });

  describe("when the amount is invalid", () => {
    it("refuses a buy in USDT with 7 decimal places", () => {
      expectInvalid(
        () => parseTradeRequest("buy", request({ amount: "0.0000001" }), CONFIG),
        "amount",
        /^amount: must have at most 6 decimal places$/,
      );
    });

    it("accepts the same amount for a buy in DAI, which has 18 decimals", () => {
      const order = parseTradeRequest("buy", request({ amount: "0.0000001", usdAddress: DAI.address }), CONFIG);
      expect(order.amount).to.equal(10n ** 11n);
    });

    it("refuses a sell with 19 decimal places", () => {
      expectInvalid(
        () => parseTradeRequest("sell", request({ amount: "0.0000000000000000001" }), CONFIG),
        "amount",
        /at most 18 decimal places$/,
      );
    });

    it("refuses a zero amount", () => {
      expectInvalid(
        () => parseTradeRequest("remittance", request({ amount: "0" }), CONFIG),
        "amount",
        /greater than 0$/,
      );
    });

    it("refuses a number written in exponent form", () => {
      expectInvalid(() => parseTradeRequest("buy", request({ amount: "1e3" }), CONFIG), "amount", /plain decimal/);
    });
  });

  describe("when the amount is at the limits", () => {
    it("accepts a sell of exactly maxSellTokens", () => {
      expect(parseTradeRequest("sell", request({ amount: "1000" }), CONFIG).amount).to.equal(1000n * 10n ** 18n);
    });

    it("refuses a sell one token base unit over maxSellTokens, in tokens", () => {
      expectInvalid(
        () => parseTradeRequest("sell", request({ amount: "1000.000000000000000001" }), CONFIG),
        "amount",
        /^amount: must be at most 1000 tokens$/,
      );
    });

    for (const coin of [DAI, USDT, USDC]) {
      it(`accepts a buy of exactly maxUsd in ${coin.symbol}`, () => {
        const order = parseTradeRequest("buy", request({ amount: "10000", usdAddress: coin.address }), CONFIG);
        expect(order.amount).to.equal(10_000n * 10n ** BigInt(coin.decimals));
      });

      it(`refuses a remittance one ${coin.symbol} base unit over maxUsd, in USD`, () => {
        const over = `10000.${"0".repeat(coin.decimals - 1)}1`;
        expectInvalid(
          () => parseTradeRequest("remittance", request({ amount: over, usdAddress: coin.address }), CONFIG),
          "amount",
          /^amount: must be at most 10000 USD$/,
        );
      });
    }
  });
});

describe("maxUsdFor", () => {
  it("converts maxUsd to each stable coin's base units", () => {
    expect(maxUsdFor(CONFIG, USDT)).to.equal(10_000_000_000n);
    expect(maxUsdFor(CONFIG, DAI)).to.equal(10_000n * 10n ** 18n);
  });

  it("rounds a maxUsd with more places than the coin down, never up", () => {
    const config = { ...CONFIG, limits: { ...CONFIG.limits, maxUsd: "0.0000019" } };
    expect(maxUsdFor(config, USDT)).to.equal(1n);
  });
});

describe("assertTradeConfig", () => {
  type Patch = { stableCoins?: TradeConfig["stableCoins"]; limits?: Partial<TradeConfig["limits"]> };
  const broken = (patch: Patch): TradeConfig => ({
    ...CONFIG,
    ...patch,
    limits: { ...CONFIG.limits, ...patch.limits },
  });

  it("accepts the fixture configuration", () => {
    expect(() => assertTradeConfig(CONFIG)).not.to.throw();
  });

  it("refuses an empty list of stable coins", () => {
    expect(() => assertTradeConfig(broken({ stableCoins: [] }))).to.throw(TypeError, /stableCoins/);
  });

  it("refuses a stable coin with a malformed address, naming its position", () => {
    const bad = { ...USDT, address: "0x12" as const };
    expect(() => assertTradeConfig(broken({ stableCoins: [DAI, bad] }))).to.throw(
      TypeError,
      /stableCoins\[1\]\.address/,
    );
  });

  it("refuses a stable coin with impossible decimals", () => {
    expect(() => assertTradeConfig(broken({ stableCoins: [{ ...USDT, decimals: -6 }] }))).to.throw(
      TypeError,
      /decimals/,
    );
  });

  it("refuses a maxUsd that is not a plain decimal", () => {
    expect(() => assertTradeConfig(broken({ limits: { maxUsd: "1e4" } }))).to.throw(TypeError, /maxUsd/);
  });

  it("refuses a maxUsd that rounds down to zero for a coin", () => {
    expect(() => assertTradeConfig(broken({ limits: { maxUsd: "0.0000001" } }))).to.throw(TypeError, /maxUsd.*USDT/);
  });

  it("refuses a maxSellTokens of zero", () => {
    expect(() => assertTradeConfig(broken({ limits: { maxSellTokens: 0n } }))).to.throw(TypeError, /maxSellTokens/);
  });

  describe("when the destinatary is where the payout would be lost", () => {
    const SWAP = "0x000000000000000000000000000000000000c0DE";
    const withForbidden: TradeConfig = {
      ...CONFIG,
      forbiddenDestinataries: [
        { address: SWAP, what: "the swap contract" },
        { address: USDT.address, what: "the USDT contract" },
        { address: WALLET, what: "an exchange wallet of this service" },
      ],
    };

    it("refuses each, in any letter case, naming destinatary and what it is", () => {
      expectInvalid(
        () => parseTradeRequest("sell", request({ destinatary: SWAP.toLowerCase() }), withForbidden),
        "destinatary",
        /is the swap contract: what it received would be lost$/,
      );
      expectInvalid(
        () => parseTradeRequest("buy", request({ destinatary: USDT.address }), withForbidden),
        "destinatary",
        /is the USDT contract/,
      );
      expectInvalid(
        () => parseTradeRequest("remittance", request({ destinatary: WALLET.toLowerCase() }), withForbidden),
        "destinatary",
        /is an exchange wallet of this service/,
      );
    });

    it("accepts any other", () => {
      expect(parseTradeRequest("sell", request(), withForbidden).destinatary).to.equal(CUSTOMER);
    });
  });

  describe("when the amount is dust", () => {
    const withMinimums: TradeConfig = {
      ...CONFIG,
      limits: { ...CONFIG.limits, minSellTokens: 10n ** 16n, minUsd: "0.01" },
    };

    it("refuses a sell below the minimum, naming amount", () => {
      expectInvalid(
        () => parseTradeRequest("sell", request({ amount: "0.000000000000000001" }), withMinimums),
        "amount",
        /must be at least 0\.01 tokens$/,
      );
      expect(parseTradeRequest("sell", request({ amount: "0.01" }), withMinimums).amount).to.equal(10n ** 16n);
    });

    it("refuses a buy or remittance below the minimum in the coin's own units", () => {
      expectInvalid(
        () => parseTradeRequest("buy", request({ amount: "0.009999" }), withMinimums),
        "amount",
        /must be at least 0\.01 USD$/,
      );
      expectInvalid(
        () =>
          parseTradeRequest(
            "remittance",
            request({ amount: "0.009999999999999999", usdAddress: DAI.address }),
            withMinimums,
          ),
        "amount",
        /0\.01 USD/,
      );
      expect(parseTradeRequest("buy", request({ amount: "0.01" }), withMinimums).amount).to.equal(10_000n);
    });

    it("rounds a minimum a coin cannot hold up, never down", () => {
      const odd: TradeConfig = { ...CONFIG, limits: { ...CONFIG.limits, minUsd: "0.0000001" } };
      expectInvalid(() => parseTradeRequest("buy", request({ amount: "0" }), odd), "amount");
      expect(parseTradeRequest("buy", request({ amount: "0.000001" }), odd).amount).to.equal(1n);
    });

    it("is refused at start when above the maximum", () => {
      expect(() => assertTradeConfig({ ...CONFIG, limits: { ...CONFIG.limits, minUsd: "10000.01" } })).to.throw(
        TypeError,
        /limits\.minUsd/,
      );
      expect(() => assertTradeConfig({ ...CONFIG, limits: { ...CONFIG.limits, minSellTokens: 10n ** 30n } })).to.throw(
        TypeError,
        /limits\.minSellTokens/,
      );
    });
  });
});
