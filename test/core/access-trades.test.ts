/**
 * A trade under the access policy, through the trade use case (core/use-cases/trade.use-case.ts
 * step 2, trade-authorize.ts) over the memory journal: the roles, the scopes and the denylist
 * refuse it before anything is opened, reserved or signed; the spending limits count it with its
 * first write, exactly at a cap and one base unit over, each `per` apart; a sell counts its
 * estimate, then its proven payout; a trade that paid nothing gives its room back.
 */
import { expect } from "chai";

import {
  type AccessKey,
  type AccessPolicy,
  PermissionDeniedError,
  PriceUnavailableError,
  type SpendingLimit,
  SpendingLimitError,
  TradeExpiredError,
  TradeRevertedError,
  createUseCases,
  limitsFor,
  sellEstimateUsd,
} from "../../core/index.js";
import {
  CROOK,
  CountingPricePort,
  OTHER_WALLET,
  PAYEE,
  StepTradePort,
  TOKEN,
  USD,
  accessKey,
  accessSetup,
  addresses,
  callerFor,
  hashOf,
  limitOf,
  policyOf,
  rejection,
} from "./access-fixtures.js";
import { CONFIG, CUSTOMER, DAI, USDC, WALLET, request } from "./fixtures.js";

const desk = accessKey("desk", ["trader"]);
/** A key in the middle of a rotation: two hashes under one name. */
const rotating: AccessKey = {
  ...accessKey("desk-eu", ["trader"]),
  sha256: [hashOf("desk-eu", 1), hashOf("desk-eu", 2)],
};
const other = accessKey("desk-us", ["trader"]);

/** A buy paid in DAI, whose base unit is one 10^18th of a USD: the finest a limit counts. */
const daiBuy = (amount: string, overrides: Record<string, unknown> = {}) =>
  request({ amount, usdAddress: DAI.address, ...overrides });

/** What `limit` has used now, for `key`'s trades from WALLET to CUSTOMER. */
async function used(journal: ReturnType<typeof accessSetup>["journal"], policy: AccessPolicy, key = "desk") {
  const checks = limitsFor(policy, { key, wallet: WALLET.toLowerCase(), destinatary: CUSTOMER.toLowerCase() });
  return journal.spendingUse(checks);
}

