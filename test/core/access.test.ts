/**
 * The access policy's rules as the pure core applies them (core/access/authorize.ts): who may
 * trade what, who may retry a delivery, what each key reads, which limits count a trade, what
 * a trade counts, and the refusal a limit answers. The use cases that apply them are in
 * access-trades.test.ts and access-reads.test.ts.
 */
import { expect } from "chai";
import fc from "fast-check";

import {
  type AccessKey,
  type Caller,
  PermissionDeniedError,
  type Role,
  SpendingLimitError,
  type TradeOrder,
  aloneOver,
  authorizeDeliveryRetry,
  authorizeTrade,
  coinToLimitUsd,
  keyIdOf,
  limitExceeded,
  limitsFor,
  overBy,
  sees,
  sellEstimateUsd,
  tradeRefusal,
  usdText,
  visibilityOf,
} from "../../core/index.js";
import {
  CROOK,
  OTHER_WALLET,
  PAYEE,
  TOKEN,
  USD,
  accessKey,
  addresses,
  hashOf,
  limitOf,
  policyOf,
} from "./access-fixtures.js";
import { CUSTOMER, DAI, USDC, USDT, WALLET } from "./fixtures.js";

/** An order as parseTradeRequest answers it; addresses in any case. */
const order = (
  overrides: Omit<Partial<TradeOrder>, "wallet" | "destinatary"> & { wallet?: string; destinatary?: string } = {},
): TradeOrder =>
  ({
    kind: "buy",
    wallet: WALLET,
    destinatary: CUSTOMER,
    amount: 1_500_000n,
    stable: USDT,
    ...overrides,
  }) as TradeOrder;

const callerOf = (key: AccessKey, n = 1): Caller => ({ id: keyIdOf(key.sha256[n - 1]!), key });

/** Whether `fn` throws a PermissionDeniedError, and which. */
function denial(fn: () => void): PermissionDeniedError {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(PermissionDeniedError);
    return error as PermissionDeniedError;
  }
  return expect.fail("expected a PermissionDeniedError");
}

