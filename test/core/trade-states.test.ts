/**
 * The trade model (core/trade-states.ts): what each of the journal's operations does to a trade in
 * each state, and the rules that hold across them. The journals are held to it by the journal
 * contract suite (test/adapters/journal/transitions.contract.ts).
 */
import { expect } from "chai";

import {
  CHAIN_VERDICTS,
  FINAL_STATUSES,
  SPENDING_STATUSES,
  TRADE_STATUSES,
  TRADE_TRANSITIONS,
  TradeTransitionError,
  tradeVerdict,
  type TradeOperation,
  type TradeStatus,
  type TradeVerdict,
} from "../../core/index.js";

const OPERATIONS = Object.keys(TRADE_TRANSITIONS) as TradeOperation[];
const SIGNED = "0x8e3b1a4dfe0c4b2a1f9e8d7c6b5a49382716a5b4c3d2e1f0a9b8c7d6e5f4a3b2";

const [A, I, R] = ["applies", "ignored", "refused"] as const satisfies readonly TradeVerdict[];

/**
 * What every operation does from each state, as the three journals did before the model was
 * theirs (their `WHERE` clauses and checks), and as the approvals placed their states: A applies,
 * I ignored, R refused. A trade signed, submitted, mined, confirmed, failed or expired has a
 * transaction here, as one signed, submitted, mined or confirmed always does; a trade accepted, or
 * held for (or given, or refused) its approval, has none.
 */
const EXPECTED: Record<TradeOperation, readonly TradeVerdict[]> = {
  // accepted, signed, submitted, mined, confirmed, failed, expired, pending_approval, approved, rejected, cancelled
  markSigned: [A, A, A, A, A, A, A, R, A, R, R],
  markSubmitted: [I, A, I, I, I, I, I, I, I, I, I],
  markReorged: [I, I, I, A, A, I, I, I, I, I, I],
  markMined: [A, A, A, A, A, A, A, R, R, R, A],
  markConfirmed: [A, A, A, A, A, A, A, R, R, R, A],
  markFailed: [A, A, A, A, A, A, I, R, A, R, I],
  markExpired: [A, A, A, A, A, A, A, R, R, R, I],
  discard: [A, R, R, R, R, R, R, R, R, R, R],
  releaseSlot: [I, A, I, I, I, I, I, I, I, I, I],
  forgetUnsigned: [A, I, I, I, I, I, I, I, I, I, I],
  markHeld: [A, R, R, R, R, R, R, R, R, R, R],
  markApproved: [R, R, R, R, R, R, R, A, R, R, R],
  markRejected: [R, R, R, R, R, R, R, A, R, R, R],
  expireApproval: [I, I, I, I, I, I, I, A, I, I, I],
  // Cancelled by its sender or an admin: at once with nothing signed; signed, on the chain's word (its no-op mined).
  markCancelled: [A, A, A, A, A, A, A, A, A, R, I],
};

/** The states a trade is in with nothing signed, as every journal keeps them. */
const UNSIGNED: readonly TradeStatus[] = ["accepted", "pending_approval", "approved", "rejected"];

/** A trade in `status`, with a transaction unless it is one of UNSIGNED. */
const tradeIn = (status: TradeStatus) => ({ status, txHash: UNSIGNED.includes(status) ? null : SIGNED });