describe("a trade under the access policy", () => {
  describe("refused by a role, a scope or the denylist", () => {
    // A limit too, so that a refusal is shown to come before anything is counted.
    const service = limitOf("service", "all", { maxUsd: 1_000n * USD });
    const cases: Array<[string, AccessKey, Record<string, unknown>, string, RegExp]> = [
      ["a viewer", accessKey("audit", ["viewer"], { sees: ["*"] }), {}, "role", /^api key "audit" may not trade/],
      ["an approver (a viewer until approvals exist)", accessKey("boss", ["approver"]), {}, "role", /"boss" may not/],
      ["an admin (it reads everything, and trades nothing)", accessKey("root", ["admin"]), {}, "role", /"root"/],
      ["a kind outside its kinds", accessKey("desk", ["trader"], { kinds: new Set(["sell"]) }), {}, "scope", /buy/],
      [
        "a wallet outside its wallets",
        accessKey("desk", ["trader"], { wallets: addresses(OTHER_WALLET) }),
        {},
        "scope",
        /^userAddress: api key "desk" may not send from/,
      ],
      [
        "a coin outside its coins",
        accessKey("desk", ["trader"], { coins: addresses(USDC.address) }),
        {},
        "scope",
        /^usdAddress: api key "desk" may not use USDT/,
      ],
      [
        "a destinatary outside its destinataries",
        accessKey("desk", ["trader"], { destinataries: addresses(PAYEE) }),
        {},
        "scope",
        /^destinatary: api key "desk" may not pay/,
      ],
      ["a destinatary on the denylist", desk, { destinatary: CROOK }, "denylist", /is on the denylist/],
    ];
    for (const [what, key, body, rule, message] of cases) {
      it(`refuses ${what} with permission_denied, recording nothing and calling no port`, async () => {
        const policy = policyOf([key], [service], [CROOK]);
        const { journal, trade, price, useCases } = accessSetup(policy);
        for (const kind of ["buy", "sell"] as const) {
          if (kind === "sell" && rule === "scope" && what.startsWith("a kind")) continue; // sells are its kind
          const error = await rejection(useCases[kind](request(body), callerFor(key)));
          expect(error).to.be.instanceOf(PermissionDeniedError);
          expect((error as PermissionDeniedError).rule).to.equal(rule);
          expect((error as PermissionDeniedError).message).to.match(message);
        }
        expect(journal.trades(), "no journal record").to.deep.equal([]);
        expect(trade.calls, "no trade port method").to.deep.equal([]);
        expect(price.calls, "not even the price").to.equal(0);
        expect(await used(journal, policy, key.name)).to.deep.equal([{ usd: 0n, trades: 0 }]);
      });
    }

    it("refuses before an Idempotency-Key or a Quote-Id is looked at, so a refused retry never finds a record", async () => {
      const viewer = accessKey("audit", ["viewer"]);
      const { journal, useCases } = accessSetup(policyOf([viewer]));
      const context = { ...callerFor(viewer), idempotencyKey: "order-1", quoteId: "q_not-even-well-formed" };
      expect(await rejection(useCases.buy(request(), context))).to.be.instanceOf(PermissionDeniedError);
      expect(journal.trades()).to.deep.equal([]);
    });

    it("lets a key holding viewer and trader trade, and records the name of the key that sent it", async () => {
      const both = accessKey("desk", ["viewer", "trader"], { sees: ["desk-us"] });
      const { journal, trade, useCases } = accessSetup(policyOf([both, other]));
      const receipt = await useCases.remittance(request(), callerFor(both));
      expect(trade.calls).to.deep.equal(["prove", "reserve", "sign", "send", "release", "settle"]);
      expect(journal.trades().map((t) => [t.keyName, t.status, t.txHash])).to.deep.equal([
        ["desk", "confirmed", receipt.transactionHash],
      ]);
    });

    it("follows the policy in force: a key that a reload took trading from is refused its next trade", async () => {
      const setup = accessSetup(policyOf([desk]));
      await setup.useCases.buy(request(), callerFor(desk));
      const demoted = accessKey("desk", ["viewer"]);
      setup.use(policyOf([demoted]));
      expect(await rejection(setup.useCases.buy(request(), callerFor(demoted)))).to.be.instanceOf(
        PermissionDeniedError,
      );
      expect(setup.journal.trades()).to.have.length(1);
    });

    it("lets every key trade, with no name recorded, when the service runs without an access file", async () => {
      const { journal, useCases } = accessSetup(undefined);
      // The api key check hands over the key's id alone: there is no entry to name it.
      await useCases.buy(request(), { scope: callerFor(accessKey("audit", ["viewer"])).scope });
      expect(journal.trades().map((t) => [t.keyName, t.status])).to.deep.equal([[null, "confirmed"]]);
    });
  });

  describe("spending limits", () => {
    const daily = limitOf("desk daily", "key", { maxUsd: 10n * USD });

    it("lets trades fill a limit exactly and refuses one base unit more, with the limit named and a Retry-After", async () => {
      const policy = policyOf([desk], [daily]);
      const { journal, trade, useCases } = accessSetup(policy);
      await useCases.buy(daiBuy("4"), callerFor(desk));
      await useCases.remittance(daiBuy("6"), callerFor(desk));
      expect(await used(journal, policy)).to.deep.equal([{ usd: 10n * USD, trades: 2 }]);
      const calls = trade.calls.length;
      const before = Date.now();
      const error = (await rejection(useCases.buy(daiBuy("0.000000000000000001"), callerFor(desk)))) as Error;
      expect(error).to.be.instanceOf(SpendingLimitError);
      const refusal = error as SpendingLimitError;
      expect(refusal.code).to.equal("spending_limit_exceeded");
      expect(refusal.limit).to.equal("desk daily");
      expect(refusal.message).to.match(
        /^spending limit "desk daily" \(per key desk, rolling 24h\): 10 of 10 USD used, this trade counts 0\.000000000000000001 USD; the window frees enough room in 864\d\d s$/,
      );
      // The first trade leaves the window 24 h after it was accepted, and frees the room.
      expect(refusal.retryAfterMs).to.be.within(86_400_000 - (Date.now() - before) - 1_000, 86_400_000);
      expect(trade.calls.length, "no port call for the refused trade").to.equal(calls);
      expect(journal.trades(), "no record of it").to.have.length(2);
      expect(await used(journal, policy)).to.deep.equal([{ usd: 10n * USD, trades: 2 }]);
    });

    it("counts a USDT amount to its base unit: 10^12 at 18 decimals", async () => {
      const policy = policyOf([desk], [limitOf("cap", "key", { maxUsd: 3n * USD })]);
      const { journal, useCases } = accessSetup(policy);
      await useCases.buy(request({ amount: "1.5" }), callerFor(desk));
      await useCases.buy(request({ amount: "1.499999" }), callerFor(desk));
      expect(await used(journal, policy)).to.deep.equal([{ usd: 3n * USD - 10n ** 12n, trades: 2 }]);
      expect(await rejection(useCases.buy(request({ amount: "0.000002" }), callerFor(desk)))).to.be.instanceOf(
        SpendingLimitError,
      );
      await useCases.buy(request({ amount: "0.000001" }), callerFor(desk));
      expect(await used(journal, policy)).to.deep.equal([{ usd: 3n * USD, trades: 3 }]);
    });

    it("refuses a trade alone over the maximum without a Retry-After: no wait makes room for it", async () => {
      const { useCases } = accessSetup(policyOf([desk], [daily]));
      const error = (await rejection(
        useCases.buy(daiBuy("10.000000000000000001"), callerFor(desk)),
      )) as SpendingLimitError;
      expect(error).to.be.instanceOf(SpendingLimitError);
      expect(error.retryAfterMs).to.equal(undefined);
      expect(error.message).to.match(/0 of 10 USD used, this trade counts 10\.000000000000000001 USD; the trade alone/);
      await useCases.buy(daiBuy("10"), callerFor(desk));
    });

    it("counts trades against maxTrades: exactly at the cap, then refused", async () => {
      const { useCases } = accessSetup(policyOf([desk], [limitOf("two a day", "key", { maxTrades: 2 })]));
      await useCases.buy(request(), callerFor(desk));
      await useCases.sell(request(), callerFor(desk));
      const error = (await rejection(useCases.remittance(request(), callerFor(desk)))) as SpendingLimitError;
      expect(error).to.be.instanceOf(SpendingLimitError);
      expect(error.message).to.equal(
        `spending limit "two a day" (per key desk, rolling 24h): 2 of 2 trades used; the window frees enough room in ${Math.ceil(error.retryAfterMs! / 1000)} s`,
      );
    });

    it("counts each key apart under a per-key limit that names none", async () => {
      const { useCases } = accessSetup(policyOf([desk, other], [daily]));
      await useCases.buy(daiBuy("10"), callerFor(desk));
      await useCases.buy(daiBuy("10"), callerFor(other));
      for (const key of [desk, other])
        expect(await rejection(useCases.buy(daiBuy("0.01"), callerFor(key)))).to.be.instanceOf(SpendingLimitError);
    });

    it("counts a key by its name, so both hashes of a rotation share one count", async () => {
      const { useCases } = accessSetup(policyOf([rotating], [daily]));
      await useCases.buy(daiBuy("7"), callerFor(rotating, 1));
      await useCases.buy(daiBuy("3"), callerFor(rotating, 2));
      const error = await rejection(useCases.buy(daiBuy("0.01"), callerFor(rotating, 1)));
      expect((error as SpendingLimitError).message).to.match(/per key desk-eu, rolling 24h\): 10 of 10 USD used/);
    });

    it("applies a per-key limit naming other keys to those keys only", async () => {
      const euOnly = limitOf("eu desk", "key", { maxUsd: 10n * USD, keys: ["desk-eu"] });
      const { journal, useCases } = accessSetup(policyOf([rotating, other], [euOnly]));
      await useCases.buy(daiBuy("10"), callerFor(rotating));
      await useCases.buy(daiBuy("25"), callerFor(other));
      await useCases.buy(daiBuy("25"), callerFor(other));
      expect(await rejection(useCases.buy(daiBuy("1"), callerFor(rotating)))).to.be.instanceOf(SpendingLimitError);
      expect(journal.trades().map((t) => t.keyName)).to.deep.equal(["desk-eu", "desk-us", "desk-us"]);
    });

    it("counts every key's trades from one wallet together under a per-wallet limit, each wallet apart", async () => {
      const hot = limitOf("hot wallet", "wallet", { maxUsd: 10n * USD });
      const { useCases } = accessSetup(policyOf([desk, other], [hot]));
      await useCases.buy(daiBuy("6"), callerFor(desk));
      await useCases.buy(daiBuy("4", { userAddress: WALLET.toLowerCase() }), callerFor(other));
      const error = await rejection(useCases.buy(daiBuy("1"), callerFor(other)));
      expect((error as SpendingLimitError).message).to.match(
        new RegExp(`^spending limit "hot wallet" \\(per wallet ${WALLET.toLowerCase()}, rolling 24h\\): 10 of 10`),
      );
      await useCases.buy(daiBuy("10", { userAddress: OTHER_WALLET }), callerFor(desk));
    });

    it("counts the trades paying one destinatary together under a per-destinatary limit, each apart", async () => {
      const payee = limitOf("per customer", "destinatary", { maxUsd: 10n * USD });
      const { useCases } = accessSetup(policyOf([desk, other], [payee]));
      await useCases.buy(daiBuy("6"), callerFor(desk));
      await useCases.remittance(daiBuy("4", { destinatary: CUSTOMER.toLowerCase() }), callerFor(other));
      const error = await rejection(useCases.buy(daiBuy("1"), callerFor(desk)));
      expect((error as SpendingLimitError).message).to.match(
        /per destinatary 0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359/,
      );
      await useCases.buy(daiBuy("10", { destinatary: PAYEE }), callerFor(desk));
    });

    it("counts every trade of the service together under a limit for all", async () => {
      const all = limitOf("service", "all", { maxUsd: 10n * USD, maxTrades: 3 });
      const { useCases } = accessSetup(policyOf([desk, other], [all]));
      await useCases.buy(daiBuy("5"), callerFor(desk));
      await useCases.buy(daiBuy("5", { userAddress: OTHER_WALLET, destinatary: PAYEE }), callerFor(other));
      const error = await rejection(useCases.buy(daiBuy("0.5"), callerFor(other)));
      expect((error as SpendingLimitError).message).to.match(
        /^spending limit "service" \(for the whole service, rolling 24h\): 10 of 10 USD used/,
      );
    });

    it("checks every limit that applies, and answers the first one without room", async () => {
      const limits: SpendingLimit[] = [
        limitOf("service", "all", { maxUsd: 100n * USD }),
        limitOf("desk daily", "key", { maxUsd: 10n * USD }),
      ];
      const { useCases } = accessSetup(policyOf([desk], limits));
      await useCases.buy(daiBuy("10"), callerFor(desk));
      const error = (await rejection(useCases.buy(daiBuy("1"), callerFor(desk)))) as SpendingLimitError;
      expect(error.limit).to.equal("desk daily");
    });

    for (const [outcome, failure] of [
      ["failed", new TradeRevertedError("SwapPriceStale()")],
      ["expired", new TradeExpiredError(1_900_000_000, 0)],
    ] as const) {
      it(`gives back the room of a trade that ${outcome}: it paid nothing`, async () => {
        const policy = policyOf([desk], [daily]);
        const { journal, trade, useCases } = accessSetup(policy);
        trade.failure = failure;
        expect(await rejection(useCases.buy(daiBuy("10"), callerFor(desk)))).to.equal(failure);
        expect(journal.trades().map((t) => t.status)).to.deep.equal([outcome]);
        expect(await used(journal, policy)).to.deep.equal([{ usd: 0n, trades: 0 }]);
        trade.failure = undefined;
        await useCases.buy(daiBuy("10"), callerFor(desk));
      });
    }

    it("answers a keyed retry of a trade that filled the limit with its receipt, counting it once", async () => {
      const policy = policyOf([desk], [daily]);
      const { journal, trade, useCases } = accessSetup(policy);
      const context = { ...callerFor(desk), idempotencyKey: "order-7" };
      const first = await useCases.buy(daiBuy("10"), context);
      const calls = trade.calls.length;
      expect(await useCases.buy(daiBuy("10"), context)).to.deep.equal(first);
      expect(trade.calls.length).to.equal(calls);
      expect(await used(journal, policy)).to.deep.equal([{ usd: 10n * USD, trades: 1 }]);
    });

    it("gives a trade's room back once it leaves the rolling window", async () => {
      const short = limitOf("burst", "key", { maxTrades: 1, windowMs: 40, window: "40ms" });
      const { useCases } = accessSetup(policyOf([desk], [short]));
      await useCases.buy(request(), callerFor(desk));
      await new Promise((resolve) => setTimeout(resolve, 60));
      await useCases.buy(request(), callerFor(desk));
    });

    it("refuses a trade a limit counts when the service has no journal to count it in, and sends nothing", async () => {
      const trade = new StepTradePort();
      const policy = policyOf([desk, other], [limitOf("eu desk", "key", { maxUsd: USD, keys: ["desk"] })]);
      const useCases = createUseCases({ trade, price: new CountingPricePort(), config: CONFIG, policy: () => policy });
      const error = (await rejection(useCases.buy(request(), callerFor(desk)))) as SpendingLimitError;
      expect(error).to.be.instanceOf(SpendingLimitError);
      expect(error.message).to.match(/without a trade journal to count them in: nothing was sent/);
      expect(trade.calls).to.deep.equal([]);
      // No limit counts desk-us's trades: it needs no journal.
      await useCases.buy(request(), callerFor(other));
    });
  });

  describe("a sell", () => {
    const daily = limitOf("desk daily", "key", { maxUsd: 10n * USD });

    /** A port that reads the limit's use when the trade is proven: what the sell counted when accepted. */
    function watching(policy: AccessPolicy) {
      const setup = accessSetup(policy);
      const seen: bigint[] = [];
      const prove = setup.trade.prove.bind(setup.trade);
      setup.trade.prove = async (order) => {
        seen.push((await used(setup.journal, policy))[0]!.usd);
        return prove(order);
      };
      return { ...setup, seen };
    }

    it("counts its tokens at the price route's USD rate, rounded up, when accepted; then its proven payout", async () => {
      const policy = policyOf([desk], [daily]);
      const { journal, trade, price, useCases, seen } = watching(policy);
      trade.sellPayout = 1_019_999n; // 1.019999 USDT, a little under 1 token at 1.02
      await useCases.sell(request({ amount: "1" }), callerFor(desk));
      // The route's rate is rounded down to 8 decimals, so it is counted one 10^-8 up: never under.
      expect(seen).to.deep.equal([sellEstimateUsd(TOKEN, 102_000_001n, 8)]);
      expect(seen[0]).to.equal(1_020_000_010_000_000_000n);
      expect(price.calls).to.equal(1);
      expect(await used(journal, policy)).to.deep.equal([{ usd: 1_019_999n * 10n ** 12n, trades: 1 }]);
    });

    it("rounds the estimate up to the 18th decimal", async () => {
      const policy = policyOf([desk], [daily]);
      const { price, useCases, seen } = watching(policy);
      price.record = { ...price.record, rateForCashCurrency: { CHF: 1, EUR: 1, USD: 0.33333333 } };
      await useCases.sell(request({ amount: "0.000000000000000003" }), callerFor(desk));
      // 3 × 10^-18 tokens × 0.33333334 USD = 1.00000002 × 10^-18 USD: counted as 2 × 10^-18.
      expect(seen).to.deep.equal([2n]);
    });

    for (const [what, rate] of [
      ["a negative", -1.02],
      ["a zero", 0],
      ["a NaN", Number.NaN],
    ] as const) {
      it(`is refused as price_unavailable, counting nothing, when the price's USD rate is ${what} number`, async () => {
        const policy = policyOf([desk], [daily]);
        const { journal, trade, price, useCases } = accessSetup(policy);
        price.record = { ...price.record, rateForCashCurrency: { CHF: 0.91, EUR: 0.95, USD: rate } };
        const error = await rejection(useCases.sell(request({ amount: "1" }), callerFor(desk)));
        expect(error).to.be.instanceOf(PriceUnavailableError);
        expect(trade.calls).to.deep.equal([]);
        expect(journal.trades()).to.deep.equal([]);
        expect(await used(journal, policy)).to.deep.equal([{ usd: 0n, trades: 0 }]);
      });
    }

    it("reads no price for a buy or a remittance, whose amount is its count", async () => {
      const { price, useCases } = accessSetup(policyOf([desk], [daily]));
      await useCases.buy(request(), callerFor(desk));
      await useCases.remittance(request(), callerFor(desk));
      expect(price.calls).to.equal(0);
    });

    it("is refused before it is signed when its proven payout leaves a limit no room, and gives the room back", async () => {
      const policy = policyOf([desk], [daily]);
      const { journal, trade, useCases } = accessSetup(policy);
      await useCases.buy(daiBuy("8"), callerFor(desk));
      trade.calls.length = 0;
      // 1 token at 1.02 is estimated at 1.0200000102 USD (room: 2 USD), but is proven at 2.000001 USDT.
      trade.sellPayout = 2_000_001n;
      const error = (await rejection(useCases.sell(request({ amount: "1" }), callerFor(desk)))) as SpendingLimitError;
      expect(error).to.be.instanceOf(SpendingLimitError);
      expect(error.message).to.match(/8 of 10 USD used, this trade counts 2\.000001 USD/);
      expect(trade.calls, "proven, never reserved nor signed").to.deep.equal(["prove"]);
      expect(
        journal.trades().map((t) => t.kind),
        "its record forgotten",
      ).to.deep.equal(["buy"]);
      expect(await used(journal, policy)).to.deep.equal([{ usd: 8n * USD, trades: 1 }]);
    });

    it("passes when its proven payout fills the limit exactly", async () => {
      const policy = policyOf([desk], [daily]);
      const { journal, trade, useCases } = accessSetup(policy);
      await useCases.buy(daiBuy("8"), callerFor(desk));
      trade.sellPayout = 2_000_000n;
      await useCases.sell(request({ amount: "1" }), callerFor(desk));
      expect(await used(journal, policy)).to.deep.equal([{ usd: 10n * USD, trades: 2 }]);
    });

    it("is refused when accepted when its estimate alone has no room, without proving it", async () => {
      const policy = policyOf([desk], [daily]);
      const { journal, trade, useCases } = accessSetup(policy);
      await useCases.buy(daiBuy("9"), callerFor(desk));
      trade.calls.length = 0;
      trade.sellPayout = 1n; // it would pay almost nothing, but the estimate at the route's rate decides first
      const error = await rejection(useCases.sell(request({ amount: "1" }), callerFor(desk)));
      expect((error as SpendingLimitError).message).to.match(/this trade counts 1\.02000001 USD/);
      expect(trade.calls).to.deep.equal([]);
      expect(journal.trades()).to.have.length(1);
    });
  });
});
