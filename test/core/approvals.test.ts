/**
 * Approvals in the core (core/approvals.ts, the hold in the trade use case, approvals.use-case.ts,
 * trade-approved.ts) over the memory journal and a trade port that records every call: a held
 * trade reaches no step of the port (nothing priced, proven, reserved or signed) until it is
 * approved, which runs it in the background; the rules' thresholds; what a decision does; and the
 * refusals of a decision's request, each naming its field.
 */
import { expect } from "chai";

import {
  type AccessKey,
  type ApprovalRule,
  type Caller,
  createUseCases,
  decideOn,
  holdingRules,
  type InvalidArgumentError,
  newApproval,
  PermissionDeniedError,
  TradeHeldError,
  TradeNotFoundError,
} from "../../core/index.js";
import { MemoryJournal } from "../helpers/memory-journal.js";
import { accessKey, CountingPricePort, callerFor, policyOf, rejection, StepTradePort, USD } from "./access-fixtures.js";
import { CONFIG, request, WALLET } from "./fixtures.js";

const DESK = accessKey("desk", ["trader"]);
const RISK = accessKey("risk", ["approver"], { sees: ["desk"] });
const VIEWER = accessKey("viewer", ["viewer"], { sees: ["desk"] });

function rule(overrides: Partial<ApprovalRule> = {}): ApprovalRule {
  return {
    name: "large",
    aboveUsd: 100n * USD,
    keys: new Set(["desk"]),
    approvers: 1,
    expiresAfterMs: 3_600_000,
    expiresAfter: "1h",
    ...overrides,
  };
}

function setup(rules: ApprovalRule[] = [rule()], more: AccessKey[] = []) {
  const journal = new MemoryJournal();
  const trade = new StepTradePort();
  const policy = { ...policyOf([DESK, RISK, VIEWER, ...more]), approvals: rules };
  const useCases = createUseCases({
    trade,
    price: new CountingPricePort(),
    config: CONFIG,
    journal,
    quote: trade,
    quotes: journal,
    wallets: [WALLET],
    policy: () => policy,
    audit: journal.ports.audit,
    approvals: journal,
  });
  return { journal, trade, useCases };
}

const as = (caller: { scope: string; caller: Caller }) => caller;

