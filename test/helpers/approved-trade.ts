/**
 * A buy held by a one-approver rule and approved by "risk", in a journal: the start of the
 * approved-trade tests of the journals (what the approval use cases leave behind, without them).
 */
import { expect } from "chai";

import { type ApprovalJournal, heldEntry, newApproval, type TradeJournal } from "../../core/index.js";

const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

/** The trade's id. Its times by Date.now, so a test that moves the clock moves them too. */
export async function approvedTrade(journal: TradeJournal & ApprovalJournal, key: string): Promise<string> {
  const { record } = await journal.open({
    scope: "desk-id",
    keyName: "desk",
    idempotencyKey: key,
    requestHash: "h",
    kind: "buy",
    request: { userAddress: WALLET, destinatary: WALLET, amount: "30000", usdAddress: WALLET },
  });
  const rule = { name: "large", aboveUsd: 0n, approvers: 1, expiresAfterMs: 3_600_000, expiresAfter: "1h" };
  const approval = newApproval([rule], Date.now());
  await journal.hold(record.id, approval, heldEntry({ id: "desk-id" }, record.id, approval));
  const decided = await journal.decideApproval(record.id, "approve", {
    by: "risk",
    at: new Date(Date.now()).toISOString(),
    reason: null,
  });
  expect(decided.outcome).to.equal("approved");
  return record.id;
}
