/**
 * The trade model's part of the journal conformance suite (journal.contract.ts runs it on memory,
 * SQLite and PostgreSQL): for every state a trade can be in (with a signed transaction and, where a
 * trade can be without one, without) and every operation that changes a trade's state, the journal
 * applies, ignores or refuses exactly as the model (core/trade-states.ts) says.
 */
import { expect } from "chai";

import type { Journal } from "../../../adapters/journal/index.js";
import {
  heldEntry,
  newApproval,
  TRADE_STATUSES,
  TRADE_TRANSITIONS,
  tradeVerdict,
  type NewTrade,
  type SignedTradeTx,
  type TradeOperation,
  type TradeRecord,
  type TradeStatus,
  type TradeVerdict,
  type TransactionReceipt,
} from "../../../core/index.js";

export interface TransitionContractContext {
  /** This test's journal. */
  journal(): Journal;
}

const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const hashOf = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;

const NEW_TRADE: NewTrade = {
  scope: "transitions",
  idempotencyKey: null,
  requestHash: "hash",
  kind: "sell",
  request: {
    userAddress: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    destinatary: "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
    amount: "1",
    usdAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  },
};

function signedTx(nonce: number): SignedTradeTx {
  return {
    wallet: WALLET,
    nonce,
    txHash: hashOf(nonce),
    rawTx: `0x02f8${nonce.toString(16)}`,
    maxFeePerGas: 2_000_000_000n,
    maxPriorityFeePerGas: 1n,
    deadline: 1_900_000_000,
  };
}

/** A receipt of the transaction `hash`, mined in block `block`. */
function receipt(hash: string, block: number): TransactionReceipt {
  return {
    blockHash: hashOf(1_000_000 + block),
    blockNumber: block,
    contractAddress: null,
    cumulativeGasUsed: 21_000,
    effectiveGasPrice: 1_000_000_007,
    from: WALLET.toLowerCase(),
    gasUsed: 21_000,
    logsBloom: `0x${"00".repeat(256)}`,
    status: true,
    to: "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512",
    transactionHash: hash,
    transactionIndex: 0,
    type: "0x2",
    events: {},
  };
}

/** Distinct nonces, blocks and messages, so that what an operation wrote is told from what was there. */
let serial = 0;
const next = () => ++serial;

/**
 * How a trade comes to be in each state, through the journal's own operations. A state the model
 * adds needs its way here (the type asks for one).
 */
const REACH: Record<TradeStatus, Array<(journal: Journal, id: string) => Promise<void>>> = {
  accepted: [],
  signed: [sign],
  submitted: [sign, (journal, id) => journal.markSubmitted(id)],
  mined: [sign, (journal, id) => mine(journal, id, "markMined")],
  confirmed: [sign, (journal, id) => mine(journal, id, "markConfirmed")],
  failed: [sign, (journal, id) => journal.markFailed(id, { code: "reverted", message: "before" })],
  expired: [sign, (journal, id) => journal.markExpired(id, { code: "trade_expired", message: "before" })],
  pending_approval: [(journal, id) => hold(journal, id, next())],
  approved: [(journal, id) => hold(journal, id, next()), (journal, id) => decide(journal, id, "approve", next())],
  rejected: [(journal, id) => hold(journal, id, next()), (journal, id) => decide(journal, id, "reject", next())],
  // Signed, a cancel asked, and its no-op mined (the chain's word).
  cancelled: [sign, (journal, id) => requestCancel(journal, id), (journal, id) => cancelled(journal, id)],
};

async function requestCancel(journal: Journal, id: string): Promise<void> {
  await journal.requestCancel(id, { requestedBy: "sender", requestedAt: new Date().toISOString() });
}

async function cancelled(journal: Journal, id: string, mark = next()): Promise<void> {
  await journal.markCancelled(id, { code: "trade_cancelled", message: `mark ${mark}` });
}

/** Holds the trade under the rule `rule-<mark>`, for one approval, expiring `expiresInMs` from now. */
async function hold(journal: Journal, id: string, mark: number, expiresInMs = 3_600_000): Promise<void> {
  const rule = { name: `rule-${mark}`, aboveUsd: 0n, approvers: 1, expiresAfterMs: expiresInMs, expiresAfter: "1h" };
  const approval = newApproval([rule], Date.now());
  await journal.hold(id, approval, heldEntry({ id: "transitions" }, id, approval));
}

/** `approver-<mark>`'s decision on the trade. */
async function decide(journal: Journal, id: string, verdict: "approve" | "reject", mark: number): Promise<void> {
  await journal.decideApproval(id, verdict, { by: `approver-${mark}`, at: new Date().toISOString(), reason: null });
}

