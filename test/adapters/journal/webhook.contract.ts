/**
 * The webhook outbox's part of the journal conformance suite (journal.contract.ts runs it on
 * memory, SQLite and PostgreSQL): an event with each change of a trade of a webhook scope, in the
 * change's own write, holding the trade as it then was; claims that give each trade's oldest
 * pending event to one holder at a time; attempts, pages, retries and the outbox's depth.
 */
import { expect } from "chai";

import type { Journal } from "../../../adapters/journal/index.js";
import { heldEntry, newApproval, tradeView } from "../../../core/index.js";
import { receiptFor, replaceTrade, runTrade, signedTrade, WEBHOOK_SCOPE } from "../../helpers/webhook-trades.js";

export interface WebhookContractContext {
  journal(): Journal;
  peer(): Promise<Journal>;
}

const OTHER_SCOPE = "fedcba9876543210fedcba9876543210";

/** The instance whose registration of the webhook scope each test starts with. */
const HOLDER = "instance-a";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Claim limits: up to `n` of the webhook scope's events. */
const mine = (n: number) => new Map([[WEBHOOK_SCOPE, n]]);

export function describeWebhookContract(context: WebhookContractContext): void {
  describe("the webhook outbox", function () {
    let journal: Journal;

    beforeEach(async function () {
      journal = context.journal();
      await journal.registerWebhookScopes(HOLDER, [WEBHOOK_SCOPE], 60_000);
    });

    async function events(scope = WEBHOOK_SCOPE) {
      return (await journal.listWebhookDeliveries({ scopes: [scope], limit: 500 })).deliveries.reverse();
    }

    it("writes an event with each change of a trade, holding the trade as it was right after it", async function () {
      const trade = await signedTrade(journal);
      expect(await events()).to.deep.equal([]); // accepted → signed is no event
      await journal.markSubmitted(trade.id);
      const submitted = await journal.get(trade.id);
      const hash = await replaceTrade(journal, trade, 2);
      const replaced = await journal.get(trade.id);
      await journal.markMined(trade.id, receiptFor(hash));
      await journal.markReorged(trade.id);
      const reorged = await journal.get(trade.id);
      await journal.markConfirmed(trade.id, receiptFor(hash, 43));
      const confirmed = await journal.get(trade.id);
      const written = await events();
      expect(written.map((e) => e.type)).to.deep.equal([
        "trade.submitted",
        "trade.replaced",
        "trade.mined",
        "trade.reorged",
        "trade.confirmed",
      ]);
      const view = (record: unknown) => JSON.parse(JSON.stringify(tradeView(record as never, null)));
      expect(view(written[0]!.trade)).to.deep.equal(view(submitted));
      expect(view(written[1]!.trade)).to.deep.equal(view(replaced));
      expect(written[1]!.trade!.broadcasts.map((b) => b.hash)).to.deep.equal([trade.txHash, hash]);
      expect(view(written[3]!.trade)).to.deep.equal(view(reorged));
      expect(view(written[4]!.trade)).to.deep.equal(view(confirmed));
      expect(written[4]!.trade!.receipt).to.deep.equal(receiptFor(hash, 43));
      for (const e of written) {
        expect(e).to.include({ scope: WEBHOOK_SCOPE, tradeId: trade.id, status: "pending", attempts: 0 });
        expect(e.id).to.match(/^msg_[0-9a-f]{32}$/);
        expect(e.history).to.deep.equal([]);
      }
      expect(written[4]!.createdAt.getTime()).to.equal(confirmed!.updatedAt.getTime());
    });

    it("writes an event only for a change: a trade confirmed twice is told once", async function () {
      const trade = await signedTrade(journal);
      await journal.markConfirmed(trade.id, receiptFor(trade.txHash));
      await journal.markConfirmed(trade.id, receiptFor(trade.txHash));
      await journal.markSubmitted(trade.id); // not signed any more: nothing changes
      expect((await events()).map((e) => e.type)).to.deep.equal(["trade.confirmed"]);
    });

    it("tells a failed and an expired trade, and keeps an expired one expired", async function () {
      const failed = await signedTrade(journal);
      await journal.markFailed(failed.id, { code: "reverted", message: "reverted" });
      const expired = await signedTrade(journal);
      await journal.markExpired(expired.id, { code: "trade_expired", message: "expired" });
      await journal.markFailed(expired.id, { code: "nonce_taken", message: "taken" });
      const written = await events();
      expect(written.map((e) => [e.tradeId, e.type])).to.deep.equal([
        [failed.id, "trade.failed"],
        [expired.id, "trade.expired"],
      ]);
      expect(written[1]!.trade!.error).to.deep.equal({ code: "trade_expired", message: "expired" });
    });

    it("tells a trade cancelled, and a cancel too late once the trade's own transaction is confirmed, with the cancel", async function () {
      const cancel = { requestedBy: "desk-eu", requestedAt: "2026-01-01T00:00:00.000Z" };
      const cancelled = await signedTrade(journal);
      await journal.requestCancel(cancelled.id, cancel);
      const noop = await replaceTrade(journal, cancelled, 2);
      await journal.markCancelled(cancelled.id, { code: "trade_cancelled", message: "its no-op was mined" });
      const late = await signedTrade(journal);
      await journal.requestCancel(late.id, cancel);
      await journal.markConfirmed(late.id, receiptFor(late.txHash));
      // Without a cancel asked, a confirmed trade is only confirmed.
      const plain = await signedTrade(journal);
      await journal.markConfirmed(plain.id, receiptFor(plain.txHash));
      const written = await events();
      expect(written.map((e) => [e.tradeId, e.type])).to.deep.equal([
        [cancelled.id, "trade.replaced"],
        [cancelled.id, "trade.cancelled"],
        [late.id, "trade.confirmed"],
        [late.id, "trade.cancel_failed"],
        [plain.id, "trade.confirmed"],
      ]);
      const view = (record: unknown) => JSON.parse(JSON.stringify(tradeView(record as never, null)));
      expect(view(written[1]!.trade).cancel).to.deep.equal({ ...cancel, outcome: "done", noopHash: null });
      expect(view(written[1]!.trade).status).to.equal("cancelled");
      expect(view(written[3]!.trade).cancel).to.deep.include({ ...cancel, outcome: "too_late" });
      expect(view(written[3]!.trade).status).to.equal("confirmed");
      expect(noop).to.be.a("string");
    });

    it("tells a trade held, approved (naming its approvers once it has them all) and another rejected, naming the approver", async function () {
      const held = async () => {
        const { record } = await journal.open({
          scope: WEBHOOK_SCOPE,
          keyName: "desk",
          idempotencyKey: null,
          requestHash: `held-${Math.random()}`,
          kind: "buy",
          request: {
            userAddress: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
            destinatary: "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
            amount: "30000",
            usdAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
          },
        });
        const rule = {
          name: "large payouts",
          aboveUsd: 0n,
          approvers: 2,
          expiresAfterMs: 3_600_000,
          expiresAfter: "1h",
        };
        const approval = newApproval([rule], Date.now());
        await journal.hold(record.id, approval, heldEntry({ id: WEBHOOK_SCOPE }, record.id, approval));
        return record.id;
      };
      const decide = (id: string, verdict: "approve" | "reject", by: string) =>
        journal.decideApproval(id, verdict, { by, at: new Date().toISOString(), reason: `${by} says so` });
      const approved = await held();
      await decide(approved, "approve", "risk-1"); // one of two: no event
      await decide(approved, "approve", "risk-2");
      const rejected = await held();
      await decide(rejected, "reject", "risk-3");
      const written = await events();
      expect(written.map((e) => [e.tradeId, e.type])).to.deep.equal([
        [approved, "trade.pending_approval"],
        [approved, "trade.approved"],
        [rejected, "trade.pending_approval"],
        [rejected, "trade.rejected"],
      ]);
      expect(written[0]!.trade!.approval?.rules).to.deep.equal(["large payouts"]);
      expect(written[1]!.trade!.approval?.approvals.map((a) => [a.by, a.reason])).to.deep.equal([
        ["risk-1", "risk-1 says so"],
        ["risk-2", "risk-2 says so"],
      ]);
      expect(written[3]!.trade!.approval?.rejection?.by).to.equal("risk-3");
      expect(written[3]!.trade!.error?.code).to.equal("trade_rejected");
      const view = (record: unknown) => JSON.parse(JSON.stringify(tradeView(record as never, null)));
      expect(view(written[3]!.trade)).to.deep.equal(view(await journal.get(rejected)));
    });

    it("writes nothing for a scope nobody registered, nor once its holder drops it", async function () {
      await runTrade(journal, OTHER_SCOPE);
      expect(await events(OTHER_SCOPE)).to.deep.equal([]);
      await journal.registerWebhookScopes(HOLDER, [], 60_000);
      await runTrade(journal);
      expect(await events()).to.deep.equal([]);
    });

    it("writes a scope's events while any holder's registration of it is live, whatever the others register", async function () {
      const peer = await context.peer();
      await peer.registerWebhookScopes("instance-b", [OTHER_SCOPE], 60_000);
      await peer.registerWebhookScopes("instance-c", [], 60_000); // an instance with no endpoints
      const ours = await runTrade(peer);
      const theirs = await runTrade(journal, OTHER_SCOPE);
      expect((await events()).map((e) => e.tradeId)).to.deep.equal([ours, ours, ours]);
      expect((await events(OTHER_SCOPE)).map((e) => e.tradeId)).to.deep.equal([theirs, theirs, theirs]);
      // B drops its scope (a new file without it): only B's registration goes.
      await peer.registerWebhookScopes("instance-b", [], 60_000);
      await runTrade(peer, OTHER_SCOPE);
      const again = await runTrade(peer);
      expect(await events(OTHER_SCOPE)).to.have.length(3);
      expect((await events()).map((e) => e.tradeId)).to.deep.equal([ours, ours, ours, again, again, again]);
    });

    it("stops writing a scope's events once every registration of it has lapsed", async function () {
      const peer = await context.peer();
      // B's registration lasts long enough for the first trade's writes on a loaded machine (50 ms lapsed before them once).
      await peer.registerWebhookScopes("instance-b", [OTHER_SCOPE], 1_500);
      await peer.registerWebhookScopes("instance-c", [OTHER_SCOPE], 60_000);
      await peer.registerWebhookScopes("instance-c", [], 60_000);
      const written = await runTrade(journal, OTHER_SCOPE);
      await sleep(1_600); // B stopped renewing
      await runTrade(journal, OTHER_SCOPE);
      expect((await events(OTHER_SCOPE)).map((e) => e.tradeId)).to.deep.equal([written, written, written]);
      // Renewed, it is live again.
      await peer.registerWebhookScopes("instance-b", [OTHER_SCOPE], 60_000);
      const renewed = await runTrade(journal, OTHER_SCOPE);
      expect(await events(OTHER_SCOPE)).to.have.length(6);
      expect((await events(OTHER_SCOPE)).at(-1)!.tradeId).to.equal(renewed);
    });

    it("fails the pending events nobody can deliver once their retry window closed, and no other", async function () {
      const peer = await context.peer();
      await peer.registerWebhookScopes("instance-b", [OTHER_SCOPE], 60_000);
      const ours = await runTrade(journal);
      const theirs = await runTrade(journal, OTHER_SCOPE);
      await peer.registerWebhookScopes("instance-b", [], 60_000); // no instance has their endpoint now
      // Their retry windows are still open: nothing is failed.
      expect(await journal.failOrphanedWebhookEvents(new Date(Date.now() - 60_000), 100)).to.equal(0);
      // Leased to a deliverer: not failed while its lease runs.
      const [leased] = await peer.claimWebhookEvents("instance-x", new Map([[OTHER_SCOPE, 1]]), 60_000);
      const closed = new Date(Date.now() + 1_000);
      expect(await journal.failOrphanedWebhookEvents(closed, 1)).to.equal(1); // a page of one
      expect(await peer.failOrphanedWebhookEvents(closed, 100)).to.equal(1);
      expect(await journal.failOrphanedWebhookEvents(closed, 100)).to.equal(0);
      const listed = await events(OTHER_SCOPE);
      expect(listed.map((e) => [e.tradeId, e.id === leased!.id ? "leased" : e.status])).to.deep.equal([
        [theirs, "leased"],
        [theirs, "failed"],
        [theirs, "failed"],
      ]);
      for (const failed of listed.slice(1)) {
        expect(failed.attempts).to.equal(1);
        expect(failed.history).to.have.length(1);
        expect(failed.history[0]).to.include({ statusCode: null });
        expect(failed.history[0]!.error).to.match(/no running instance has a webhook endpoint/);
      }
      // The scope some instance has is left to it, however old.
      expect((await events()).map((e) => [e.tradeId, e.status])).to.deep.equal([
        [ours, "pending"],
        [ours, "pending"],
        [ours, "pending"],
      ]);
    });

    it("writes nothing when the change is refused", async function () {
      await journal.markSubmitted("no-such-trade").catch(() => {});
      await journal.markConfirmed("no-such-trade", receiptFor(`0x${"1".repeat(64)}`)).catch(() => {});
      expect(await journal.webhookStats()).to.deep.equal({ pending: 0, oldestPendingAt: null });
    });

    it("gives each trade's oldest pending event only, to one holder at a time", async function () {
      const first = await runTrade(journal);
      const second = await runTrade(journal);
      const peer = await context.peer();
      const claimed = await journal.claimWebhookEvents("a", mine(10), 60_000);
      expect(claimed.map((e) => [e.tradeId, e.type])).to.deep.equal([
        [first, "trade.submitted"],
        [second, "trade.submitted"],
      ]);
      expect(claimed[0]!.trade!.id).to.equal(first);
      expect(await peer.claimWebhookEvents("b", mine(10), 60_000)).to.deep.equal([]);
      expect(
        await peer.recordWebhookAttempt(
          claimed[0]!.id,
          "b",
          { at: new Date(), statusCode: 204, error: null },
          {
            status: "delivered",
          },
        ),
      ).to.equal(false);
      expect(
        await journal.recordWebhookAttempt(
          claimed[0]!.id,
          "a",
          { at: new Date(), statusCode: 204, error: null },
          {
            status: "delivered",
          },
        ),
      ).to.equal(true);
      const next = await peer.claimWebhookEvents("b", mine(10), 60_000);
      expect(next.map((e) => [e.tradeId, e.type])).to.deep.equal([[first, "trade.replaced"]]);
    });

    it("claims only the scopes asked for, each up to its own limit, oldest first", async function () {
      await journal.registerWebhookScopes(HOLDER, [WEBHOOK_SCOPE, OTHER_SCOPE], 60_000);
      const ours = [await runTrade(journal), await runTrade(journal), await runTrade(journal)];
      const theirs = [await runTrade(journal, OTHER_SCOPE), await runTrade(journal, OTHER_SCOPE)];
      const claimed = await journal.claimWebhookEvents("a", mine(10), 60_000);
      expect(claimed.map((e) => [e.scope, e.tradeId])).to.deep.equal(ours.map((id) => [WEBHOOK_SCOPE, id]));
      const peer = await context.peer();
      const limits = new Map([
        [WEBHOOK_SCOPE, 5],
        [OTHER_SCOPE, 1],
      ]);
      const other = await peer.claimWebhookEvents("b", limits, 60_000);
      expect(other.map((e) => [e.scope, e.tradeId])).to.deep.equal([[OTHER_SCOPE, theirs[0]]]);
      expect(await peer.claimWebhookEvents("b", new Map(), 60_000)).to.deep.equal([]);
    });

    it("hands each event to one claimer at a time when several drain the outbox together", async function () {
      for (let i = 0; i < 8; i++) await runTrade(journal);
      const peer = await context.peer();
      const inFlight = new Set<string>();
      const delivered: string[] = [];
      const drain = async (instance: Journal, holder: string) => {
        for (let idle = 0; idle < 50; ) {
          const claimed = await instance.claimWebhookEvents(holder, mine(3), 60_000);
          if (claimed.length === 0) {
            if ((await instance.webhookStats()).pending === 0) return;
            idle += 1;
            await new Promise((resolve) => setTimeout(resolve, 5));
            continue;
          }
          await Promise.all(
            claimed.map(async (event) => {
              expect(inFlight.has(event.id), `${event.id} claimed twice at once`).to.equal(false);
              inFlight.add(event.id);
              await new Promise((resolve) => setTimeout(resolve, 2));
              inFlight.delete(event.id);
              const at = new Date();
              if (
                await instance.recordWebhookAttempt(
                  event.id,
                  holder,
                  { at, statusCode: 204, error: null },
                  { status: "delivered" },
                )
              )
                delivered.push(event.id);
            }),
          );
        }
      };
      await Promise.all([drain(journal, "a"), drain(peer, "b")]);
      expect(delivered).to.have.length(24);
      expect(new Set(delivered).size).to.equal(24);
    });

    it("takes an event back once its lease runs out, with the same id", async function () {
      await runTrade(journal);
      const [claimed] = await journal.claimWebhookEvents("a", mine(1), 50);
      await new Promise((resolve) => setTimeout(resolve, 80));
      const peer = await context.peer();
      const [again] = await peer.claimWebhookEvents("b", mine(1), 60_000);
      expect(again!.id).to.equal(claimed!.id);
      expect(
        await journal.recordWebhookAttempt(
          claimed!.id,
          "a",
          { at: new Date(), statusCode: 204, error: null },
          {
            status: "delivered",
          },
        ),
      ).to.equal(false);
    });

    it("does not give an event before its next attempt is due", async function () {
      await runTrade(journal);
      const [claimed] = await journal.claimWebhookEvents("a", mine(1), 60_000);
      const at = new Date();
      await journal.recordWebhookAttempt(
        claimed!.id,
        "a",
        { at, statusCode: 503, error: "answered HTTP 503" },
        { status: "pending", nextAttemptAt: new Date(Date.now() + 60_000) },
      );
      expect(await journal.claimWebhookEvents("a", mine(10), 60_000)).to.deep.equal([]);
      const [listed] = await events();
      expect(listed).to.include({ status: "pending", attempts: 1 });
      expect(listed!.history).to.deep.equal([{ at, statusCode: 503, error: "answered HTTP 503" }]);
      const stats = await journal.webhookStats();
      expect(stats.pending).to.equal(3);
      expect(stats.oldestPendingAt!.getTime()).to.equal(listed!.createdAt.getTime());
    });

    it("deletes delivered and failed events that finished before the cutoff, with their attempts, a page at a time", async function () {
      for (let i = 0; i < 3; i++) await runTrade(journal);
      const peer = await context.peer();
      const record = (holder: string, event: { id: string }, outcome: "delivered" | "failed") =>
        (holder === "a" ? journal : peer).recordWebhookAttempt(
          event.id,
          holder,
          { at: new Date(), statusCode: outcome === "delivered" ? 204 : 410, error: null },
          outcome === "delivered" ? { status: "delivered" } : { status: "failed" },
        );
      // Each trade's first event: delivered, delivered, failed; then a retried one that is pending again.
      const heads = await journal.claimWebhookEvents("a", mine(3), 60_000);
      await record("a", heads[0]!, "delivered");
      await record("a", heads[1]!, "delivered");
      await record("a", heads[2]!, "failed");
      const [next] = await peer.claimWebhookEvents("b", mine(1), 60_000);
      await record("b", next!, "failed");
      await journal.retryWebhookDelivery([WEBHOOK_SCOPE], next!.id, new Date());
      // A cutoff before they finished deletes nothing.
      expect(await journal.sweepWebhookEvents(new Date(Date.now() - 60_000), 100)).to.equal(0);
      const cutoff = new Date(Date.now() + 1_000);
      expect(await journal.sweepWebhookEvents(cutoff, 2)).to.equal(2);
      expect(await peer.sweepWebhookEvents(cutoff, 2)).to.equal(1);
      expect(await journal.sweepWebhookEvents(cutoff, 2)).to.equal(0);
      const left = await events();
      expect(left).to.have.length(6);
      expect(left.map((e) => e.id)).not.to.include.members(heads.map((e) => e.id));
      expect(left.every((e) => e.status === "pending")).to.equal(true);
      // The retried one keeps its attempt, and is deleted once it finishes again.
      expect(left.find((e) => e.id === next!.id)!.history).to.have.length(1);
      const [again] = await journal.claimWebhookEvents("a", mine(1), 60_000);
      expect(again!.id).to.equal(next!.id);
      await record("a", again!, "delivered");
      expect(await journal.sweepWebhookEvents(new Date(Date.now() + 1_000), 100)).to.equal(1);
      expect((await events()).map((e) => e.id)).not.to.include(next!.id);
      expect(await journal.webhookStats()).to.include({ pending: 5 });
    });

    it("pages the scope's deliveries newest first, by status, and retries a failed one only", async function () {
      for (let i = 0; i < 3; i++) await runTrade(journal);
      const [claimed] = await journal.claimWebhookEvents("a", mine(1), 60_000);
      await journal.recordWebhookAttempt(
        claimed!.id,
        "a",
        { at: new Date(), statusCode: null, error: "ECONNREFUSED: could not reach the endpoint" },
        { status: "failed" },
      );
      const page1 = await journal.listWebhookDeliveries({ scopes: [WEBHOOK_SCOPE], limit: 5 });
      expect(page1.deliveries).to.have.length(5);
      const page2 = await journal.listWebhookDeliveries({ scopes: [WEBHOOK_SCOPE], limit: 5, before: page1.next! });
      expect(page2.deliveries).to.have.length(4);
      expect(page2.next).to.equal(null);
      const seqs = [...page1.deliveries, ...page2.deliveries].map((d) => d.seq);
      expect(seqs).to.deep.equal([...seqs].sort((a, b) => b - a));
      const failed = await journal.listWebhookDeliveries({ scopes: [WEBHOOK_SCOPE], status: "failed", limit: 5 });
      expect(failed.deliveries.map((d) => d.id)).to.deep.equal([claimed!.id]);
      expect(await journal.listWebhookDeliveries({ scopes: [OTHER_SCOPE], limit: 5 })).to.deep.equal({
        deliveries: [],
        next: null,
      });
      expect(await journal.retryWebhookDelivery([OTHER_SCOPE], claimed!.id, new Date())).to.equal(undefined);
      const pendingId = page1.deliveries[0]!.id;
      expect(await journal.retryWebhookDelivery([WEBHOOK_SCOPE], pendingId, new Date())).to.equal("not_failed");
      const now = new Date();
      const retried = await journal.retryWebhookDelivery([WEBHOOK_SCOPE], claimed!.id, now);
      expect(retried).to.include({ status: "pending", attempts: 1 });
      expect((retried as { windowStart: Date }).windowStart.getTime()).to.equal(now.getTime());
      const [again] = await journal.claimWebhookEvents("a", mine(1), 60_000);
      expect(again!.id).to.equal(claimed!.id);
    });
  });
}
