/**
 * Cancelling and speeding up a trade (core/use-cases/trade-cancel.use-case.ts) over the memory
 * journal, with a replacer that records what it was asked (the chain's side is the wallets'
 * monitors, tested on anvil in test/adapters/transport/cancel.anvil.test.ts).
 */
import { expect } from "chai";

import {
  createUseCases,
  heldEntry,
  newApproval,
  PermissionDeniedError,
  type ReplaceTarget,
  type Replacement,
  type ReplacementAudit,
  type Spending,
  TradeCancelledError,
  TradeExpiredError,
  TradeNotFoundError,
  TradeNotReplaceableError,
  type TradeOnChain,
  type TradeReplacer,
  type TradeResolution,
  type TransactionReceipt,
} from "../../core/index.js";
import { MemoryJournal } from "../helpers/memory-journal.js";
import {
  accessKey,
  callerFor,
  CountingPricePort,
  limitOf,
  policyOf,
  rejection,
  StepTradePort,
} from "./access-fixtures.js";
import { CONFIG, CUSTOMER, DAI, WALLET } from "./fixtures.js";

const REQUEST = { userAddress: WALLET, destinatary: CUSTOMER, amount: "10", usdAddress: DAI.address };
const SENDER = { scope: "sender-scope" };
const OTHER = { scope: "other-scope" };
const NOOP = `0x${"ab".repeat(32)}`;

/** A replacer that records each call and writes the replacement it reports into the journal, as the monitor does. */
class RecordingReplacer implements TradeReplacer {
  readonly calls: Array<{ what: "cancel" | "speedUp"; target: ReplaceTarget; maxFeePerGas?: bigint }> = [];
  answer: Replacement | undefined;
  constructor(private readonly journal: MemoryJournal) {}

  async cancel(target: ReplaceTarget): Promise<Replacement> {
    this.calls.push({ what: "cancel", target });
    return this.answer ?? this.#replace(target, true, NOOP);
  }

  async speedUp(target: ReplaceTarget, maxFeePerGas?: bigint, audit?: ReplacementAudit): Promise<Replacement> {
    this.calls.push({ what: "speedUp", target, ...(maxFeePerGas !== undefined && { maxFeePerGas }) });
    return this.answer ?? this.#replace(target, false, `0x${"cd".repeat(32)}`, audit);
  }

  async #replace(target: ReplaceTarget, noop: boolean, hash: string, audit?: ReplacementAudit): Promise<Replacement> {
    const fees = { maxFeePerGas: 30n, maxPriorityFeePerGas: 3n };
    const last = (await this.journal.slot(target.wallet, target.nonce))!.broadcasts.at(-1)!.hash;
    const recorded = await this.journal.recordBroadcast(
      target.wallet,
      target.nonce,
      { hash, rawTx: "0x02", ...fees, noop, sentAt: new Date() },
      last,
      audit?.({ state: "replaced", hash, ...fees }),
    );
    if (!recorded) throw new Error("the ledger refused the replacement");
    return { state: "replaced", hash, ...fees };
  }
}

/** The trade port, whose chain says what `chain` is set to for every trade. */
class ChainSays extends StepTradePort {
  chain: TradeResolution = { state: "pending" };
  override async resolve(_trade: TradeOnChain): Promise<TradeResolution> {
    return this.chain;
  }
}

function setup(policy?: ReturnType<typeof policyOf>) {
  const journal = new MemoryJournal();
  const trade = new ChainSays();
  const replacer = new RecordingReplacer(journal);
  const useCases = createUseCases({
    trade,
    price: new CountingPricePort(),
    config: CONFIG,
    journal,
    replacer,
    audit: journal,
    approvals: journal,
    ...(policy && { policy: () => policy }),
  });
  return { journal, trade, replacer, useCases };
}

/** A trade of `scope`, signed at `nonce` (the journal's record, as the trade use case leaves it). */
async function signedTrade(journal: MemoryJournal, scope = SENDER.scope, keyName?: string, nonce = 7) {
  const { record } = await journal.open({
    scope,
    ...(keyName && { keyName }),
    idempotencyKey: null,
    requestHash: "h",
    kind: "buy",
    request: REQUEST,
  });
  const txHash = `0x${nonce.toString(16).padStart(2, "0").repeat(32)}`;
  await journal.markSigned(record.id, {
    wallet: WALLET,
    nonce,
    txHash,
    rawTx: "0x02f8",
    maxFeePerGas: 20n,
    maxPriorityFeePerGas: 2n,
    deadline: 2_000_000_000,
  });
  await journal.markSubmitted(record.id);
  return { id: record.id, txHash };
}

