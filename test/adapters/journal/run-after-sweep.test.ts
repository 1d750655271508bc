/**
 * The run of an approved trade the upkeep failed (approval_interrupted) while it was alive, on a
 * SQLite journal with the real use cases: never signed, and the sweep's outcome stands (its error,
 * one trade.refused record), not written over by the run's own failure.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { openSqliteJournal } from "../../../adapters/journal/index.js";
import {
  type ApprovalRule,
  type Caller,
  createUseCases,
  type TradeHeldError,
  type TradeOrder,
} from "../../../core/index.js";
import {
  accessKey,
  CountingPricePort,
  callerFor,
  policyOf,
  rejection,
  StepTradePort,
  USD,
} from "../../core/access-fixtures.js";
import { CONFIG, request, WALLET } from "../../core/fixtures.js";

class GatedPort extends StepTradePort {
  gate: Promise<void> | undefined;
  override async prove(order: TradeOrder) {
    await this.gate;
    return super.prove(order);
  }
}

const DESK = accessKey("desk", ["trader"]);
const RISK = accessKey("risk", ["approver"], { sees: ["desk"] });
const rule: ApprovalRule = {
  name: "large",
  aboveUsd: 100n * USD,
  keys: new Set(["desk"]),
  approvers: 1,
  expiresAfterMs: 3_600_000,
  expiresAfter: "1h",
};
const as = (caller: { scope: string; caller: Caller }) => caller;

describe("the run of an approved trade the sweep failed (SQLite, the use cases)", function () {
  it("is never signed, and leaves the sweep's error and its one refusal record as they are", async function () {
    const dir = await mkdtemp(join(tmpdir(), "run-after-sweep-"));
    const journal = await openSqliteJournal(join(dir, "journal.sqlite"));
    try {
      const trade = new GatedPort();
      let open!: () => void;
      trade.gate = new Promise((resolve) => (open = resolve));
      const policy = { ...policyOf([DESK, RISK]), approvals: [rule] };
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
      const held = (await rejection(useCases.buy(request({ amount: "150" }), as(callerFor(DESK))))) as TradeHeldError;
      await useCases.approveTrade(held.tradeId, undefined, as(callerFor(RISK)));
      // The run waits in prove; the sweep's bound has passed (as the existing test simulates it).
      const swept = await journal.expireApprovals(new Date(), new Date(Date.now() + 1000));
      expect(swept.failed).to.deep.equal([held.tradeId]);
      const sweptError = (await journal.get(held.tradeId))?.error;
      open();
      for (let i = 0; i < 50 && !trade.calls.includes("abandon"); i++) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 50));
      const after = await journal.get(held.tradeId);
      const audit = (await journal.auditPage({ limit: 100 })).records.filter((r) => r.subject === held.tradeId);
      expect(trade.calls).to.not.include("send");
      expect(after?.status).to.equal("failed");
      expect(after?.error, "the sweep's error stays").to.deep.equal(sweptError);
      expect(audit.filter((r) => r.action === "trade.refused")).to.have.length(1);
    } finally {
      await journal.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
