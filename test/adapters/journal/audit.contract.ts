/**
 * The audit log's part of the journal conformance suite (journal.contract.ts runs it on memory,
 * SQLite and PostgreSQL): records chained onto each other (seq without gaps, each prevHash the
 * previous hash, each hash its contents'), written in the same transaction as the change each
 * records and only when the change is made, a record that cannot be written taking its change
 * with it, pages filtered and continued by cursor, and one chain across two instances appending
 * at once.
 */
import { expect } from "chai";

import { auditHash, GENESIS_HASH, type Journal, verifyAudit } from "../../../adapters/journal/index.js";
import type { AuditEntry, AuditRecord, LimitCheck, NewTrade, Spend } from "../../../core/index.js";
import { heldEntry, newApproval, SpendingLimitError } from "../../../core/index.js";
import { runTrade, signedTrade, WEBHOOK_SCOPE } from "../../helpers/webhook-trades.js";

export interface AuditContractContext {
  journal(): Journal;
  /** A second instance on the same storage when the backend allows it, else the same one. */
  peer(): Promise<Journal>;
}

const WALLET = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
const CUSTOMER = "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65";

let serial = 0;
function newTrade(overrides: Partial<NewTrade> = {}): NewTrade {
  serial += 1;
  return {
    scope: "key-id-1",
    keyName: "desk",
    idempotencyKey: null,
    requestHash: `audit-${serial}`,
    kind: "buy",
    request: { userAddress: WALLET, destinatary: CUSTOMER, amount: "1", usdAddress: WALLET },
    ...overrides,
  };
}

const accepted = { actor: "desk", action: "trade.accepted", details: { kind: "buy", amount: "1" } } as const;
const entry = (n: number, actor = "desk"): AuditEntry => ({
  actor,
  action: "access.reloaded",
  subject: `v${n}`,
  details: { n, names: ["a", "é\u2028"], nested: { z: null, a: true } },
});

/** Every record, oldest first, through the port's pages of `size`. */
async function all(journal: Journal, size = 7): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  let after: number | undefined;
  for (;;) {
    const page = await journal.auditPage({ limit: size, after });
    records.push(...page.records);
    if (page.next === null) return records;
    after = page.next;
  }
}

async function* each(records: AuditRecord[]) {
  yield* records;
}