function receiptOf(hash: string): TransactionReceipt {
  return {
    blockHash: `0x${"0b".repeat(32)}`,
    blockNumber: 9,
    contractAddress: null,
    cumulativeGasUsed: 60_000,
    effectiveGasPrice: 10,
    from: WALLET.toLowerCase(),
    gasUsed: 60_000,
    logsBloom: "0x00",
    status: true,
    to: "0x5fbdb2315678afecb367f032d93f642f64180aa3",
    transactionHash: hash,
    transactionIndex: 0,
    type: "0x2",
    events: {},
  };
}

describe("cancelling and speeding up a trade", function () {
  it("cancels a held trade at once, nothing signed, and gives its room in the limits back", async function () {
    const { journal, replacer, useCases } = setup();
    const limit = limitOf("daily", "all", { maxUsd: 100n * 10n ** 18n });
    const spending: Spending = {
      spend: { key: "k", wallet: WALLET.toLowerCase(), destinatary: CUSTOMER.toLowerCase(), usd: 10n * 10n ** 18n },
      checks: [{ limit, value: "*" }],
    };
    const { record } = await journal.open(
      { scope: SENDER.scope, idempotencyKey: null, requestHash: "h", kind: "buy", request: REQUEST },
      spending,
    );
    const rule = { name: "big", aboveUsd: 0n, approvers: 1, expiresAfterMs: 3_600_000, expiresAfter: "1h" };
    const approval = newApproval([rule], Date.now());
    await journal.hold(record.id, approval, heldEntry({ id: SENDER.scope }, record.id, approval));
    expect((await journal.spendingUse(spending.checks))[0]!.trades).to.equal(1);

    const view = await useCases.cancelTrade(record.id, undefined, SENDER);
    expect(view.status).to.equal("cancelled");
    expect(view.cancel).to.deep.include({ requestedBy: SENDER.scope, outcome: "done", noopHash: null });
    expect(view.error?.code).to.equal("trade_cancelled");
    expect(replacer.calls).to.deep.equal([]);
    expect((await journal.spendingUse(spending.checks))[0]).to.deep.equal({ usd: 0n, trades: 0 });
    // Never signed after: an approval's run would be refused.
    expect(
      await rejection(
        journal.markSigned(record.id, {
          wallet: WALLET,
          nonce: 1,
          txHash: NOOP,
          rawTx: "0x",
          maxFeePerGas: 1n,
          maxPriorityFeePerGas: 1n,
          deadline: 1,
        }),
      ),
    ).to.be.instanceOf(Error);
    const audit = (await journal.auditPage({ limit: 10 })).records.map((r) => [r.action, r.subject]);
    expect(audit).to.deep.include(["trade.cancel_requested", record.id]);
  });

  it("cancels a trade whose run is on its way before it is signed: the run is refused, nothing broadcast", async function () {
    const { journal, trade, useCases } = setup();
    let proven!: () => void;
    const proving = new Promise<void>((resolve) => (proven = resolve));
    const prove = trade.prove.bind(trade);
    trade.prove = async (order) => {
      await proving;
      return prove(order);
    };
    const run = useCases.buy(REQUEST, { ...SENDER, idempotencyKey: "k-1" });
    run.catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 10));
    const [accepted] = (await journal.page({ visible: { names: [], ids: [SENDER.scope] }, limit: 5 })).trades;
    expect(accepted!.status).to.equal("accepted");
    const view = await useCases.cancelTrade(accepted!.id, {}, SENDER);
    expect(view.status).to.equal("cancelled");
    proven();
    expect(await rejection(run)).to.be.instanceOf(TradeCancelledError);
    expect(trade.calls).to.include("abandon");
    expect(trade.calls).to.not.include("send");
    expect((await journal.get(accepted!.id))!.status).to.equal("cancelled");
    // A keyed retry answers the cancel (409), never a second run.
    expect(await rejection(useCases.buy(REQUEST, { ...SENDER, idempotencyKey: "k-1" }))).to.deep.include({
      code: "trade_cancelled",
    });
  });

  it("ends cancelled a trade cancelled while its send was on its way, when the send is refused: never forgotten, never paid by a retry", async function () {
    const { journal, trade, replacer, useCases } = setup();
    await journal.registerWebhookScopes("me", [SENDER.scope], 60_000);
    // The monitor defers a cancel while the trade's own send is on its way; the queue then finds
    // the send refused and known nowhere, and releases its slot (send-queue.ts).
    replacer.answer = { state: "deferred", reason: "its own send is on its way" };
    const refused = new Error("the node refused it");
    let cancelled: Awaited<ReturnType<typeof useCases.cancelTrade>> | undefined;
    trade.send = async (signed) => {
      trade.calls.push("send");
      const [record] = (await journal.page({ visible: { names: [], ids: [SENDER.scope] }, limit: 5 })).trades;
      cancelled = await useCases.cancelTrade(record!.id, undefined, SENDER);
      await journal.releaseSlot(signed.tx.wallet, signed.tx.nonce, signed.tx.txHash);
      throw refused;
    };
    const run = useCases.buy(REQUEST, { ...SENDER, idempotencyKey: "k-in-flight" });
    expect(await rejection(run)).to.be.instanceOf(TradeCancelledError);
    expect(cancelled!.cancel).to.deep.include({ requestedBy: SENDER.scope, outcome: "pending" });
    const [record] = (await journal.page({ visible: { names: [], ids: [SENDER.scope] }, limit: 5 })).trades;
    expect(record).to.deep.include({ status: "cancelled", txHash: null });
    expect(record!.error?.code).to.equal("trade_cancelled");
    // A keyed retry answers the cancel (409), never a second run.
    trade.send = StepTradePort.prototype.send.bind(trade);
    expect(await rejection(useCases.buy(REQUEST, { ...SENDER, idempotencyKey: "k-in-flight" }))).to.deep.include({
      code: "trade_cancelled",
    });
    expect(trade.calls.filter((call) => call === "send")).to.have.length(1);
    const view = await useCases.trade(record!.id, SENDER, "id");
    expect(view.cancel).to.deep.include({ outcome: "done", noopHash: null });
    const events = (await journal.listWebhookDeliveries({ scopes: [SENDER.scope], limit: 10 })).deliveries;
    expect(events.map((e) => e.type)).to.include("trade.cancelled");
  });

  it("records a signed trade's cancel first, then has its transaction replaced by a no-op, once", async function () {
    const { journal, replacer, useCases } = setup();
    const { id, txHash } = await signedTrade(journal);
    const view = await useCases.cancelTrade(id, undefined, SENDER);
    expect(view.status).to.equal("submitted");
    expect(view.cancel).to.deep.include({ requestedBy: SENDER.scope, outcome: "pending", noopHash: NOOP });
    expect(view.transactionHash).to.equal(NOOP);
    expect(replacer.calls).to.deep.equal([{ what: "cancel", target: { tradeId: id, wallet: WALLET, nonce: 7 } }]);
    // A second cancel answers the same, signing nothing.
    const again = await useCases.cancelTrade(id, undefined, SENDER);
    expect(again.cancel).to.deep.equal(view.cancel);
    expect(replacer.calls).to.have.length(1);
    const [entry] = (await journal.auditPage({ limit: 10, action: "trade.cancel_requested" })).records;
    expect(entry).to.deep.include({ actor: SENDER.scope, action: "trade.cancel_requested", subject: id });
    // Recorded with the cancel's own write, before anything is signed: its no-op is the trade's noopHash.
    expect(entry!.details).to.deep.include({ nonce: 7, previousHash: txHash, hash: null, outcome: "pending" });
  });

  it("ends cancelled once the chain says the no-op took the nonce, with a trade.cancelled event", async function () {
    const { journal, trade, useCases } = setup();
    await journal.registerWebhookScopes("me", [SENDER.scope], 60_000);
    const { id } = await signedTrade(journal);
    await useCases.cancelTrade(id, undefined, SENDER);
    trade.chain = { state: "expired" }; // a no-op mined, confirmed
    const view = await useCases.trade(id, SENDER);
    expect(view.status).to.equal("cancelled");
    expect(view.cancel?.outcome).to.equal("done");
    expect(view.receipt).to.equal(null);
    const events = (await journal.listWebhookDeliveries({ scopes: [SENDER.scope], limit: 10 })).deliveries;
    expect(events.map((e) => e.type)).to.include("trade.cancelled");
  });

  it("reports a cancel too late when the trade's own transaction was mined first: confirmed, in the retry's answer, GET and an event", async function () {
    const { journal, trade, replacer, useCases } = setup();
    await journal.registerWebhookScopes("me", [SENDER.scope], 60_000);
    const { id, txHash } = await signedTrade(journal);
    await useCases.cancelTrade(id, undefined, SENDER);
    const receipt = receiptOf(txHash);
    trade.chain = { state: "mined", receipt, confirmations: 2, confirmed: true };
    const retry = await useCases.cancelTrade(id, undefined, SENDER);
    expect([retry.status, retry.cancel?.outcome]).to.deep.equal(["confirmed", "too_late"]);
    expect(retry.receipt?.transactionHash).to.equal(txHash);
    const read = await useCases.trade(id, SENDER);
    expect([read.status, read.cancel?.outcome]).to.deep.equal(["confirmed", "too_late"]);
    expect(replacer.calls).to.have.length(1);
    const events = (await journal.listWebhookDeliveries({ scopes: [SENDER.scope], limit: 10 })).deliveries;
    const failed = events.find((e) => e.type === "trade.cancel_failed");
    expect(failed, "trade.cancel_failed").to.not.equal(undefined);
  });

  it("refuses a final or mined trade (409 naming its state), an unknown one and another key's (404), signing nothing", async function () {
    const { journal, replacer, useCases } = setup();
    const confirmed = await signedTrade(journal);
    await journal.markConfirmed(confirmed.id, receiptOf(confirmed.txHash));
    for (const run of [useCases.cancelTrade, useCases.speedUpTrade]) {
      const error = await rejection(run(confirmed.id, undefined, SENDER));
      expect(error).to.be.instanceOf(TradeNotReplaceableError);
      expect((error as Error).message).to.match(/is confirmed/);
    }
    const mined = await signedTrade(journal, SENDER.scope, undefined, 8);
    await journal.markMined(mined.id, receiptOf(mined.txHash));
    expect(((await rejection(useCases.cancelTrade(mined.id, undefined, SENDER))) as Error).message).to.match(
      /is mined \(its transaction is mined\)/,
    );
    const unknown = "00000000-0000-4000-8000-000000000000";
    expect(await rejection(useCases.cancelTrade(unknown, undefined, SENDER))).to.be.instanceOf(TradeNotFoundError);
    // Without an access file a key sees only its own trades: another's is not found, as GET answers.
    const other = await signedTrade(journal, SENDER.scope, undefined, 9);
    expect(await rejection(useCases.cancelTrade(other.id, undefined, OTHER))).to.be.instanceOf(TradeNotFoundError);
    expect(await rejection(useCases.speedUpTrade(other.id, undefined, OTHER))).to.be.instanceOf(TradeNotFoundError);
    expect(replacer.calls).to.deep.equal([]);
  });

  it("refuses a key that sees the trade but did not send it (403) unless it is an admin", async function () {
    const trader = accessKey("desk-eu", ["trader"]);
    const viewer = accessKey("auditor", ["viewer"], { sees: ["*"] });
    const admin = accessKey("ops", ["admin"]);
    const { journal, replacer, useCases } = setup(policyOf([trader, viewer, admin]));
    const { id } = await signedTrade(journal, callerFor(trader).scope, "desk-eu");
    const refused = await rejection(useCases.cancelTrade(id, undefined, callerFor(viewer)));
    expect(refused).to.be.instanceOf(PermissionDeniedError);
    expect((refused as Error).message).to.match(/api key "auditor" may not cancel or speed up/);
    expect(replacer.calls).to.deep.equal([]);
    const view = await useCases.cancelTrade(id, undefined, callerFor(admin));
    expect(view.cancel?.requestedBy).to.equal("ops");
    expect(replacer.calls).to.have.length(1);
  });

  it("records a refused cancel or speed-up under an access file (who, which trade, why), never a malformed one", async function () {
    const trader = accessKey("desk-eu", ["trader"]);
    const viewer = accessKey("auditor", ["viewer"], { sees: ["*"] });
    const { journal, useCases } = setup(policyOf([trader, viewer]));
    const { id } = await signedTrade(journal, callerFor(trader).scope, "desk-eu");
    await rejection(useCases.cancelTrade(id, undefined, callerFor(viewer)));
    await rejection(useCases.speedUpTrade(id, undefined, callerFor(viewer)));
    await rejection(useCases.cancelTrade("not-an-id", undefined, callerFor(viewer)));
    const refused = (await journal.auditPage({ limit: 10, action: "replacement.refused" })).records;
    expect(refused.map((r) => [r.actor, r.subject, r.details.what, r.details.code])).to.deep.equal([
      ["auditor", id, "cancel", "permission_denied"],
      ["auditor", id, "speed-up", "permission_denied"],
    ]);
  });

  it("ends a trade cancelled, not expired, when its own call sees the cancel's no-op mined: the caller is told", async function () {
    const { journal, trade, useCases } = setup();
    let mined!: () => void;
    const noopMined = new Promise<void>((resolve) => (mined = resolve));
    trade.settle = async () => {
      await noopMined;
      throw new TradeExpiredError(1, 0);
    };
    const run = useCases.buy(REQUEST, SENDER);
    run.catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 10));
    const [signed] = (await journal.page({ visible: { names: [], ids: [SENDER.scope] }, limit: 5 })).trades;
    expect(signed!.status).to.be.oneOf(["signed", "submitted"]);
    await useCases.cancelTrade(signed!.id, undefined, SENDER);
    mined();
    const error = await rejection(run);
    expect(error).to.be.instanceOf(TradeCancelledError);
    expect((error as Error).message).to.match(/cancelled by sender-scope/);
    const after = (await journal.get(signed!.id))!;
    expect([after.status, after.error?.code]).to.deep.equal(["cancelled", "trade_cancelled"]);
  });

  it("speeds a trade up at the fee asked, refusing a malformed one and a trade being cancelled", async function () {
    const { journal, replacer, useCases } = setup();
    const { id } = await signedTrade(journal);
    for (const [body, field] of [
      [{ maxFeePerGasGwei: "1.0000000001" }, "maxFeePerGasGwei"],
      [{ maxFeePerGasGwei: 2 }, "maxFeePerGasGwei"],
      [{ maxFeePerGasGwei: "0" }, "maxFeePerGasGwei"],
      [{ gas: "1" }, "gas"],
      ["fast", "request"],
    ] as const) {
      const error = await rejection(useCases.speedUpTrade(id, body, SENDER));
      expect(error, JSON.stringify(body)).to.deep.include({ code: "invalid_argument", field });
    }
    expect(replacer.calls).to.deep.equal([]);
    const view = await useCases.speedUpTrade(id, { maxFeePerGasGwei: "2.5" }, SENDER);
    expect(replacer.calls).to.deep.equal([
      { what: "speedUp", target: { tradeId: id, wallet: WALLET, nonce: 7 }, maxFeePerGas: 2_500_000_000n },
    ]);
    expect(view.transactionHash).to.equal(`0x${"cd".repeat(32)}`);
    await useCases.speedUpTrade(id, null, SENDER);
    expect(replacer.calls[1]).to.deep.equal({ what: "speedUp", target: { tradeId: id, wallet: WALLET, nonce: 7 } });
    const audit = (await journal.auditPage({ limit: 10, action: "trade.sped_up" })).records;
    expect(audit).to.have.length(2);
    await useCases.cancelTrade(id, undefined, SENDER);
    const refused = await rejection(useCases.speedUpTrade(id, undefined, SENDER));
    expect((refused as Error).message).to.match(/a cancel was asked of it/);
    expect(replacer.calls).to.have.length(3);
  });

  it("answers the trade as it is when nothing could be replaced now", async function () {
    const { journal, replacer, useCases } = setup();
    const { id, txHash } = await signedTrade(journal);
    replacer.answer = { state: "unchanged", reason: "the fee cap leaves no room" };
    const view = await useCases.speedUpTrade(id, undefined, SENDER);
    expect([view.status, view.transactionHash]).to.deep.equal(["submitted", txHash]);
    replacer.answer = { state: "deferred", reason: "its transaction is still being sent" };
    const cancel = await useCases.cancelTrade(id, undefined, SENDER);
    expect(cancel.cancel).to.deep.include({ outcome: "pending", noopHash: null });
    // Recorded: the monitor sends the no-op once it may, after a restart too.
    expect((await journal.get(id))!.cancel?.requestedBy).to.equal(SENDER.scope);
  });
});