async function sign(journal: Journal, id: string): Promise<void> {
  await journal.markSigned(id, signedTx(next()));
}

async function mine(journal: Journal, id: string, operation: "markMined" | "markConfirmed"): Promise<void> {
  const trade = (await journal.get(id))!;
  await journal[operation](id, receipt(trade.txHash ?? hashOf(next()), next()));
}

/** Every case: each state, with a signed transaction when reaching it signs one, and without where a trade can be. */
const CASES: Array<{
  name: string;
  status: TradeStatus;
  steps: Array<(journal: Journal, id: string) => Promise<void>>;
}> = [
  ...TRADE_STATUSES.map((status) => ({ name: status, status, steps: REACH[status] })),
  // Failed or expired with nothing signed (refused before signing, or given back and then ended).
  ...(["failed", "expired"] as const).map((status) => ({
    name: `${status}, nothing signed`,
    status,
    steps: REACH[status].slice(1),
  })),
  // Cancelled before anything was signed, at once (its sender's cancel of a held trade).
  {
    name: "cancelled, nothing signed",
    status: "cancelled",
    steps: [
      (journal, id) => hold(journal, id, next()),
      (journal, id) =>
        journal
          .markCancelled(
            id,
            { code: "trade_cancelled", message: "before" },
            { requestedBy: "sender", requestedAt: new Date().toISOString() },
          )
          .then(() => {}),
    ],
  },
  // An approved trade refused before it was signed (the price moved past its minimum).
  {
    name: "failed once approved, nothing signed",
    status: "failed",
    steps: [...REACH.approved, (journal, id) => journal.markFailed(id, { code: "quote_slippage", message: "moved" })],
  },
];

/** Runs `operation` on trade `trade` as a caller would; what it wrote carries a value of `mark`. */
function run(journal: Journal, operation: TradeOperation, trade: TradeRecord, mark: number): Promise<unknown> {
  const error = { code: "marked", message: `mark ${mark}` };
  switch (operation) {
    case "markSigned":
      return journal.markSigned(trade.id, signedTx(mark));
    case "markSubmitted":
      return journal.markSubmitted(trade.id);
    case "markReorged":
      return journal.markReorged(trade.id);
    case "markMined":
    case "markConfirmed":
      return journal[operation](trade.id, receipt(trade.txHash ?? hashOf(mark), mark));
    case "markFailed":
    case "markExpired":
      return journal[operation](trade.id, error);
    case "discard":
      return journal.discard(trade.id);
    case "releaseSlot":
      // Its slot's only transaction, or, for a trade without one, a nonce without a slot.
      return journal.releaseSlot(WALLET, trade.nonce ?? mark, trade.txHash ?? hashOf(mark));
    case "forgetUnsigned":
      return journal.forgetUnsigned(10);
    case "markHeld":
      return hold(journal, trade.id, mark);
    case "markApproved":
      return decide(journal, trade.id, "approve", mark);
    case "markRejected":
      return decide(journal, trade.id, "reject", mark);
    case "expireApproval":
      return journal.expireApprovals(new Date(), new Date(0));
    case "markCancelled":
      return cancelled(journal, trade.id, mark);
  }
}

/** Whether what `operation` writes (with `mark`) is in the trade as read after it. */
function wrote(operation: TradeOperation, after: TradeRecord | undefined, mark: number): boolean {
  const to = TRADE_TRANSITIONS[operation].to;
  if (to === null) return after === undefined;
  if (after?.status !== to) return false;
  switch (operation) {
    case "markSigned":
      return after.nonce === mark;
    case "markReorged":
      return after.receipt === null;
    case "markMined":
    case "markConfirmed":
      return after.receipt?.blockNumber === mark;
    case "markFailed":
    case "markExpired":
    case "markCancelled":
      return after.error?.message === `mark ${mark}`;
    case "releaseSlot":
      return after.txHash === null && after.nonce === null;
    case "markHeld":
      return after.approval?.rules[0] === `rule-${mark}` && after.approval.approvals.length === 0;
    case "markApproved":
      return after.approval?.approvals.at(-1)?.by === `approver-${mark}` && after.approval.approvedAt !== null;
    case "markRejected":
      return after.approval?.rejection?.by === `approver-${mark}` && after.error?.code === "trade_rejected";
    default:
      return true;
  }
}

/** The trade's own fields, as a refused or ignored operation must leave them (its slot's broadcasts aside). */
function own(trade: TradeRecord | undefined) {
  if (trade === undefined) return undefined;
  const { status, wallet, nonce, txHash, deadline, receipt, error, updatedAt } = trade;
  return {
    status,
    wallet,
    nonce,
    txHash,
    deadline,
    receipt,
    error,
    updatedAt,
    approval: trade.approval ?? null,
    cancel: trade.cancel ?? null,
  };
}