describe("the access policy", () => {
  describe("who may send a trade (tradeRefusal, authorizeTrade)", () => {
    const desk = accessKey("desk", ["trader"]);

    it("lets any caller trade when the service runs without an access file, and refuses one with no entry under a policy", () => {
      expect(tradeRefusal(undefined, callerOf(accessKey("audit", ["viewer"])), order())).to.equal(undefined);
      expect(tradeRefusal(policyOf([desk]), { id: "0123" }, order())).to.deep.equal({
        rule: "role",
        message: "this api key has no entry in the access file: it may not trade",
      });
    });

    it("lets a trader with no scope send every kind, from any wallet, in any coin, to anyone", () => {
      const policy = policyOf([desk]);
      for (const kind of ["sell", "buy", "remittance"] as const)
        for (const wallet of [WALLET, OTHER_WALLET])
          for (const stable of [DAI, USDT, USDC])
            expect(tradeRefusal(policy, callerOf(desk), order({ kind, wallet, stable, destinatary: PAYEE }))).to.equal(
              undefined,
            );
    });

    for (const roles of [["viewer"], ["approver"], ["admin"], ["viewer", "approver", "admin"]] as Role[][]) {
      it(`refuses a key whose roles are ${roles.join(", ")} by its role, naming the key and what trading needs`, () => {
        const key = accessKey("audit", roles);
        expect(tradeRefusal(policyOf([key]), callerOf(key), order())).to.deep.equal({
          rule: "role",
          message: `api key "audit" may not trade: its roles are ${roles.join(", ")} (trading needs trader)`,
        });
      });
    }

    it("lets a key holding several roles trade when one of them is trader", () => {
      const key = accessKey("desk", ["viewer", "trader"], { sees: ["*"] });
      expect(tradeRefusal(policyOf([key]), callerOf(key), order())).to.equal(undefined);
    });

    it("refuses a kind outside the key's kinds, naming the kind in words and the kinds it has", () => {
      const key = accessKey("desk", ["trader"], { kinds: new Set(["buy"]) });
      const policy = policyOf([key]);
      expect(tradeRefusal(policy, callerOf(key), order({ kind: "buy" }))).to.equal(undefined);
      expect(tradeRefusal(policy, callerOf(key), order({ kind: "sell" }))).to.deep.equal({
        rule: "scope",
        message: 'api key "desk" may not sell: its kinds are buy',
      });
      expect(tradeRefusal(policy, callerOf(key), order({ kind: "remittance" }))?.message).to.equal(
        'api key "desk" may not send remittances: its kinds are buy',
      );
    });

    it("matches the key's wallets whatever the case, and refuses another wallet under userAddress", () => {
      const key = accessKey("desk", ["trader"], { wallets: addresses(WALLET) });
      const policy = policyOf([key]);
      expect(tradeRefusal(policy, callerOf(key), order({ wallet: WALLET.toLowerCase() }))).to.equal(undefined);
      expect(tradeRefusal(policy, callerOf(key), order({ wallet: WALLET }))).to.equal(undefined);
      expect(tradeRefusal(policy, callerOf(key), order({ wallet: OTHER_WALLET }))).to.deep.equal({
        rule: "scope",
        message: `userAddress: api key "desk" may not send from ${OTHER_WALLET} (not among its wallets)`,
      });
    });

    it("refuses a coin outside the key's coins under usdAddress, naming its symbol and address", () => {
      const key = accessKey("desk", ["trader"], { coins: addresses(USDT.address) });
      const policy = policyOf([key]);
      expect(tradeRefusal(policy, callerOf(key), order({ stable: USDT }))).to.equal(undefined);
      expect(tradeRefusal(policy, callerOf(key), order({ stable: USDC }))).to.deep.equal({
        rule: "scope",
        message: `usdAddress: api key "desk" may not use USDC ${USDC.address} (not among its coins)`,
      });
    });

    it("pays only the destinataries on the key's own list, whatever the case", () => {
      const key = accessKey("desk", ["trader"], { destinataries: addresses(CUSTOMER) });
      const policy = policyOf([key]);
      expect(
        tradeRefusal(policy, callerOf(key), order({ destinatary: CUSTOMER.toUpperCase().replace("0X", "0x") })),
      ).to.equal(undefined);
      expect(tradeRefusal(policy, callerOf(key), order({ destinatary: PAYEE }))).to.deep.equal({
        rule: "scope",
        message: `destinatary: api key "desk" may not pay ${PAYEE} (not among its destinataries)`,
      });
    });

    it("refuses a destinatary on the denylist to every key, even one whose own list names it", () => {
      const key = accessKey("desk", ["trader"], { destinataries: addresses(CROOK) });
      const policy = policyOf([key, desk], [], [CROOK]);
      for (const caller of [callerOf(key), callerOf(desk)])
        for (const destinatary of [CROOK, CROOK.toLowerCase()])
          expect(tradeRefusal(policy, caller, order({ destinatary }))).to.deep.equal({
            rule: "denylist",
            message: `destinatary: ${destinatary} is on the denylist; no trade may pay it`,
          });
    });

    it("checks the role before the scopes, and the scopes before the denylist", () => {
      const scoped = { kinds: new Set(["buy"] as const), wallets: addresses(OTHER_WALLET) };
      const viewer = accessKey("audit", ["viewer"], scoped);
      const trader = accessKey("desk", ["trader"], scoped);
      const policy = policyOf([viewer, trader], [], [CROOK]);
      const sell = order({ kind: "sell", destinatary: CROOK });
      expect(tradeRefusal(policy, callerOf(viewer), sell)?.rule).to.equal("role");
      expect(tradeRefusal(policy, callerOf(trader), sell)?.message).to.match(/may not sell/);
      expect(tradeRefusal(policy, callerOf(trader), order({ destinatary: CROOK }))?.message).to.match(/^userAddress:/);
      const free = accessKey("free", ["trader"]);
      expect(tradeRefusal(policyOf([free], [], [CROOK]), callerOf(free), sell)?.rule).to.equal("denylist");
    });

    it("authorizeTrade throws what tradeRefusal answers, as a permission_denied with its rule", () => {
      const key = accessKey("audit", ["viewer"]);
      const error = denial(() => authorizeTrade(policyOf([key]), callerOf(key), order()));
      expect(error.code).to.equal("permission_denied");
      expect(error.rule).to.equal("role");
      expect(error.message).to.equal(tradeRefusal(policyOf([key]), callerOf(key), order())?.message);
      const denied = denial(() => authorizeTrade(policyOf([desk], [], [CUSTOMER]), callerOf(desk), order()));
      expect(denied.rule).to.equal("denylist");
      expect(() => authorizeTrade(policyOf([desk]), callerOf(desk), order())).not.to.throw();
    });
  });

  describe("who may retry a webhook delivery (authorizeDeliveryRetry)", () => {
    for (const roles of [["trader"], ["admin"], ["viewer", "trader"]] as Role[][]) {
      it(`lets a key whose roles are ${roles.join(", ")} retry`, () => {
        expect(() => authorizeDeliveryRetry(callerOf(accessKey("desk", roles)))).not.to.throw();
      });
    }

    for (const roles of [["viewer"], ["approver"], ["viewer", "approver"]] as Role[][]) {
      it(`refuses a key whose roles are ${roles.join(", ")}, naming the key and the roles it needs`, () => {
        const error = denial(() => authorizeDeliveryRetry(callerOf(accessKey("audit", roles, { sees: ["*"] }))));
        expect(error.message).to.equal(
          `api key "audit" may not retry a webhook delivery: its roles are ${roles.join(", ")} (it needs trader or admin)`,
        );
      });
    }

    it("lets a caller without an entry retry (the service runs without an access file)", () => {
      expect(() => authorizeDeliveryRetry({ id: "0123" })).not.to.throw();
    });
  });

  describe("what a caller reads (visibilityOf, sees)", () => {
    const eu = { ...accessKey("desk-eu", ["trader"]), sha256: [hashOf("desk-eu", 1), hashOf("desk-eu", 2)] };
    const us = accessKey("desk-us", ["trader"]);
    const idsOf = (key: AccessKey) => key.sha256.map(keyIdOf);

    it("is the caller's own id alone without an access file, or for a caller without an entry", () => {
      expect(visibilityOf(undefined, callerOf(eu))).to.deep.equal({ names: [], ids: [keyIdOf(eu.sha256[0]!)] });
      expect(visibilityOf(policyOf([eu]), { id: "0123" })).to.deep.equal({ names: [], ids: ["0123"] });
    });

    it("is a trader's own name and the ids of every hash it holds (a rotation's two)", () => {
      const visible = visibilityOf(policyOf([eu, us]), callerOf(eu, 2));
      expect(visible).to.deep.equal({ names: ["desk-eu"], ids: [idsOf(eu)[1], idsOf(eu)[0]] });
    });

    for (const role of ["viewer", "approver"] as const) {
      it(`is, for ${role === "approver" ? "an" : "a"} ${role}, its own name and id plus the names in sees and their keys' ids`, () => {
        const audit = accessKey("audit", [role], { sees: ["desk-eu"] });
        const visible = visibilityOf(policyOf([eu, us, audit]), callerOf(audit));
        expect(visible).to.deep.equal({ names: ["audit", "desk-eu"], ids: [...idsOf(audit), ...idsOf(eu)] });
      });
    }

    it('is everything for sees ["*"], and for an admin whatever it sees', () => {
      const all = accessKey("audit", ["viewer"], { sees: ["*"] });
      const admin = accessKey("root", ["admin"]);
      expect(visibilityOf(policyOf([eu, all, admin]), callerOf(all))).to.equal("all");
      expect(visibilityOf(policyOf([eu, all, admin]), callerOf(admin))).to.equal("all");
    });

    it("sees a trade by the name it was sent under, or by its key's id when it was sent before the key had a name", () => {
      const audit = accessKey("audit", ["viewer"], { sees: ["desk-eu"] });
      const visible = visibilityOf(policyOf([eu, us, audit]), callerOf(audit));
      // A trade keeps the name it was accepted under, whatever hash sent it.
      expect(sees(visible, { keyName: "desk-eu", scope: "an-old-id" })).to.equal(true);
      for (const id of idsOf(eu)) expect(sees(visible, { keyName: null, scope: id })).to.equal(true);
      expect(sees(visible, { keyName: "desk-us", scope: idsOf(us)[0]! })).to.equal(false);
      expect(sees(visible, { keyName: null, scope: idsOf(us)[0]! })).to.equal(false);
      expect(sees("all", { keyName: null, scope: "anyone" })).to.equal(true);
    });
  });

  describe("which limits count a trade (limitsFor)", () => {
    const spend = { key: "desk-eu", wallet: WALLET.toLowerCase(), destinatary: CUSTOMER.toLowerCase() };

    it("counts each key apart under a per-key limit naming no keys, and the one it names", () => {
      const every = limitOf("every key", "key", { maxUsd: USD });
      const named = limitOf("eu desk", "key", { maxUsd: USD, keys: ["desk-eu"] });
      const checks = limitsFor(policyOf([], [every, named]), spend);
      expect(checks).to.deep.equal([
        { limit: every, value: "desk-eu" },
        { limit: named, value: "desk-eu" },
      ]);
    });

    it("leaves out a per-key limit that names only other keys", () => {
      const others = limitOf("us desks", "key", { maxUsd: USD, keys: ["desk-us", "desk-asia"] });
      expect(limitsFor(policyOf([], [others]), spend)).to.deep.equal([]);
    });

    it("counts per wallet by the wallet, per destinatary by the destinatary, and all together as *", () => {
      const limits = [
        limitOf("wallet", "wallet", { maxUsd: USD }),
        limitOf("payee", "destinatary", { maxUsd: USD }),
        limitOf("service", "all", { maxTrades: 1 }),
      ];
      const values = limitsFor(policyOf([], limits), spend).map((check) => check.value);
      expect(values).to.deep.equal([WALLET.toLowerCase(), CUSTOMER.toLowerCase(), "*"]);
    });
  });

  describe("what a trade counts", () => {
    it("counts a coin amount at 18 decimals exactly: one USDT base unit is 10^12, one DAI base unit is 1", () => {
      expect(coinToLimitUsd(1n, USDT.decimals)).to.equal(10n ** 12n);
      expect(coinToLimitUsd(1_500_000n, USDT.decimals)).to.equal((15n * USD) / 10n);
      expect(coinToLimitUsd(1n, DAI.decimals)).to.equal(1n);
    });

    it("counts a sell's estimate exactly when its tokens at the rate are a whole number of units", () => {
      expect(sellEstimateUsd(2n * TOKEN, 102_000_000n, 8)).to.equal((204n * USD) / 100n);
    });

    it("rounds a sell's estimate up, never below its value at the rate", () => {
      expect(sellEstimateUsd(1n, 102_000_000n, 8), "1.02 units").to.equal(2n);
      expect(sellEstimateUsd(3n, 33_333_333n, 8), "0.99999999 units").to.equal(1n);
      fc.assert(
        fc.property(
          fc.bigInt({ min: 0n, max: 10n ** 30n }),
          fc.bigInt({ min: 1n, max: 10n ** 12n }),
          (tokens, rate) => {
            const estimate = sellEstimateUsd(tokens, rate, 8);
            // tokens × rate / 10^8 ≤ estimate < tokens × rate / 10^8 + 1
            return estimate * 10n ** 8n >= tokens * rate && (estimate - 1n) * 10n ** 8n < tokens * rate;
          },
        ),
      );
    });
  });

  describe("whether a limit has room (overBy, aloneOver)", () => {
    const cap = limitOf("cap", "key", { maxUsd: 10n * USD, maxTrades: 3 });

    it("lets a trade pass when what is used plus the trade is exactly the maximum", () => {
      expect(overBy(cap, { usd: 4n * USD, trades: 2 }, { usd: 6n * USD, trades: 1 })).to.equal(undefined);
    });

    it("says by how much a trade one base unit over is over, in USD or in trades", () => {
      expect(overBy(cap, { usd: 4n * USD, trades: 0 }, { usd: 6n * USD + 1n, trades: 1 })).to.deep.equal({
        usd: 1n,
        trades: 0,
      });
      expect(overBy(cap, { usd: 0n, trades: 3 }, { usd: 1n, trades: 1 })).to.deep.equal({ usd: 0n, trades: 1 });
    });

    it("counts only the maximums a limit sets", () => {
      const trades = limitOf("trades", "key", { maxTrades: 1 });
      const usd = limitOf("usd", "key", { maxUsd: USD });
      expect(overBy(trades, { usd: 10n ** 30n, trades: 0 }, { usd: 10n ** 30n, trades: 1 })).to.equal(undefined);
      expect(overBy(usd, { usd: 0n, trades: 1_000_000 }, { usd: USD, trades: 1 })).to.equal(undefined);
    });

    it("knows a trade alone over the maximum, which no wait makes room for", () => {
      expect(aloneOver(cap, { usd: 10n * USD, trades: 1 })).to.equal(false);
      expect(aloneOver(cap, { usd: 10n * USD + 1n, trades: 1 })).to.equal(true);
      expect(aloneOver(limitOf("none", "all", { maxTrades: 0 }), { usd: 0n, trades: 1 })).to.equal(true);
    });
  });

  describe("the refusal a limit answers (limitExceeded, usdText)", () => {
    it("writes USD as exact decimal text, trailing zeros cut", () => {
      expect(usdText(250_000n * USD)).to.equal("250000");
      expect(usdText((125n * USD) / 10n)).to.equal("12.5");
      expect(usdText(1n)).to.equal("0.000000000000000001");
      expect(usdText(0n)).to.equal("0");
    });

    it("names the limit, whom it counts, its window, what is used and the maximum, and when room comes back", () => {
      const limit = limitOf("desk daily", "key", { maxUsd: 10n * USD, maxTrades: 5 });
      const used = { usd: 9n * USD, trades: 4 };
      const error = limitExceeded({ limit, value: "desk-eu" }, used, { usd: 2n * USD, trades: 1 }, 60_001);
      expect(error).to.be.instanceOf(SpendingLimitError);
      expect(error.code).to.equal("spending_limit_exceeded");
      expect(error.limit).to.equal("desk daily");
      expect(error.retryAfterMs).to.equal(60_001);
      expect(error.message).to.equal(
        'spending limit "desk daily" (per key desk-eu, rolling 24h): 9 of 10 USD used, this trade counts 2 USD, ' +
          "4 of 5 trades used; the window frees enough room in 61 s",
      );
    });

    it("says a trade alone over the maximum is so, with no Retry-After", () => {
      const limit = limitOf("service", "all", { maxUsd: 10n * USD, window: "1h", windowMs: 3_600_000 });
      const error = limitExceeded({ limit, value: "*" }, { usd: 0n, trades: 0 }, { usd: 10n * USD + 1n, trades: 1 });
      expect(error.retryAfterMs).to.equal(undefined);
      expect(error.message).to.equal(
        'spending limit "service" (for the whole service, rolling 1h): 0 of 10 USD used, ' +
          "this trade counts 10.000000000000000001 USD; the trade alone is over the maximum",
      );
    });

    it("names the destinatary or the wallet a limit counts apart", () => {
      const perPayee = limitOf("payee", "destinatary", { maxTrades: 2 });
      const error = limitExceeded(
        { limit: perPayee, value: CUSTOMER.toLowerCase() },
        { usd: 0n, trades: 2 },
        {
          usd: USD,
          trades: 1,
        },
      );
      expect(error.message).to.equal(
        `spending limit "payee" (per destinatary ${CUSTOMER.toLowerCase()}, rolling 24h): 2 of 2 trades used`,
      );
    });
  });
});