export function describeAuditContract({ journal: current, peer }: AuditContractContext): void {
  describe("the audit log", function () {
    it("chains each record onto the one before: seq from 1 without gaps, prevHash the previous hash, hash its contents'", async function () {
      const journal = current();
      expect(await journal.auditHead()).to.deep.equal({ seq: 0, hash: GENESIS_HASH });
      const appended: AuditRecord[] = [];
      for (let n = 1; n <= 5; n++) appended.push(await journal.appendAudit(entry(n)));
      const records = await all(journal, 2);
      expect(records).to.deep.equal(appended);
      expect(records.map((r) => r.seq)).to.deep.equal([1, 2, 3, 4, 5]);
      expect(records[0]!.prevHash).to.equal(GENESIS_HASH);
      for (const [i, record] of records.entries()) {
        expect(record.hash)
          .to.match(/^[0-9a-f]{64}$/)
          .and.equal(auditHash(record));
        if (i > 0) expect(record.prevHash).to.equal(records[i - 1]!.hash);
        expect(record.at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      }
      expect(records[2]).to.deep.include({ actor: "desk", action: "access.reloaded", subject: "v3" });
      expect(records[2]!.details).to.deep.equal(entry(3).details);
      expect(await journal.auditHead()).to.deep.equal({ seq: 5, hash: records[4]!.hash });
      expect(await verifyAudit(each(records))).to.deep.include({ ok: true, records: 5 });
    });

    it("records a trade accepted in its first write, and nothing for a record found again or a refusal by a limit", async function () {
      const journal = current();
      const keyed = newTrade({ idempotencyKey: "k-1" });
      const first = await journal.open(keyed, undefined, accepted);
      const again = await journal.open(keyed, undefined, accepted);
      expect(again.created).to.equal(false);
      const spend: Spend = { key: "desk", wallet: WALLET, destinatary: CUSTOMER, usd: 10n };
      const checks: LimitCheck[] = [
        { limit: { name: "tiny", per: "key", windowMs: 60_000, window: "1m", maxUsd: 5n }, value: "desk" },
      ];
      const refused = await journal.open(newTrade(), { spend, checks }, accepted).catch((error: unknown) => error);
      expect(refused).to.be.instanceOf(SpendingLimitError);
      const records = await all(journal);
      expect(records).to.have.length(1);
      expect(records[0]).to.deep.include({ action: "trade.accepted", actor: "desk", subject: first.record.id });
      expect(records[0]!.details).to.deep.equal(accepted.details);
    });

    it("records a discard with the write that deletes the trade, and nothing when it deletes nothing", async function () {
      const journal = current();
      const { record } = await journal.open(newTrade(), undefined, accepted);
      const refusal: AuditEntry = {
        actor: "desk",
        action: "trade.refused",
        subject: record.id,
        details: { code: "insufficient_funds", message: "the wallet cannot cover it" },
      };
      await journal.discard(record.id, refusal);
      expect(await journal.get(record.id)).to.equal(undefined);
      await journal.discard(record.id, refusal); // gone already: nothing to record
      const signed = await signedTrade(journal, "key-id-1");
      const kept = await journal.discard(signed.id, { ...refusal, subject: signed.id }).catch((e: unknown) => e);
      expect(kept).to.be.instanceOf(Error); // a signed trade is never deleted
      const records = await all(journal);
      expect(records.map((r) => [r.action, r.subject])).to.deep.equal([
        ["trade.accepted", record.id],
        ["trade.refused", record.id],
      ]);
    });

    it("records a hold, each approval, a rejection and an expiry with the write that makes it, and nothing for a decision refused or repeated", async function () {
      const journal = current();
      const hold = async (approvers: number, expiresAfterMs: number) => {
        const { record } = await journal.open(newTrade());
        const rule = { name: "large", aboveUsd: 0n, approvers, expiresAfterMs, expiresAfter: "1h" };
        const approval = newApproval([rule], Date.now());
        await journal.hold(record.id, approval, heldEntry({ id: "key-id-1" }, record.id, approval));
        return record.id;
      };
      const decide = (id: string, verdict: "approve" | "reject", by: string) =>
        journal
          .decideApproval(id, verdict, { by, at: new Date().toISOString(), reason: `${by}'s reason` })
          .catch(() => "refused");
      const start = (await journal.auditHead()).seq;
      const two = await hold(2, 3_600_000);
      await decide(two, "approve", "risk-1");
      await decide(two, "approve", "risk-1"); // repeated: nothing new
      await decide(two, "approve", "risk-2");
      expect(await decide(two, "reject", "risk-3")).to.equal("refused"); // decided: nothing
      const rejected = await hold(1, 3_600_000);
      await decide(rejected, "reject", "risk-2");
      const expiring = await hold(1, -1);
      await journal.expireApprovals(new Date(), new Date(0));
      const records = (await all(journal)).filter((r) => r.seq > start && r.action !== "trade.accepted");
      expect(records.map((r) => [r.action, r.actor, r.subject])).to.deep.equal([
        ["trade.held", "key-id-1", two],
        ["trade.approved", "risk-1", two],
        ["trade.approved", "risk-2", two],
        ["trade.held", "key-id-1", rejected],
        ["trade.rejected", "risk-2", rejected],
        ["trade.held", "key-id-1", expiring],
        ["trade.approval_expired", "service", expiring],
      ]);
      expect(records[1]!.details).to.deep.equal({ approvals: 1, required: 2, final: false, reason: "risk-1's reason" });
      expect(records[2]!.details).to.deep.include({ approvals: 2, final: true });
      expect(records[4]!.details).to.deep.equal({ approvals: 0, required: 1, reason: "risk-2's reason" });
      expect(await verifyAudit(each(await all(journal)))).to.deep.include({ ok: true });
    });

    it("records each trade it forgets (trade.forgotten, by the service)", async function () {
      const journal = current();
      const { record } = await journal.open(newTrade());
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await journal.forgetUnsigned(1)).to.equal(1);
      const records = await all(journal);
      expect(records.map((r) => [r.actor, r.action, r.subject])).to.deep.equal([
        ["service", "trade.forgotten", record.id],
      ]);
    });

    it("records a delivery retried by hand only when it is retried", async function () {
      const journal = current();
      await journal.registerWebhookScopes("instance-a", [WEBHOOK_SCOPE], 60_000);
      await runTrade(journal);
      const [claimed] = await journal.claimWebhookEvents("a", new Map([[WEBHOOK_SCOPE, 1]]), 60_000);
      const retried: AuditEntry = { actor: "ops", action: "delivery.retried", subject: claimed!.id, details: {} };
      expect(await journal.retryWebhookDelivery([WEBHOOK_SCOPE], claimed!.id, new Date(), retried)).to.equal(
        "not_failed",
      );
      await journal.recordWebhookAttempt(
        claimed!.id,
        "a",
        { at: new Date(), statusCode: 503, error: "answered HTTP 503" },
        { status: "failed" },
      );
      expect(await journal.retryWebhookDelivery([WEBHOOK_SCOPE], claimed!.id, new Date(), retried)).to.include({
        status: "pending",
      });
      expect((await all(journal)).map((r) => [r.action, r.subject])).to.deep.equal([["delivery.retried", claimed!.id]]);
    });

    it("records a cancel and a replacement with the write that makes it, and nothing for one that changes nothing; a record that cannot be written takes its change with it", async function () {
      const journal = current();
      const cancel = { requestedBy: "desk", requestedAt: new Date().toISOString() };
      const cancelled = (action: AuditEntry["action"], subject: string, n = 1): AuditEntry => ({
        actor: "desk",
        action,
        subject,
        details: { n },
      });
      // A trade with nothing signed, cancelled at once.
      const { record } = await journal.open(newTrade());
      const err = { code: "trade_cancelled", message: "cancelled by desk before anything was signed" };
      expect(
        await journal.markCancelled(record.id, err, cancel, cancelled("trade.cancel_requested", record.id)),
      ).to.equal(true);
      await journal.markCancelled(record.id, err, cancel, cancelled("trade.cancel_requested", record.id, 2));
      // A signed trade: the cancel asked, recorded once.
      const signed = await signedTrade(journal, "key-id-1");
      const bad = { ...cancelled("trade.cancel_requested", signed.id), details: { n: 0.1 } };
      expect(String(await journal.requestCancel(signed.id, cancel, bad).catch((e) => e))).to.match(
        /not a safe integer/,
      );
      expect((await journal.get(signed.id))!.cancel ?? null, "the cancel of the refused write").to.equal(null);
      await journal.requestCancel(signed.id, cancel, cancelled("trade.cancel_requested", signed.id));
      await journal.requestCancel(signed.id, cancel, cancelled("trade.cancel_requested", signed.id, 2));
      // A replacement, recorded with its broadcast; a stale one records neither.
      const replacement = {
        hash: `0x${"ee".repeat(32)}`,
        rawTx: "0x02ee",
        maxFeePerGas: 3_000_000_000n,
        maxPriorityFeePerGas: 2_000_000_000n,
        noop: false,
        sentAt: new Date(),
      };
      const sped = cancelled("trade.sped_up", signed.id);
      const refused = await journal
        .recordBroadcast(signed.wallet, signed.nonce, replacement, signed.txHash, { ...sped, details: { n: 2 ** 60 } })
        .catch((e) => e);
      expect(String(refused)).to.match(/not a safe integer/);
      expect((await journal.slot(signed.wallet, signed.nonce))!.broadcasts, "the refused write's").to.have.length(1);
      expect(await journal.recordBroadcast(signed.wallet, signed.nonce, replacement, signed.txHash, sped)).to.equal(
        true,
      );
      expect(
        await journal.recordBroadcast(
          signed.wallet,
          signed.nonce,
          { ...replacement, hash: `0x${"ef".repeat(32)}` },
          signed.txHash,
          sped,
        ),
      ).to.equal(false);
      const records = (await all(journal)).filter((r) => r.action !== "trade.accepted");
      expect(records.map((r) => [r.action, r.subject, r.details])).to.deep.equal([
        ["trade.cancel_requested", record.id, { n: 1 }],
        ["trade.cancel_requested", signed.id, { n: 1 }],
        ["trade.sped_up", signed.id, { n: 1 }],
      ]);
    });

    it("takes the change back with a record that cannot be written (a number JSON would not keep exactly)", async function () {
      const journal = current();
      const bad = { ...accepted, details: { amount: 0.1 } };
      const failed = await journal.open(newTrade({ idempotencyKey: "k-bad" }), undefined, bad).catch((e) => e);
      expect(String(failed)).to.match(/not a safe integer/);
      const retry = await journal.open(newTrade({ idempotencyKey: "k-bad" }), undefined, accepted);
      expect(retry.created, "the trade of the refused write was not kept").to.equal(true);
      const { record } = await journal.open(newTrade());
      const refusal: AuditEntry = { actor: "d", action: "trade.refused", subject: record.id, details: { n: 2 ** 60 } };
      expect(String(await journal.discard(record.id, refusal).catch((e) => e))).to.match(/not a safe integer/);
      expect(await journal.get(record.id), "the trade of the refused discard is still there").to.not.equal(undefined);
      expect((await all(journal)).map((r) => r.subject)).to.deep.equal([retry.record.id]);
    });

    it("pages by action, actor and time, from a cursor", async function () {
      const journal = current();
      for (let n = 1; n <= 6; n++) await journal.appendAudit(entry(n, n % 2 === 0 ? "even" : "odd"));
      const { record } = await journal.open(newTrade(), undefined, accepted);
      const evens = await journal.auditPage({ actor: "even", limit: 2 });
      expect(evens.records.map((r) => r.subject)).to.deep.equal(["v2", "v4"]);
      const rest = await journal.auditPage({ actor: "even", limit: 2, after: evens.next! });
      expect(rest).to.deep.equal({
        records: [(await journal.auditPage({ after: 5, limit: 1 })).records[0]],
        next: null,
      });
      expect(
        (await journal.auditPage({ action: "trade.accepted", limit: 10 })).records.map((r) => r.subject),
      ).to.deep.equal([record.id]);
      const every = await all(journal);
      const third = new Date(every[2]!.at);
      const since = (await journal.auditPage({ since: third, limit: 10 })).records;
      expect(since.every((r) => r.at >= every[2]!.at)).to.equal(true);
      expect(since.map((r) => r.seq)).to.include(3);
      const until = (await journal.auditPage({ until: third, limit: 10 })).records;
      expect(until.every((r) => r.at < every[2]!.at)).to.equal(true);
      expect((await journal.auditPage({ since: new Date(Date.now() + 60_000), limit: 10 })).records).to.deep.equal([]);
    });

    it("keeps one chain, seq without gaps, when two instances append and open trades at once", async function () {
      this.timeout(60_000);
      const journal = current();
      const other = await peer();
      const writes: Array<Promise<unknown>> = [];
      for (let i = 0; i < 40; i++) {
        const instance = i % 2 === 0 ? journal : other;
        writes.push(instance.appendAudit(entry(i, `instance-${i % 2}`)));
        writes.push(instance.open(newTrade(), undefined, { ...accepted, actor: `instance-${i % 2}` }));
      }
      await Promise.all(writes);
      const records = await all(journal, 25);
      expect(records.map((r) => r.seq)).to.deep.equal(Array.from({ length: 80 }, (_, i) => i + 1));
      expect(await verifyAudit(each(records))).to.deep.include({ ok: true, records: 80 });
      expect(await other.auditHead()).to.deep.equal({ seq: 80, hash: records[79]!.hash });
      expect(new Set(records.map((r) => r.actor))).to.deep.equal(new Set(["instance-0", "instance-1"]));
    });
  });
}
