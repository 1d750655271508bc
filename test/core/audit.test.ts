/**
 * What the use cases record in the audit log (issue 38, item 4), on the memory journal: a trade
 * accepted with its first write; refused by a role, a scope, the denylist or a spending limit,
 * with the rule or limit; refused after it was accepted, with the write that discards it; nothing
 * for a malformed request or a trade that fails once signed (an outcome); a delivery retried by
 * hand; and the log read by an admin key only.
 */
import { expect } from "chai";

import { MemoryJournal, verifyAudit } from "../../adapters/journal/index.js";
import {
  type AccessPolicy,
  type AuditRecord,
  createUseCases,
  InsufficientFundsError,
  InvalidArgumentError,
  PermissionDeniedError,
  type ProvenTrade,
  SpendingLimitError,
  TradeRevertedError,
  type TradeOrder,
} from "../../core/index.js";
import {
  accessKey,
  CountingPricePort,
  CROOK,
  callerFor,
  limitOf,
  policyOf,
  rejection,
  StepTradePort,
  USD,
} from "./access-fixtures.js";
import { CONFIG, request, WALLET } from "./fixtures.js";

const desk = accessKey("desk", ["trader"]);
const viewer = accessKey("viewer", ["viewer"]);
const admin = accessKey("ops", ["admin"]);

/** A trade port whose proof fails, when `refusal` is set: a refusal after the trade was accepted. */
class RefusingPort extends StepTradePort {
  refusal: Error | undefined;
  override async prove(order: TradeOrder): Promise<ProvenTrade> {
    if (this.refusal) throw this.refusal;
    return super.prove(order);
  }
}

function setup(policy: AccessPolicy | undefined) {
  const journal = new MemoryJournal();
  const trade = new RefusingPort();
  const useCases = createUseCases({
    trade,
    price: new CountingPricePort(),
    config: CONFIG,
    journal,
    quote: trade,
    quotes: journal,
    webhooks: journal,
    wallets: [WALLET],
    policy: () => policy,
    audit: journal.ports.audit,
  });
  const records = async (): Promise<AuditRecord[]> => (await journal.auditPage({ limit: 100 })).records;
  return { journal, trade, useCases, records };
}

async function* each(records: AuditRecord[]) {
  yield* records;
}

