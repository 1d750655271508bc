import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { DatabaseSync } from "node:sqlite";

import { openJournal, openSqliteJournal } from "../../../adapters/journal/index.js";
import { MIGRATIONS } from "../../../adapters/journal/sqlite/migrations.js";
import { newApproval } from "../../../core/index.js";
import { attemptedEvents } from "../../helpers/webhook-trades.js";
import { describeJournalContract } from "./journal.contract.js";

describeJournalContract("SQLite", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "journal-sqlite-"));
  return {
    // The path openJournal uses; a short busy timeout, so a refused second open fails fast.
    open: () => openSqliteJournal(join(dataDir, "journal.sqlite"), { busyTimeoutMs: 200 }),
    shared: false,
    durable: true,
    config: { dataDir },
    dispose: () => rm(dataDir, { recursive: true, force: true }),
  };
});

describe("the SQLite trade journal file", function () {
  let dataDir: string;

  beforeEach(async function () {
    dataDir = await mkdtemp(join(tmpdir(), "journal-sqlite-"));
  });

  afterEach(async function () {
    await rm(dataDir, { recursive: true, force: true });
  });

  it("is created with its directory when missing", async function () {
    const journal = await openJournal({ dataDir: join(dataDir, "nested", "dir") });
    expect(
      (
        await journal.open({
          scope: "s",
          idempotencyKey: null,
          requestHash: "h",
          kind: "sell",
          request: { userAddress: "a", destinatary: "b", amount: "1", usdAddress: "c" },
        })
      ).created,
    ).to.equal(true);
    await journal.close();
    await journal.close(); // closing twice is harmless
  });

  it("keeps a write made just before close()", async function () {
    const path = join(dataDir, "journal.sqlite");
    const journal = await openSqliteJournal(path);
    const { record } = await journal.open({
      scope: "s",
      idempotencyKey: null,
      requestHash: "h",
      kind: "sell",
      request: { userAddress: "a", destinatary: "b", amount: "1", usdAddress: "c" },
    });
    const marked = journal.markFailed(record.id, { code: "reverted", message: "reverted" });
    await journal.close();
    await marked;
    const reopened = await openSqliteJournal(path);
    expect((await reopened.get(record.id))!.status).to.equal("failed");
    await reopened.close();
    expect(
      await journal.markFailed(record.id, { code: "x", message: "y" }).then(
        () => "written",
        (error: unknown) => String(error),
      ),
    ).to.match(/journal is closed/);
  });

  it("migrates a version 1 journal: trades kept, a signed one watched as an open nonce", async function () {
    const path = join(dataDir, "journal.sqlite");
    const old = new DatabaseSync(path);
    old.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    old.exec(MIGRATIONS[0]!);
    old.prepare("INSERT INTO schema_version VALUES (1, 0)").run();
    const insert = old.prepare(
      "INSERT INTO trades (id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx, receipt, created_at, updated_at) VALUES (?, 's', ?, 'h', 'sell', '{}', ?, ?, ?, ?, ?, ?, 1, 2)",
    );
    insert.run(
      "signed-1",
      "k1",
      "signed",
      "0xAbCdEf0000000000000000000000000000000001",
      7,
      `0x${"aa".repeat(32)}`,
      "0x02f8aa",
      null,
    );
    insert.run(
      "confirmed-1",
      "k2",
      "confirmed",
      "0xAbCdEf0000000000000000000000000000000001",
      6,
      `0x${"bb".repeat(32)}`,
      "0x02f8bb",
      '{"status":true}',
    );
    old.close();

    const journal = await openSqliteJournal(path);
    try {
      expect(await journal.get("confirmed-1")).to.deep.include({
        status: "confirmed",
        receipt: { status: true },
        deadline: null,
        broadcasts: [],
      });
      const [slot] = await journal.openSlots("0xabcdef0000000000000000000000000000000001");
      expect(slot).to.deep.include({
        nonce: 7,
        purpose: "trade",
        tradeId: "signed-1",
        state: "pending",
        deadline: null,
      });
      expect(slot!.broadcasts.map((b) => [b.hash, b.rawTx, b.maxFeePerGas])).to.deep.equal([
        [`0x${"aa".repeat(32)}`, "0x02f8aa", 0n],
      ]);
      expect((await journal.findByHash(`0x${"aa".repeat(32)}`))?.id).to.equal("signed-1");
      await journal.markExpired("signed-1", { code: "trade_expired", message: "a state version 1 did not have" });
    } finally {
      await journal.close();
    }
  });

  it("migrates a journal with the webhook outbox (version 7): events kept, scopes registered per process from then on, finished events swept", async function () {
    const path = join(dataDir, "journal.sqlite");
    const old = new DatabaseSync(path);
    old.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    for (const [i, migration] of MIGRATIONS.slice(0, 7).entries()) {
      old.exec(migration);
      old.prepare("INSERT INTO schema_version VALUES (?, 0)").run(i + 1);
    }
    // The one shared set of scopes, and an event its trigger wrote.
    old.exec(`INSERT INTO webhook_scopes VALUES ('s');
      INSERT INTO trades (id, scope, request_hash, kind, request, status, created_at, updated_at) VALUES
        ('t1', 's', 'h', 'sell', '{}', 'signed', 1, 2), ('t2', 's', 'h', 'sell', '{}', 'signed', 1, 2);
      UPDATE trades SET status = 'submitted', updated_at = 3 WHERE id = 't1';
      UPDATE webhook_events SET status = 'delivered', attempts = 1;
      INSERT INTO webhook_attempts (event_id, at, status_code) SELECT id, 1000, 204 FROM webhook_events`);
    old.close();

    const journal = await openSqliteJournal(path);
    try {
      const listed = async () =>
        (await journal.listWebhookDeliveries({ scopes: ["s"], limit: 10 })).deliveries.map((d) => [d.tradeId, d.type]);
      expect(await listed()).to.deep.equal([["t1", "trade.submitted"]]);
      // Nobody registered 's' yet: no event.
      await journal.markSubmitted("t2");
      expect(await listed()).to.have.length(1);
      await journal.registerWebhookScopes("process-a", ["s"], 60_000);
      await journal.markFailed("t2", { code: "reverted", message: "reverted" });
      expect(await listed()).to.deep.equal([
        ["t2", "trade.failed"],
        ["t1", "trade.submitted"],
      ]);
      // Delivered before retention came: finished at its last attempt, and swept after it.
      expect(await journal.sweepWebhookEvents(new Date(1000), 10)).to.equal(0);
      expect(await journal.sweepWebhookEvents(new Date(1001), 10)).to.equal(1);
      expect(await listed()).to.deep.equal([["t2", "trade.failed"]]);
    } finally {
      await journal.close();
    }
    const after = new DatabaseSync(path);
    try {
      expect(after.prepare("SELECT name FROM sqlite_master WHERE name = 'webhook_scopes'").all()).to.deep.equal([]);
    } finally {
      after.close();
    }
  });

  it("migrates a journal with the audit log (version 12): trades' events kept in order, events without a trade from then on", async function () {
    const path = join(dataDir, "journal.sqlite");
    const old = new DatabaseSync(path);
    old.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    for (const [i, migration] of MIGRATIONS.slice(0, 12).entries()) {
      old.exec(migration);
      old.prepare("INSERT INTO schema_version VALUES (?, 0)").run(i + 1);
    }
    // Two events the trigger wrote (their trade's snapshot as it writes it).
    const snapshot = JSON.stringify({
      id: "t1",
      scope: "s",
      requestHash: "h",
      kind: "sell",
      request: {},
      status: "submitted",
      wallet: null,
      nonce: null,
      deadline: null,
      txHash: null,
      broadcasts: [],
      receipt: null,
      error: null,
      createdAt: 1,
      updatedAt: 3,
    });
    const insert = old.prepare(
      `INSERT INTO webhook_events (id, scope, trade_id, type, trade, created_at, next_attempt_at, window_start)
       VALUES (?, 's', ?, 'trade.submitted', ?, 3, 3, 3)`,
    );
    insert.run(`msg_${"1".repeat(32)}`, "t1", snapshot);
    insert.run(`msg_${"2".repeat(32)}`, "t2", snapshot.replace('"t1"', '"t2"'));
    old.close();

    const journal = await openSqliteJournal(path);
    try {
      await journal.registerWebhookScopes("process-a", ["s"], 60_000, ["s"]);
      await journal.setWatchAlarm("wallet:native", true, {
        type: "wallet.balance_low",
        subject: "0xab",
        data: { asset: "native" },
        at: new Date(),
      });
      const { deliveries } = await journal.listWebhookDeliveries({ scopes: ["s"], limit: 10 });
      expect(deliveries.map((d) => [d.seq, d.tradeId, d.type])).to.deep.equal([
        [3, null, "wallet.balance_low"],
        [2, "t2", "trade.submitted"],
        [1, "t1", "trade.submitted"],
      ]);
    } finally {
      await journal.close();
    }
  });

  it("migrates a journal with the approvals (version 14): held trades' events kept, and still written with their approval", async function () {
    const path = join(dataDir, "journal.sqlite");
    const old = new DatabaseSync(path);
    old.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    for (const [i, migration] of MIGRATIONS.slice(0, 14).entries()) {
      old.exec(migration);
      old.prepare("INSERT INTO schema_version VALUES (?, 0)").run(i + 1);
    }
    const rule = { name: "large payouts", aboveUsd: 0n, approvers: 1, expiresAfterMs: 3_600_000, expiresAfter: "1h" };
    const approval = JSON.stringify(newApproval([rule], Date.now()));
    // A trade held before the upgrade: the approvals' trigger wrote its event (the spends' recount
    // trigger calls spend_add, which a journal's connection defines: the same sum here).
    old.function("spend_add", (a, b) => (BigInt(String(a)) + BigInt(String(b))).toString());
    old
      .prepare("INSERT INTO webhook_registrations (scope, holder, expires_at) VALUES ('s', 'old', ?)")
      .run(Date.now() + 60_000);
    old.exec(`INSERT INTO trades (id, scope, request_hash, kind, request, status, created_at, updated_at) VALUES
        ('t1', 's', 'h', 'sell', '{}', 'accepted', 1, 2)`);
    old
      .prepare("UPDATE trades SET status = 'pending_approval', approval = ?, updated_at = 3 WHERE id = 't1'")
      .run(approval);
    old.close();

    const journal = await openSqliteJournal(path);
    try {
      await journal.decideApproval("t1", "reject", { by: "risk-1", at: new Date().toISOString(), reason: "no" });
      const { deliveries } = await journal.listWebhookDeliveries({ scopes: ["s"], limit: 10 });
      expect(deliveries.map((d) => [d.tradeId, d.type])).to.deep.equal([
        ["t1", "trade.rejected"],
        ["t1", "trade.pending_approval"],
      ]);
      // One trade's events are claimed one at a time, in order: each with the trade's approval.
      const claimed: [string, unknown][] = [];
      for (let round = 0; round < 2; round++)
        for (const event of await journal.claimWebhookEvents("process-a", new Map([["s", 10]]), 60_000)) {
          claimed.push([event.type, event.trade?.approval?.rejection?.by ?? event.trade?.approval?.rules]);
          await journal.recordWebhookAttempt(
            event.id,
            "process-a",
            { at: new Date(), statusCode: 204, error: null },
            {
              status: "delivered",
            },
          );
        }
      expect(claimed).to.deep.equal([
        ["trade.pending_approval", ["large payouts"]],
        ["trade.rejected", "risk-1"],
      ]);
      const rejected = (await journal.get("t1"))!;
      expect(rejected.status).to.equal("rejected");
      expect(rejected.approval?.rejection?.by).to.equal("risk-1");
    } finally {
      await journal.close();
    }
  });

  it("deletes a swept webhook event's attempts with it, and no other's", async function () {
    const path = join(dataDir, "journal.sqlite");
    const journal = await openSqliteJournal(path);
    let delivered: string;
    try {
      delivered = await attemptedEvents(journal);
      expect(await journal.sweepWebhookEvents(new Date(Date.now() + 1_000), 10)).to.equal(1);
    } finally {
      await journal.close();
    }
    const db = new DatabaseSync(path);
    try {
      const left = db
        .prepare("SELECT e.trade_id FROM webhook_attempts a JOIN webhook_events e ON e.id = a.event_id")
        .all();
      expect(left).to.have.length(1);
      expect(left[0]!.trade_id).not.to.equal(delivered);
      expect(db.prepare("SELECT count(*) AS n FROM webhook_attempts").get()).to.deep.include({ n: 1 });
    } finally {
      db.close();
    }
  });

  it("sums a large history in batches, leaving the thread to other requests between them", async function () {
    // node:sqlite is synchronous: one pass over a million trades froze the service for seconds.
    const path = join(dataDir, "journal.sqlite");
    await (await openSqliteJournal(path)).close();
    const db = new DatabaseSync(path);
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 19999)
      INSERT INTO trades (id, scope, request_hash, kind, request, status, created_at, updated_at, amount_in, amount_out, gas_wei)
      SELECT printf('%08d', i), 'key', 'h', 'sell', '{"usdAddress":"0xAb"}', 'confirmed', 1000 + i, 1000 + i,
             '1000000000000000000', '2', '3' FROM n`);
    db.close();
    const journal = await openSqliteJournal(path);
    try {
      let turns = 0;
      let summing = true;
      const turn = () => {
        if (!summing) return;
        turns++;
        setImmediate(turn);
      };
      setImmediate(turn);
      const [totals] = await journal.summary({ visible: { names: [], ids: ["key"] } });
      summing = false;
      expect(totals).to.deep.include({
        count: 20_000,
        executed: 20_000,
        amountIn: 20_000n * 10n ** 18n,
        amountOut: 40_000n,
      });
      expect(turns, "event-loop turns while summing").to.be.at.least(3);
    } finally {
      await journal.close();
    }
  });

  it("cannot be opened twice at once, and can be once closed", async function () {
    const path = join(dataDir, "journal.sqlite");
    const first = await openSqliteJournal(path);
    let refused: unknown;
    try {
      await openSqliteJournal(path, { busyTimeoutMs: 100 }).then((second) => second.close());
    } catch (error) {
      refused = error;
    }
    expect(String(refused)).to.match(/journal .*journal\.sqlite is in use by another process/);
    await first.close();
    await (await openSqliteJournal(path)).close();
  });
});

describe("openJournal", function () {
  it("refuses a URL that is neither PostgreSQL nor empty, without echoing it", async function () {
    const error = await openJournal({ url: "mysql://user:secret@db/journal", dataDir: tmpdir() }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(String(error)).to.match(/scheme "mysql" is not supported/);
    expect(String(error)).to.not.include("secret");
  });
});
