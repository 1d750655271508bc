/**
 * Issue 38, item 4's "done when" on PostgreSQL: two instances (`npm start`'s entry point in
 * production mode, its defaults) on one journal and one anvil chain, the mixed run's requests
 * sent to each in turn: one chain for both (seq without gaps, each instance's start, load, reload
 * and stop in it), then `npm run audit -- verify` on JOURNAL_URL as a child process: it passes,
 * and fails naming the record after each tampering in the database (one record's details
 * changed, a middle record deleted, the tail cut after the last checkpoint, caught with --head).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import pg from "pg";

import type { AuditRecord } from "../../core/index.js";
import { hardhatAccount } from "../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../helpers/anvil.js";
import { startInstance, writeWebhooksFile, type Instance } from "../helpers/anvil-service.js";
import {
  auditRecords,
  described,
  KEYS,
  lastCheckpoint,
  mixedRun,
  RUN_RECORDS,
  tamperings,
  verifyCommand,
  writeAccessFile,
} from "../helpers/audit-run.js";
import { startPostgres, type TestPostgres } from "../helpers/postgres.js";
import { freePort } from "../helpers/service-defaults.js";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhook-receiver.js";

const WALLET = hardhatAccount(1);
const POOR = hardhatAccount(5);

describe("the audit log of two instances on one PostgreSQL journal, verified by npm run audit (anvil)", function () {
  this.timeout(300_000);
  let anvil: Anvil;
  let postgres: TestPostgres;
  let receiver: WebhookReceiver;
  let dir: string;
  const instances: Instance[] = [];
  let records: AuditRecord[];

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "audit-postgres-"));
    [anvil, postgres, receiver] = await Promise.all([startAnvil(), startPostgres(), startWebhookReceiver()]);
    receiver.mode = "down";
    const addresses = await deployOnAnvil(anvil, 0);
    await anvil.rpc("evm_setAutomine", [true]);
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    const accessFile = join(dir, "access.json");
    const deniedFile = join(dir, "denied.txt");
    writeAccessFile(accessFile, deniedFile);
    // npm start's defaults otherwise: metrics, access logs, a checkpoint an hour (and at start and stop).
    const env = {
      RPC_URL: anvil.url,
      DEPLOYMENT_FILE: join(dir, "deployment.json"),
      EXCHANGE_PRIVATE_KEYS: `${WALLET.privateKey},${POOR.privateKey}`,
      ACCESS_FILE: accessFile,
      JOURNAL_URL: postgres.url,
      PORT: "0",
      WEBHOOK_RETRY_WINDOW_MS: "1000",
      ...writeWebhooksFile(dir, KEYS.desk, receiver),
    };
    for (let i = 0; i < 2; i++) instances.push(await startInstance({ ...env, METRICS_PORT: String(await freePort()) }));
    await mixedRun({
      apiUrls: instances.map((instance) => instance.apiUrl),
      poorWallet: POOR.address,
      wallet: WALLET.address,
      dai: addresses.stableCoins.DAI,
      accessFile,
      deniedFile,
    });
    records = await auditRecords(instances[1]!.apiUrl, "", 50);
  });

  after(async function () {
    for (const instance of instances) if (instance.child.exitCode === null) instance.child.kill("SIGKILL");
    await receiver?.close();
    await anvil?.stop();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("keeps one chain for both instances, every decision in it in order", function () {
    expect(records.map((r) => r.seq)).to.deep.equal(records.map((_, i) => i + 1));
    const trades = records.filter((r) => r.action.startsWith("trade.") && r.actor !== "later");
    expect(trades.map(described)).to.deep.equal(RUN_RECORDS.map((r) => [...r]));
    const count = (action: string) => records.filter((r) => r.action === action).length;
    expect([count("access.loaded"), count("service.started"), count("access.reloaded")]).to.deep.equal([2, 2, 2]);
    expect(records.filter((r) => r.actor === "later")).to.have.length(2);
    expect(new Set(records.filter((r) => r.action === "service.started").map((r) => r.subject)).size).to.equal(2);
    expect(count("delivery.retried")).to.equal(1);
  });

  it("passes npm run audit -- verify on JOURNAL_URL, and fails naming the record after each tampering", async function () {
    for (const instance of instances) {
      instance.child.kill("SIGTERM");
      await new Promise((resolve) => instance.child.once("exit", resolve));
    }
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      const { rows } = await client.query<{
        seq: string;
        at: string;
        actor: string;
        action: string;
        subject: string | null;
        details: string;
        prev_hash: string;
        hash: string;
      }>(
        "SELECT seq::text AS seq, at, actor, action, subject, details, prev_hash, hash FROM audit_log ORDER BY audit_log.seq",
      );
      const chained: AuditRecord[] = rows.map((row) => ({
        seq: Number(row.seq),
        at: row.at,
        actor: row.actor,
        action: row.action as AuditRecord["action"],
        subject: row.subject,
        details: JSON.parse(row.details),
        prevHash: row.prev_hash,
        hash: row.hash,
      }));
      expect(chained.slice(-2).map((r) => r.action)).to.deep.equal(["service.stopped", "service.stopped"]);
      const secrets = [KEYS.desk, KEYS.ops, WALLET.privateKey, POOR.privateKey, receiver.secret, postgres.url];
      for (const record of chained.filter((r) => r.action.startsWith("service.")))
        for (const secret of secrets) expect(JSON.stringify(record)).to.not.include(secret);
      // The last to stop logged the head last.
      const checkpoint = lastCheckpoint(instances[1]!.output());
      expect(checkpoint).to.equal(`${chained.length}:${chained.at(-1)!.hash}`);
      const sql = async (text: string) => void (await client.query(text));
      await tamperings(sql, (extra = []) => verifyCommand(["--journal", postgres.url, ...extra]), chained, checkpoint);
      // JOURNAL_URL is where it looks without --journal, as the service does.
      const byEnv = await verifyCommand([], { JOURNAL_URL: postgres.url });
      expect(byEnv.code, byEnv.stderr).to.equal(0);
    } finally {
      await client.end();
    }
  });
});