describe("the trade model", function () {
  it("does what the journals did, from every state, for every operation", function () {
    for (const operation of OPERATIONS) {
      const actual = TRADE_STATUSES.map((status) => tradeVerdict(operation, tradeIn(status)));
      expect(actual, operation).to.deep.equal(EXPECTED[operation]);
    }
  });

  it("places every state in each operation exactly once: applied, ignored or refused", function () {
    for (const operation of OPERATIONS) {
      const { applies, ignored, refused } = TRADE_TRANSITIONS[operation];
      expect([...applies, ...ignored, ...refused].sort(), operation).to.deep.equal([...TRADE_STATUSES].sort());
    }
  });

  it("leaves a final state only on the chain's word, by signing again, or, with nothing signed, by discarding", function () {
    for (const status of FINAL_STATUSES)
      for (const operation of OPERATIONS) {
        const leaves = (trade: { status: TradeStatus; txHash: string | null }) =>
          tradeVerdict(operation, trade) === "applies" && TRADE_TRANSITIONS[operation].to !== status;
        if (leaves({ status, txHash: SIGNED }))
          expect([...CHAIN_VERDICTS, "markSigned"], `${operation} from ${status}`).to.include(operation);
        if (leaves({ status, txHash: null }))
          expect([...CHAIN_VERDICTS, "markSigned", "discard"], `${operation} from ${status}`).to.include(operation);
      }
  });

  it("never overwrites an expired trade as failed: the no-op that took its nonce is its outcome", function () {
    expect(tradeVerdict("markFailed", { status: "expired", txHash: SIGNED })).to.equal("ignored");
    expect(tradeVerdict("markFailed", { status: "expired", txHash: null })).to.equal("ignored");
  });

  it("never deletes a trade with a signed transaction, whatever its state", function () {
    const deleting = OPERATIONS.filter((operation) => TRADE_TRANSITIONS[operation].to === null);
    expect(deleting).to.deep.equal(["discard", "forgetUnsigned"]);
    for (const operation of deleting)
      for (const status of TRADE_STATUSES)
        expect(tradeVerdict(operation, { status, txHash: SIGNED }), `${operation} from ${status}`).to.not.equal(
          "applies",
        );
    // Refused aloud to whoever asks for one trade; passed over by the sweep.
    expect(tradeVerdict("discard", { status: "failed", txHash: SIGNED })).to.equal("refused");
    expect(tradeVerdict("discard", { status: "failed", txHash: null })).to.equal("applies");
    expect(tradeVerdict("forgetUnsigned", { status: "accepted", txHash: SIGNED })).to.equal("ignored");
  });

  it("refuses nothing that only passes over trades: a released slot's trade, the sweep of unsigned ones", function () {
    for (const operation of ["releaseSlot", "forgetUnsigned", "expireApproval"] as const)
      expect(TRADE_TRANSITIONS[operation].refused, operation).to.deep.equal([]);
  });

  it("never signs a trade held for an approval, or rejected: only an approved one", function () {
    for (const status of ["pending_approval", "rejected"] as const)
      expect(tradeVerdict("markSigned", { status, txHash: null }), status).to.equal("refused");
    expect(tradeVerdict("markSigned", { status: "approved", txHash: null })).to.equal("applies");
    // Only an approver's decision, the expiry, or its sender's (or an admin's) cancel moves a held trade on.
    const leaving = OPERATIONS.filter(
      (operation) => tradeVerdict(operation, { status: "pending_approval", txHash: null }) === "applies",
    );
    expect(leaving.sort()).to.deep.equal(["expireApproval", "markApproved", "markCancelled", "markRejected"]);
  });

  it("signs a failed or expired trade again only over its own first signature, never one that had none", function () {
    // An approved trade the upkeep failed as interrupted ("nothing was paid: send it again") while
    // its run went on: the run's signature must not pay it after all.
    for (const status of ["failed", "expired"] as const) {
      expect(tradeVerdict("markSigned", { status, txHash: SIGNED }), `${status}, signed`).to.equal("applies");
      expect(tradeVerdict("markSigned", { status, txHash: null }), `${status}, nothing signed`).to.equal("refused");
    }
    expect(new TradeTransitionError("markSigned", "t-3", { status: "failed", txHash: null }).message).to.equal(
      "trade t-3 is failed without a signed transaction: markSigned does not apply",
    );
  });

  it("cancels a trade with nothing signed at once, and never signs or fails a cancelled one", function () {
    for (const status of ["accepted", "pending_approval", "approved"] as const)
      expect(tradeVerdict("markCancelled", { status, txHash: null }), status).to.equal("applies");
    expect(FINAL_STATUSES).to.include("cancelled");
    // Its no-op took the nonce (or nothing was signed): that is its outcome, as an expired trade's.
    for (const operation of ["markSigned", "markHeld", "markApproved", "markRejected"] as const)
      expect(tradeVerdict(operation, { status: "cancelled", txHash: null }), operation).to.equal("refused");
    for (const operation of ["markFailed", "markExpired", "markSubmitted", "markReorged"] as const)
      expect(tradeVerdict(operation, { status: "cancelled", txHash: SIGNED }), operation).to.equal("ignored");
    // The original mined after all (a reorg took the no-op's block): the chain's word wins.
    expect(tradeVerdict("markConfirmed", { status: "cancelled", txHash: SIGNED })).to.equal("applies");
    // A rejected trade stays rejected.
    expect(tradeVerdict("markCancelled", { status: "rejected", txHash: null })).to.equal("refused");
  });

  it("does not count a cancelled trade against the spending limits: its room is given back", function () {
    expect(SPENDING_STATUSES as readonly string[]).to.not.include("cancelled");
  });

  it("gives a refusal that names the trade, where it stands and the operation", function () {
    const refused = new TradeTransitionError("discard", "t-1", { status: "signed", txHash: SIGNED });
    expect(refused).to.be.instanceOf(Error);
    expect(refused).to.deep.include({ operation: "discard", tradeId: "t-1", status: "signed" });
    expect(refused.message).to.equal("trade t-1 has a signed transaction: discard does not apply");
    expect(new TradeTransitionError("markSigned", "t-2", { status: "confirmed", txHash: SIGNED }).message).to.equal(
      "trade t-2 is confirmed: markSigned does not apply",
    );
  });
});