describe("the audit log, as the use cases write it", function () {
  it("records a trade accepted with its first write, by the key's name, and nothing more when it is confirmed", async function () {
    const { journal, useCases, records } = setup(policyOf([desk]));
    await useCases.buy(request({ amount: "25" }), callerFor(desk));
    const [trade] = journal.trades();
    const all = await records();
    expect(all).to.have.length(1);
    expect(all[0]).to.deep.include({ seq: 1, actor: "desk", action: "trade.accepted", subject: trade!.id });
    expect(all[0]!.details).to.deep.include({ kind: "buy", amount: "25", userAddress: WALLET });
    expect(await verifyAudit(each(all))).to.deep.include({ ok: true });
  });

  it("records a refusal by role, scope or denylist with its rule, and one by a spending limit with the limit", async function () {
    const scoped = accessKey("desk", ["trader"], { kinds: new Set(["sell"]) });
    const policy = policyOf([scoped, viewer], [limitOf("desk daily", "key", { maxUsd: 10n * USD })], [CROOK]);
    const { journal, useCases, records } = setup(policy);
    expect(await rejection(useCases.buy(request(), callerFor(viewer)))).to.be.instanceOf(PermissionDeniedError);
    expect(await rejection(useCases.buy(request(), callerFor(scoped)))).to.be.instanceOf(PermissionDeniedError);
    const denied = useCases.sell(request({ amount: "1", destinatary: CROOK }), callerFor(scoped));
    expect(await rejection(denied)).to.be.instanceOf(PermissionDeniedError);
    const over = useCases.sell(request({ amount: "100" }), callerFor(scoped));
    expect(await rejection(over)).to.be.instanceOf(SpendingLimitError);
    expect(journal.trades(), "no trade record").to.deep.equal([]);
    const all = await records();
    expect(
      all.map((r) => [r.actor, r.action, r.subject, r.details.code, r.details.rule ?? r.details.limit]),
    ).to.deep.equal([
      ["viewer", "trade.refused", null, "permission_denied", "role"],
      ["desk", "trade.refused", null, "permission_denied", "scope"],
      ["desk", "trade.refused", null, "permission_denied", "denylist"],
      ["desk", "trade.refused", null, "spending_limit_exceeded", "desk daily"],
    ]);
    expect(all[2]!.details).to.deep.include({ kind: "sell", destinatary: CROOK, amount: "1" });
    expect(all[0]!.details.message).to.match(/api key "viewer" may not trade/);
  });

  it("records a refusal after acceptance with the write that discards the trade, and not a failure once signed", async function () {
    const { journal, trade, useCases, records } = setup(policyOf([desk]));
    trade.refusal = new InsufficientFundsError("the wallet's DAI cannot cover 25");
    expect(await rejection(useCases.buy(request({ amount: "25" }), callerFor(desk)))).to.be.instanceOf(
      InsufficientFundsError,
    );
    expect(journal.trades()).to.deep.equal([]);
    trade.refusal = undefined;
    trade.failure = new TradeRevertedError("paused"); // mined and reverted: the chain's outcome
    await rejection(useCases.buy(request({ amount: "26" }), callerFor(desk)));
    expect(journal.trades().map((t) => t.status)).to.deep.equal(["failed"]);
    const all = await records();
    expect(all.map((r) => [r.action, r.details.code ?? null])).to.deep.equal([
      ["trade.accepted", null],
      ["trade.refused", "insufficient_funds"],
      ["trade.accepted", null],
    ]);
    expect(all[1]!.subject, "the refused trade's id").to.equal(all[0]!.subject);
  });

  it("records nothing for a malformed request, and works without an access file (the key's id as actor)", async function () {
    const { useCases, records } = setup(undefined);
    const id = callerFor(desk).scope;
    expect(await rejection(useCases.buy(request({ amount: "x" }), { scope: id }))).to.be.instanceOf(
      InvalidArgumentError,
    );
    expect(await records()).to.deep.equal([]);
    await useCases.buy(request(), { scope: id });
    expect((await records()).map((r) => [r.actor, r.action])).to.deep.equal([[id, "trade.accepted"]]);
  });

  it("records a delivery retried by hand, by the key that asked", async function () {
    const { journal, useCases, records } = setup(policyOf([desk, admin]));
    await journal.registerWebhookScopes("me", [desk.id], 60_000);
    await useCases.buy(request(), callerFor(desk));
    const [event] = await journal.claimWebhookEvents("me", new Map([[desk.id, 1]]), 60_000);
    await journal.recordWebhookAttempt(
      event!.id,
      "me",
      { at: new Date(), statusCode: 500, error: "500" },
      {
        status: "failed",
      },
    );
    await useCases.retryWebhookDelivery(event!.id, callerFor(admin));
    const last = (await records()).at(-1)!;
    expect(last).to.deep.include({ actor: "ops", action: "delivery.retried", subject: event!.id });
    expect(last.details).to.deep.equal({ by: "admin" });
  });

  it("is read by an admin key only, filtered and paged; without an access file by none", async function () {
    const { useCases } = setup(policyOf([desk, viewer, admin]));
    for (let i = 0; i < 3; i++) await useCases.buy(request(), callerFor(desk));
    await rejection(useCases.buy(request(), callerFor(viewer)));
    const refused = await rejection(useCases.audit({}, callerFor(desk)));
    expect(refused).to.be.instanceOf(PermissionDeniedError);
    expect((refused as Error).message).to.match(/api key "desk" may not read the audit log: .*needs admin/);
    const first = await useCases.audit({ action: "trade.accepted", limit: "2" }, callerFor(admin));
    expect(first.records.map((r) => r.seq)).to.deep.equal([1, 2]);
    const second = await useCases.audit({ action: "trade.accepted", cursor: first.nextCursor! }, callerFor(admin));
    expect(second).to.deep.include({ nextCursor: null });
    expect(second.records.map((r) => r.seq)).to.deep.equal([3]);
    expect((await useCases.audit({ actor: "viewer" }, callerFor(admin))).records.map((r) => r.action)).to.deep.equal([
      "trade.refused",
    ]);
    expect(await rejection(useCases.audit({ action: "nope" }, callerFor(admin)))).to.be.instanceOf(
      InvalidArgumentError,
    );
    expect(await rejection(useCases.audit({ cursor: "x" }, callerFor(admin)))).to.be.instanceOf(InvalidArgumentError);
    const open = setup(undefined);
    const none = await rejection(open.useCases.audit({}, { scope: "some-key-id" }));
    expect((none as Error).message).to.match(/runs without ACCESS_FILE/);
  });
});