export function describeTransitionContract(context: TransitionContractContext): void {
  describe("the trade model's transitions, on every state", function () {
    /** Opens a trade and takes it to `steps`' state; returns it as read then. */
    async function trade(steps: Array<(journal: Journal, id: string) => Promise<void>>): Promise<TradeRecord> {
      const journal = context.journal();
      const { record } = await journal.open(NEW_TRADE);
      for (const step of steps) await step(journal, record.id);
      return (await journal.get(record.id))!;
    }

    it("reaches every state the model has", async function () {
      for (const { name, status, steps } of CASES) expect((await trade(steps)).status, name).to.equal(status);
    });

    for (const operation of Object.keys(TRADE_TRANSITIONS) as TradeOperation[]) {
      // Sweeps of every trade: below.
      if (operation === "forgetUnsigned" || operation === "expireApproval") continue;
      it(`${operation}: applies, ignores or refuses as the trade model says, from every state`, async function () {
        const journal = context.journal();
        for (const { name, steps } of CASES) {
          const before = await trade(steps);
          const expected: TradeVerdict = tradeVerdict(operation, before);
          const mark = next();
          const outcome = await run(journal, operation, before, mark).then(
            () => "resolved",
            (error: unknown) => error,
          );
          const after = await journal.get(before.id);
          const what = `${operation} on a trade ${name}`;
          if (expected === "refused") expect(outcome, what).to.be.instanceOf(Error);
          else expect(outcome, what).to.equal("resolved");
          if (expected === "applies") expect(wrote(operation, after, mark), `${what}: written`).to.equal(true);
          else expect(own(after), `${what}: left as it was`).to.deep.equal(own(before));
        }
      });
    }

    it("forgetUnsigned: forgets exactly the trades the trade model says, from every state", async function () {
      const journal = context.journal();
      const trades = [];
      for (const { name, steps } of CASES) trades.push({ name, before: await trade(steps) });
      await new Promise((resolve) => setTimeout(resolve, 50)); // older than the 10 ms asked for
      await journal.forgetUnsigned(10);
      for (const { name, before } of trades) {
        const after = await journal.get(before.id);
        if (tradeVerdict("forgetUnsigned", before) === "applies") expect(after, `a trade ${name}`).to.equal(undefined);
        else expect(own(after), `a trade ${name}: kept as it was`).to.deep.equal(own(before));
      }
    });

    it("requestCancel: records the first cancel asked of a signed or submitted trade, and no other", async function () {
      const journal = context.journal();
      const first = { requestedBy: "desk-eu", requestedAt: "2026-01-01T00:00:00.000Z" };
      const second = { requestedBy: "admin", requestedAt: "2026-01-01T00:00:01.000Z" };
      for (const status of ["signed", "submitted"] as const) {
        const before = await trade(REACH[status]);
        expect((await journal.requestCancel(before.id, first))?.cancel, status).to.deep.equal(first);
        expect((await journal.requestCancel(before.id, second))?.cancel, `${status}, again`).to.deep.equal(first);
        const after = (await journal.get(before.id))!;
        expect([after.status, after.cancel], `${status}: kept`).to.deep.equal([status, first]);
      }
      // Nothing to cancel with a no-op: left as it was.
      for (const status of ["accepted", "mined", "confirmed", "failed", "expired", "pending_approval"] as const) {
        const before = await trade(REACH[status]);
        expect((await journal.requestCancel(before.id, first))?.cancel ?? null, status).to.equal(null);
        expect(own(await journal.get(before.id)), status).to.deep.equal(own(before));
      }
      expect(await journal.requestCancel("00000000-0000-4000-8000-000000000000", first)).to.equal(undefined);
    });

    it("markSigned: never signs again a trade a cancel was asked of, at its nonce or another", async function () {
      const journal = context.journal();
      for (const status of ["signed", "submitted"] as const) {
        const before = await trade([...REACH[status], (journal, id) => requestCancel(journal, id)]);
        for (const nonce of [before.nonce!, next()]) {
          const refused = await journal.markSigned(before.id, { ...signedTx(nonce), txHash: hashOf(next()) }).then(
            () => "signed",
            (e: unknown) => e,
          );
          expect(refused, `${status}, nonce ${nonce}`).to.be.instanceOf(Error);
          expect((refused as Error).message).to.match(/cancel asked of it/);
        }
        const after = await journal.get(before.id);
        expect(own(after), status).to.deep.equal(own(before));
        expect(
          after!.broadcasts.map((b) => b.hash),
          status,
        ).to.deep.equal(before.broadcasts.map((b) => b.hash));
      }
    });

    it("releaseSlot: a trade a cancel was asked of while its send was on its way is cancelled, not given back", async function () {
      // Its only transaction can never be mined, and it is never signed again: given back to
      // accepted, it would be forgotten by its run (a keyed retry would then pay it).
      const journal = context.journal();
      const before = await trade([...REACH.signed, (journal, id) => requestCancel(journal, id)]);
      const asked = (await journal.get(before.id))!.cancel;
      expect(await journal.releaseSlot(WALLET, before.nonce!, before.txHash!)).to.equal(true);
      const after = (await journal.get(before.id))!;
      expect(after).to.deep.include({ status: "cancelled", wallet: null, nonce: null, txHash: null, broadcasts: [] });
      expect(after.cancel).to.deep.equal(asked);
      expect(after.error?.code).to.equal("trade_cancelled");
      expect(after.error?.message).to.match(
        /cancelled by sender before its transaction was broadcast; nothing was paid/,
      );
      // Final: neither signed again, nor forgotten, nor failed over.
      expect(
        await journal.markSigned(before.id, signedTx(next())).then(
          () => "signed",
          (e: unknown) => e,
        ),
      ).to.be.instanceOf(Error);
      await journal.discard(before.id);
      await journal.forgetUnsigned(0);
      await journal.markFailed(before.id, { code: "transaction_refused", message: "refused" });
      expect(own(await journal.get(before.id))).to.deep.equal(own(after));
    });

    it("releaseSlot: an approved trade goes back to approved, never to accepted (where it would be forgotten)", async function () {
      const journal = context.journal();
      const before = await trade([...REACH.approved, sign]);
      expect(before.status).to.equal("signed");
      expect(await journal.releaseSlot(WALLET, before.nonce!, before.txHash!)).to.equal(true);
      const after = (await journal.get(before.id))!;
      expect(after).to.deep.include({ status: "approved", wallet: null, nonce: null, txHash: null, broadcasts: [] });
      expect(after.approval).to.deep.equal(before.approval);
      expect(await journal.forgetUnsigned(0)).to.equal(0);
      expect((await journal.get(before.id))?.status).to.equal("approved");
    });

    it("markCancelled with a cancel asked now: cancels only a trade with nothing signed, recording who asked", async function () {
      const journal = context.journal();
      const cancel = { requestedBy: "desk-eu", requestedAt: "2026-01-01T00:00:00.000Z" };
      const error = { code: "trade_cancelled", message: "asked now" };
      for (const steps of [REACH.accepted, REACH.pending_approval, REACH.approved]) {
        const before = await trade(steps);
        expect(await journal.markCancelled(before.id, error, cancel), before.status).to.equal(true);
        const after = (await journal.get(before.id))!;
        expect([after.status, after.cancel, after.error], before.status).to.deep.equal(["cancelled", cancel, error]);
        // Never signed after: its run, still on its way, is refused.
        const refused = await journal.markSigned(before.id, signedTx(next())).then(
          () => "signed",
          (e: unknown) => e,
        );
        expect(refused, before.status).to.be.instanceOf(Error);
      }
      // Signed meanwhile: left as it was (its no-op cancels it, on the chain's word).
      for (const status of ["signed", "submitted"] as const) {
        const before = await trade(REACH[status]);
        expect(await journal.markCancelled(before.id, error, cancel), status).to.equal(false);
        expect(own(await journal.get(before.id)), status).to.deep.equal(own(before));
      }
    });

    it("expireApproval: expires exactly the held trades past their expiry, and fails only approved ones left stale", async function () {
      const journal = context.journal();
      const trades = [];
      for (const { name, steps } of CASES) trades.push({ name, before: await trade(steps) });
      const due = await trade([(journal, id) => hold(journal, id, next(), -1)]);
      const swept = await journal.expireApprovals(new Date(), new Date(0));
      expect(swept.expired).to.include(due.id);
      expect(swept.failed).to.deep.equal([]);
      const expired = (await journal.get(due.id))!;
      expect(expired.status).to.equal(TRADE_TRANSITIONS.expireApproval.to);
      expect(expired.error?.code).to.equal("approval_expired");
      for (const { name, before } of trades)
        expect(own(await journal.get(before.id)), `a trade ${name}: kept as it was`).to.deep.equal(own(before));
      // An approved trade left unsigned since before `staleBefore`: its run was cut short.
      const approved = trades.find(({ name }) => name === "approved")!.before;
      const stale = await journal.expireApprovals(new Date(), new Date(Date.now() + 60_000));
      expect(stale.failed).to.include(approved.id);
      const failed = (await journal.get(approved.id))!;
      expect([failed.status, failed.error?.code]).to.deep.equal(["failed", "approval_interrupted"]);
    });
  });
}