describe("approvals in the core", function () {
  it("holds a trade above a rule's threshold before any step of the port, and runs it once approved", async function () {
    const { journal, trade, useCases } = setup();
    const held = await rejection(useCases.buy(request({ amount: "150" }), as(callerFor(DESK))));
    expect(held).to.be.instanceOf(TradeHeldError);
    const { tradeId, status } = held as TradeHeldError;
    expect(status).to.equal("pending_approval");
    expect(trade.calls, "nothing priced, proven, reserved or signed").to.deep.equal([]);
    expect((await journal.get(tradeId))!.status).to.equal("pending_approval");
    const view = await useCases.approveTrade(tradeId, { reason: "ok" }, as(callerFor(RISK)));
    expect(view.status).to.equal("approved");
    // The run is the background's, not the approver's request's.
    for (let i = 0; i < 100 && (await journal.get(tradeId))!.status !== "confirmed"; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect((await journal.get(tradeId))!.status).to.equal("confirmed");
    expect(trade.calls.filter((call) => call === "sign")).to.have.length(1);
    expect(trade.calls.slice(0, 3)).to.deep.equal(["prove", "reserve", "sign"]);
  });

  it("fails an approved trade whose only transaction the node refused and its slot was given back: never left accepted, never forgotten", async function () {
    const { journal, trade, useCases } = setup();
    const held = await rejection(useCases.buy(request({ amount: "150" }), as(callerFor(DESK))));
    const { tradeId } = held as TradeHeldError;
    // The send queue finds the send refused and known nowhere, and releases its slot (send-queue.ts).
    trade.send = async (signed) => {
      trade.calls.push("send");
      await journal.releaseSlot(signed.tx.wallet, signed.tx.nonce, signed.tx.txHash);
      throw new Error("the node refused it");
    };
    await useCases.approveTrade(tradeId, { reason: "ok" }, as(callerFor(RISK)));
    for (let i = 0; i < 100 && (await journal.get(tradeId))?.status === "approved"; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    const record = await journal.get(tradeId);
    expect(record, "kept").to.not.equal(undefined);
    expect(record).to.deep.include({ status: "failed", txHash: null });
    expect(await journal.forgetUnsigned(0)).to.equal(0);
    expect((await journal.get(tradeId))?.status).to.equal("failed");
    expect(trade.calls.filter((call) => call === "send")).to.have.length(1);
  });

  it("holds only what counts more than the threshold, of the rule's keys (or every key's without keys)", function () {
    const { keys: _, ...anyKey } = rule({ name: "any", aboveUsd: 1000n * USD });
    const everyKey = { ...policyOf([DESK, RISK]), approvals: [rule(), anyKey] };
    expect(holdingRules(everyKey, "desk", 100n * USD)).to.deep.equal([]);
    expect(holdingRules(everyKey, "desk", 100n * USD + 1n).map((r) => r.name)).to.deep.equal(["large"]);
    expect(holdingRules(everyKey, "other", 5000n * USD).map((r) => r.name)).to.deep.equal(["any"]);
    expect(holdingRules(everyKey, "desk", 5000n * USD).map((r) => r.name)).to.deep.equal(["large", "any"]);
    expect(holdingRules(undefined, "desk", 5000n * USD)).to.deep.equal([]);
  });

  it("needs the most approvals any rule asks, until the earliest expiry", function () {
    const approval = newApproval(
      [rule({ approvers: 1 }), rule({ name: "b", approvers: 3, expiresAfterMs: 60_000 })],
      0,
    );
    expect(approval).to.deep.include({ required: 3, expiresAt: new Date(60_000).toISOString(), rules: ["large", "b"] });
  });

  it("decides: an approval counted, the last one approving, a repeat the same, going back or a late one refused", function () {
    const approval = newApproval([rule({ approvers: 2 })], Date.now());
    const at = new Date().toISOString();
    const held = { status: "pending_approval" as const, approval };
    const first = decideOn(held, "approve", { by: "a", at, reason: null });
    expect(first).to.deep.include({ kind: "applies", outcome: "counted", status: "pending_approval" });
    const counted = {
      status: "pending_approval" as const,
      approval: (first as { approval: typeof approval }).approval,
    };
    expect(decideOn(counted, "approve", { by: "a", at, reason: null })).to.deep.equal({ kind: "repeated" });
    expect(decideOn(counted, "reject", { by: "a", at, reason: null })).to.deep.equal({ kind: "refused" });
    expect(decideOn(counted, "approve", { by: "b", at, reason: null })).to.deep.include({ outcome: "approved" });
    const late = new Date(Date.parse(approval.expiresAt) + 1).toISOString();
    expect(decideOn(held, "approve", { by: "b", at: late, reason: null })).to.deep.equal({ kind: "expired" });
    expect(decideOn({ status: "accepted" }, "approve", { by: "b", at, reason: null })).to.deep.equal({
      kind: "refused",
    });
  });

  it("refuses a decision's bad request naming the field, a key without the approver role, and a listing by status other than pending", async function () {
    const { useCases } = setup();
    const held = (await rejection(useCases.buy(request({ amount: "150" }), as(callerFor(DESK))))) as TradeHeldError;
    const risk = as(callerFor(RISK));
    const field = async (promise: Promise<unknown>) => ((await rejection(promise)) as InvalidArgumentError).field;
    expect(await field(useCases.approveTrade("0x12", undefined, risk))).to.equal("id");
    expect(await field(useCases.approveTrade(held.tradeId, { reason: 5 }, risk))).to.equal("reason");
    expect(await field(useCases.approveTrade(held.tradeId, { reason: "x".repeat(501) }, risk))).to.equal("reason");
    expect(await field(useCases.approveTrade(held.tradeId, { why: "x" }, risk))).to.equal("why");
    expect(await field(useCases.approveTrade(held.tradeId, ["x"], risk))).to.equal("request");
    const unknown = await rejection(useCases.approveTrade("00000000-0000-4000-8000-000000000000", undefined, risk));
    expect(unknown).to.be.instanceOf(TradeNotFoundError);
    expect(await rejection(useCases.rejectTrade(held.tradeId, undefined, as(callerFor(VIEWER))))).to.be.instanceOf(
      PermissionDeniedError,
    );
    expect(await rejection(useCases.approvals({}, as(callerFor(DESK))))).to.be.instanceOf(PermissionDeniedError);
    expect(await field(useCases.approvals({ status: "approved" }, risk))).to.equal("status");
    expect((await useCases.approvals({ status: "pending" }, risk)).trades.map((t) => t.id)).to.deep.equal([
      held.tradeId,
    ]);
  });

  it("records each refused decision in the audit log with its code and rule: no role, its own trade, a trade it does not see, a decided trade", async function () {
    const self = accessKey("self", ["trader", "approver"], { sees: ["self"] });
    const blind = accessKey("blind", ["approver"], { sees: ["someone"] });
    const second = accessKey("second", ["approver"], { sees: ["desk"] });
    const { journal, useCases } = setup([rule({ keys: new Set(["desk", "self"]) })], [self, blind, second]);
    const held = (await rejection(useCases.buy(request({ amount: "150" }), as(callerFor(DESK))))) as TradeHeldError;
    const own = (await rejection(useCases.buy(request({ amount: "150" }), as(callerFor(self))))) as TradeHeldError;
    const before = (await journal.auditPage({ limit: 100 })).records.length;
    await rejection(useCases.approveTrade(held.tradeId, undefined, as(callerFor(VIEWER))));
    await rejection(useCases.approveTrade(own.tradeId, undefined, as(callerFor(self))));
    await rejection(useCases.rejectTrade(held.tradeId, undefined, as(callerFor(blind))));
    await useCases.approveTrade(held.tradeId, undefined, as(callerFor(RISK)));
    await rejection(useCases.rejectTrade(held.tradeId, { reason: "too late" }, as(callerFor(second))));
    // A malformed request is refused before anything is decided, and not recorded.
    await rejection(useCases.approveTrade("0x12", undefined, as(callerFor(blind))));
    const records = (await journal.auditPage({ limit: 100 })).records.slice(before);
    const refused = records.filter((record) => record.action === "approval.refused");
    expect(
      refused.map(({ actor, subject, details }) => [actor, subject, details.verdict, details.code, details.rule]),
    ).to.deep.equal([
      ["viewer", held.tradeId, "approve", "permission_denied", "role"],
      ["self", own.tradeId, "approve", "permission_denied", "requester"],
      ["blind", held.tradeId, "reject", "trade_not_found", undefined],
      ["second", held.tradeId, "reject", "approval_conflict", undefined],
    ]);
    expect(refused.every((record) => typeof record.details.message === "string")).to.equal(true);
    // A key without the role sending a malformed decision gets 400, and nothing is recorded.
    const count = (await journal.auditPage({ limit: 100 })).records.length;
    expect(await rejection(useCases.approveTrade("../../x", { junk: 1 }, as(callerFor(VIEWER))))).to.have.property(
      "field",
      "id",
    );
    expect((await journal.auditPage({ limit: 100 })).records).to.have.length(count);
  });

  it("records no refused decision without an access file, where no trade is ever held", async function () {
    const journal = new MemoryJournal();
    const trade = new StepTradePort();
    const useCases = createUseCases({
      trade,
      price: new CountingPricePort(),
      config: CONFIG,
      journal,
      quote: trade,
      quotes: journal,
      wallets: [WALLET],
      audit: journal.ports.audit,
      approvals: journal,
    });
    const scope = { scope: "a".repeat(32) };
    expect(
      await rejection(useCases.approveTrade("00000000-0000-4000-8000-000000000000", undefined, scope)),
    ).to.be.instanceOf(PermissionDeniedError);
    expect((await journal.auditPage({ limit: 100 })).records).to.deep.equal([]);
  });

  it("decides as an approver sees though the key is an admin too: a trade of a key it does not see is not found, and not listed", async function () {
    const both = accessKey("both", ["admin", "approver"], { sees: ["someone"] });
    const { useCases } = setup([rule()], [both]);
    const held = (await rejection(useCases.buy(request({ amount: "150" }), as(callerFor(DESK))))) as TradeHeldError;
    expect((await useCases.approvals({}, as(callerFor(both)))).trades).to.deep.equal([]);
    expect(await rejection(useCases.approveTrade(held.tradeId, undefined, as(callerFor(both))))).to.be.instanceOf(
      TradeNotFoundError,
    );
    // As an admin it still reads the trade.
    expect((await useCases.trade(held.tradeId, as(callerFor(both)), "id")).status).to.equal("pending_approval");
  });
});
