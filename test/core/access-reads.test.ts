/**
 * What the access policy does to quotes and reads, through the use cases over the memory journal:
 * a quote lists the refusals and limits a trade would meet as issues (still answered, nothing
 * counted); history, summary, trade status and webhook deliveries answer the trades of the keys a
 * caller sees (its own name and ids, the names in `sees` and their keys' ids, everything for an
 * admin or ["*"]); only a trader (its own) or an admin retries a delivery.
 */
import { expect } from "chai";

import {
  type AccessKey,
  type AccessPolicy,
  PermissionDeniedError,
  TradeNotFoundError,
  WebhookDeliveryNotFoundError,
  limitsFor,
} from "../../core/index.js";
import {
  CROOK,
  PAYEE,
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
import { CUSTOMER, DAI, USDT, WALLET, request } from "./fixtures.js";

const desk = accessKey("desk", ["trader"]);

const quoteBody = (overrides: Record<string, unknown> = {}) => ({
  kind: "buy",
  destinatary: CUSTOMER,
  amount: "2",
  usdAddress: DAI.address,
  ...overrides,
});

describe("a quote under the access policy", () => {
  const daily = limitOf("desk daily", "key", { maxUsd: 10n * USD });

  /** The use cases with `desk` having used 8 USD of `daily`. */
  async function eightUsed(policy: AccessPolicy) {
    const setup = accessSetup(policy);
    await setup.useCases.buy(request({ amount: "8", usdAddress: DAI.address }), callerFor(desk));
    return setup;
  }

  /** What `policy`'s limits have used for desk's trades from WALLET to CUSTOMER. */
  const used = (setup: ReturnType<typeof accessSetup>, policy: AccessPolicy) =>
    setup.journal.spendingUse(
      limitsFor(policy, { key: "desk", wallet: WALLET.toLowerCase(), destinatary: CUSTOMER.toLowerCase() }),
    );

  it("tells a viewer its trade is not permitted, naming the key, and still answers the quote", async () => {
    const audit = accessKey("audit", ["viewer"]);
    const { journal, useCases } = accessSetup(policyOf([audit]));
    const quote = await useCases.quote(quoteBody(), callerFor(audit));
    expect(quote.issues).to.deep.equal([
      {
        type: "not_permitted",
        message: 'api key "audit" may not trade: its roles are viewer (trading needs trader)',
        details: {},
      },
    ]);
    expect(quote.quoteId).to.match(/^q_/);
    expect(journal.trades()).to.deep.equal([]);
  });

  it("tells a key its scope refuses the trade, as not_permitted", async () => {
    const buyer = accessKey("desk", ["trader"], { kinds: new Set(["buy"]) });
    const { useCases } = accessSetup(policyOf([buyer]));
    const quote = await useCases.quote(quoteBody({ kind: "sell", amount: "1" }), callerFor(buyer));
    expect(quote.issues.map((i) => [i.type, i.message])).to.deep.equal([
      ["not_permitted", 'api key "desk" may not sell: its kinds are buy'],
    ]);
  });

  it("names a destinatary on the denylist, or off the key's own list, as destinatary_denied", async () => {
    const listed = accessKey("listed", ["trader"], { destinataries: addresses(CUSTOMER) });
    const { useCases } = accessSetup(policyOf([desk, listed], [], [CROOK]));
    const denied = await useCases.quote(quoteBody({ destinatary: CROOK }), callerFor(desk));
    expect(denied.issues).to.deep.equal([
      {
        type: "destinatary_denied",
        message: `destinatary: ${CROOK} is on the denylist; no trade may pay it`,
        details: {},
      },
    ]);
    const offList = await useCases.quote(quoteBody({ destinatary: PAYEE }), callerFor(listed));
    expect(offList.issues.map((i) => [i.type, i.message])).to.deep.equal([
      ["destinatary_denied", `destinatary: api key "listed" may not pay ${PAYEE} (not among its destinataries)`],
    ]);
    expect((await useCases.quote(quoteBody(), callerFor(listed))).issues).to.deep.equal([]);
  });

  it("raises no destinatary issue for a quote that names no destinatary: it binds none", async () => {
    const listed = accessKey("listed", ["trader"], { destinataries: addresses(CUSTOMER) });
    const perPayee = limitOf("per customer", "destinatary", { maxTrades: 0 });
    const perKey = limitOf("desk daily", "key", { maxUsd: USD });
    const { useCases } = accessSetup(policyOf([listed], [perPayee, perKey]));
    // The wallet stands in for the destinatary (for the gas estimate): it is no one the trade pays.
    const { destinatary: _, ...unnamed } = quoteBody();
    const quote = await useCases.quote(unnamed, callerFor(listed));
    expect(quote.destinatary).to.equal(null);
    expect(quote.issues.map((i) => [i.type, i.details.limit])).to.deep.equal([["limit_exceeded", "desk daily"]]);
    // Named, the destinatary meets its list and its limit.
    const named = await useCases.quote(quoteBody(), callerFor(listed));
    expect(named.issues.map((i) => [i.type, i.details.limit])).to.deep.equal([
      ["limit_exceeded", "per customer"],
      ["limit_exceeded", "desk daily"],
    ]);
  });
  it("raises no issue for a trade that fills a limit exactly", async () => {
    const policy = policyOf([desk], [daily]);
    const { useCases } = await eightUsed(policy);
    expect((await useCases.quote(quoteBody({ amount: "2" }), callerFor(desk))).issues).to.deep.equal([]);
  });

  it("names the limit and the room it has left for a trade one base unit over it, counting nothing", async () => {
    const policy = policyOf([desk], [daily]);
    const setup = await eightUsed(policy);
    const quote = await setup.useCases.quote(quoteBody({ amount: "2.000000000000000001" }), callerFor(desk));
    expect(quote.issues).to.deep.equal([
      {
        type: "limit_exceeded",
        message: 'spending limit "desk daily" (rolling 24h) has no room for this trade',
        details: { limit: "desk daily", window: "24h", maxUsd: "10", roomUsd: "2", tradeUsd: "2.000000000000000001" },
      },
    ]);
    expect(await used(setup, policy)).to.deep.equal([{ usd: 8n * USD, trades: 1 }]);
    // Nothing was reserved for the quote: the room is still there for a trade.
    await setup.useCases.buy(request({ amount: "2", usdAddress: DAI.address }), callerFor(desk));
    expect(await used(setup, policy)).to.deep.equal([{ usd: 10n * USD, trades: 2 }]);
  });

  it("names the trades left under maxTrades, and every limit without room", async () => {
    const limits = [limitOf("one a day", "key", { maxTrades: 1 }), limitOf("service", "all", { maxUsd: 9n * USD })];
    const policy = policyOf([desk], limits);
    const { useCases } = await eightUsed(policy);
    const quote = await useCases.quote(quoteBody({ amount: "1.5" }), callerFor(desk));
    expect(quote.issues.map((i) => i.details)).to.deep.equal([
      { limit: "one a day", window: "24h", maxTrades: "1", roomTrades: "0" },
      { limit: "service", window: "24h", maxUsd: "9", roomUsd: "1", tradeUsd: "1.5" },
    ]);
  });

  it("counts a sell's quote at its expected payout", async () => {
    const policy = policyOf([desk], [daily]);
    const { useCases } = await eightUsed(policy);
    // 2 tokens at 1.02 pay 2.04 USDT: 0.04 over the 2 USD left.
    const quote = await useCases.quote(quoteBody({ kind: "sell", usdAddress: USDT.address }), callerFor(desk));
    expect(quote.issues.map((i) => i.details)).to.deep.equal([
      { limit: "desk daily", window: "24h", maxUsd: "10", roomUsd: "2", tradeUsd: "2.04" },
    ]);
  });

  it("raises no limit issue for a per-key limit that names other keys", async () => {
    const usOnly = limitOf("us desk", "key", { maxUsd: USD, keys: ["desk-us"] });
    const { useCases } = accessSetup(policyOf([desk, accessKey("desk-us", ["trader"])], [usOnly]));
    expect((await useCases.quote(quoteBody({ amount: "5" }), callerFor(desk))).issues).to.deep.equal([]);
  });
});

describe("reads under the access policy", () => {
  /** desk-eu in the middle of a rotation: two hashes under one name. */
  const eu: AccessKey = { ...accessKey("desk-eu", ["trader"]), sha256: [hashOf("desk-eu", 1), hashOf("desk-eu", 2)] };
  const us = accessKey("desk-us", ["trader"]);
  const audit = accessKey("audit", ["viewer"], { sees: ["desk-eu"] });
  const boss = accessKey("boss", ["approver"], { sees: ["desk-us"] });
  const lead = accessKey("lead", ["trader", "viewer"], { sees: ["desk-us"] });
  const everyone = accessKey("everyone", ["viewer"], { sees: ["*"] });
  const root = accessKey("root", ["admin"]);
  const lonely = accessKey("lonely", ["viewer"]);
  const policy = policyOf([eu, us, audit, boss, lead, everyone, root, lonely]);

  /**
   * Four trades, each with webhook deliveries: one desk-eu sent before the service had an access
   * file (no name, its first hash's id), one under each of its hashes, and one of desk-us's.
   */
  async function fourTrades() {
    const setup = accessSetup(undefined);
    const ids = policy.keys.flatMap((key) => key.sha256.map((_, n) => callerFor(key, n + 1).scope));
    await setup.journal.registerWebhookScopes("this instance", ids, 60_000);
    const legacy = await setup.useCases.buy(request(), { scope: callerFor(eu, 1).scope });
    setup.use(policy);
    const eu1 = await setup.useCases.buy(request(), callerFor(eu, 1));
    const eu2 = await setup.useCases.sell(request(), callerFor(eu, 2));
    const usTrade = await setup.useCases.remittance(request(), callerFor(us));
    const idOf = (hash: string) => setup.journal.trades().find((t) => t.txHash === hash)!.id;
    const trades = { legacy: idOf(legacy.transactionHash), eu1: idOf(eu1.transactionHash) };
    const all = { ...trades, eu2: idOf(eu2.transactionHash), us: idOf(usTrade.transactionHash) };
    const hashes = { legacy, eu1, eu2, us: usTrade };
    return { ...setup, trades: all, hashes };
  }

  const euSees = ["legacy", "eu1", "eu2"];
  const usSees = ["us"];
  const allSees = ["legacy", "eu1", "eu2", "us"];
  const readers: Array<[string, AccessKey, number, string[]]> = [
    ["desk-eu, under its first hash", eu, 1, euSees],
    ["desk-eu, under its second hash", eu, 2, euSees],
    ["desk-us, a trader", us, 1, usSees],
    ['audit, a viewer that sees ["desk-eu"]', audit, 1, euSees],
    ['boss, an approver that sees ["desk-us"] (a viewer until approvals exist)', boss, 1, usSees],
    ['lead, a trader and a viewer that sees ["desk-us"]', lead, 1, usSees],
    ['everyone, a viewer that sees ["*"]', everyone, 1, allSees],
    ["root, an admin", root, 1, allSees],
    ["lonely, a viewer that sees no one", lonely, 1, []],
  ];

  /** The names of the trades among `ids`, in the order of `allSees`. */
  const named = (trades: Record<string, string>, ids: string[]) =>
    allSees.filter((name) => ids.includes(trades[name]!));

  for (const [who, key, n, expected] of readers) {
    it(`answers ${who} the history, summary and deliveries of ${expected.join(", ") || "no trade"}`, async () => {
      const { useCases, trades } = await fourTrades();
      const context = callerFor(key, n);
      const history = await useCases.trades({}, context);
      expect(
        named(
          trades,
          history.trades.map((t) => t.id),
        ),
      ).to.deep.equal(expected);
      const summary = await useCases.tradeSummary({}, context);
      expect(summary.groups.reduce((sum, group) => sum + group.count, 0)).to.equal(expected.length);
      const deliveries = await useCases.webhookDeliveries({}, context);
      expect(named(trades, [...new Set(deliveries.deliveries.map((d) => d.tradeId!))])).to.deep.equal(expected);
    });
  }

  it("says in each trade which key's name sent it, null for a trade sent before the key had one", async () => {
    const { useCases, trades } = await fourTrades();
    const history = await useCases.trades({}, callerFor(root));
    const names = Object.fromEntries(history.trades.map((t) => [named(trades, [t.id])[0], t.apiKeyName]));
    expect(names).to.deep.equal({ legacy: null, eu1: "desk-eu", eu2: "desk-eu", us: "desk-us" });
  });

  it("answers a trade's status to the keys that see it, and 'not found' to the others", async () => {
    const { useCases, hashes } = await fourTrades();
    const hash = hashes.eu2.transactionHash;
    for (const [key, n] of [
      [eu, 1],
      [eu, 2],
      [audit, 1],
      [everyone, 1],
      [root, 1],
    ] as const) {
      const view = await useCases.trade(hash, callerFor(key, n));
      expect([view.transactionHash, view.apiKeyName], key.name).to.deep.equal([hash, "desk-eu"]);
    }
    for (const key of [us, boss, lead, lonely]) {
      const error = await rejection(useCases.trade(hash, callerFor(key)));
      expect(error, key.name).to.be.instanceOf(TradeNotFoundError);
    }
    const legacy = await useCases.trade(hashes.legacy.transactionHash, callerFor(audit));
    expect(legacy.apiKeyName).to.equal(null);
  });

  describe("retrying a delivery", () => {
    /** The trades of fourTrades, each with its first delivery failed. */
    async function failedDeliveries() {
      const setup = await fourTrades();
      const scopes = new Map(policy.keys.flatMap((k) => k.sha256.map((_, n) => [callerFor(k, n + 1).scope, 10])));
      const claimed = await setup.journal.claimWebhookEvents("deliverer", scopes, 60_000);
      for (const event of claimed)
        await setup.journal.recordWebhookAttempt(
          event.id,
          "deliverer",
          { at: new Date(), statusCode: 500, error: "HTTP 500" },
          { status: "failed" },
        );
      const failed = Object.fromEntries(
        Object.entries(setup.trades).map(([name, id]) => [name, claimed.find((e) => e.tradeId === id)!.id]),
      );
      return { ...setup, failed };
    }

    it("lets a trader retry its own, under either hash of its rotation, and never another key's", async () => {
      const { useCases, failed } = await failedDeliveries();
      const retried = await useCases.retryWebhookDelivery(failed.eu1, callerFor(eu, 2));
      expect([retried.id, retried.status]).to.deep.equal([failed.eu1, "pending"]);
      await useCases.retryWebhookDelivery(failed.legacy, callerFor(eu, 2));
      for (const [key, delivery] of [
        [us, failed.eu2],
        [eu, failed.us],
        [lead, failed.us],
      ] as const) {
        const error = await rejection(useCases.retryWebhookDelivery(delivery, callerFor(key)));
        expect(error, key.name).to.be.instanceOf(WebhookDeliveryNotFoundError);
      }
    });

    it("lets an admin retry anyone's", async () => {
      const { useCases, failed } = await failedDeliveries();
      for (const delivery of [failed.us, failed.eu2])
        expect((await useCases.retryWebhookDelivery(delivery, callerFor(root))).status).to.equal("pending");
    });

    for (const [key, trade] of [
      [audit, "eu1"],
      [boss, "us"],
      [everyone, "us"],
    ] as const) {
      it(`refuses ${key.name}, ${key.roles.has("approver") ? "an" : "a"} ${[...key.roles].join(" and ")}, even a delivery it reads`, async () => {
        const { useCases, failed } = await failedDeliveries();
        const error = await rejection(useCases.retryWebhookDelivery(failed[trade]!, callerFor(key)));
        expect(error).to.be.instanceOf(PermissionDeniedError);
        expect((error as PermissionDeniedError).message).to.match(
          new RegExp(`^api key "${key.name}" may not retry a webhook delivery`),
        );
        const listed = await useCases.webhookDeliveries({ status: "failed" }, callerFor(key));
        expect(listed.deliveries.length, "it still reads them").to.be.greaterThan(0);
      });
    }
  });
});
