/**
 * Issue 38, item 4's "done when" on SQLite: one instance as an operator runs it (RPC_URL to an
 * EDR chain, DEPLOYMENT_FILE, ACCESS_FILE, WEBHOOKS_FILE, metrics and access logs on, its own
 * logger writing JSON lines), a mixed run through it, then `npm run audit -- verify` on its
 * journal file as a child process: it passes, and fails naming the record after each tampering
 * (one record's details changed, a middle record deleted, the tail cut after the last checkpoint,
 * caught with --head). The route is read by the admin only, filtered, paged and as CSV; the start
 * and stop records carry no secret.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { expect } from "chai";
import { pino } from "pino";

import { startService, type RunningService } from "../../adapters/main.js";
import { createLogger } from "../../adapters/shared/logger.js";
import { OPENAPI_DOCUMENT } from "../../adapters/transport/docs/index.js";
import type { AuditRecord } from "../../core/index.js";
import { EXCHANGE_ACCOUNT, hardhatAccount, startEmbeddedChain } from "../../scripts/embedded-chain/chain.js";
import { getJson } from "../adapters/transport/helpers.js";
import {
  auditCommand,
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
import { writeWebhooksFile } from "../helpers/anvil-service.js";
import { freePort } from "../helpers/service-defaults.js";
import { startWebhookReceiver, type WebhookReceiver } from "../helpers/webhook-receiver.js";

const WALLET = hardhatAccount(EXCHANGE_ACCOUNT);
/** A second exchange wallet of the service's, with nothing to pay with: its trades are refused once accepted. */
const POOR = hardhatAccount(5);

describe("the audit log of one instance on SQLite, verified by npm run audit", function () {
  this.timeout(240_000);
  let chain: Awaited<ReturnType<typeof startEmbeddedChain>>;
  let receiver: WebhookReceiver;
  let service: RunningService | undefined;
  let dir: string;
  let records: AuditRecord[];
  let output = "";

  before(async function () {
    chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
    receiver = await startWebhookReceiver();
    receiver.mode = "down";
    dir = mkdtempSync(join(tmpdir(), "audit-sqlite-"));
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(chain.addresses));
    const accessFile = join(dir, "access.json");
    const deniedFile = join(dir, "denied.txt");
    writeAccessFile(accessFile, deniedFile);
    const env = {
      RPC_URL: chain.rpcUrl,
      DEPLOYMENT_FILE: join(dir, "deployment.json"),
      EXCHANGE_PRIVATE_KEYS: `${WALLET.privateKey},${POOR.privateKey}`,
      ACCESS_FILE: accessFile,
      DATA_DIR: join(dir, "data"),
      PORT: "0",
      METRICS_PORT: String(await freePort()),
      WEBHOOK_RETRY_WINDOW_MS: "1000",
      ...writeWebhooksFile(dir, KEYS.desk, receiver),
    };
    // The service's own logger (an access line per request, the checkpoints), into a string.
    const log = createLogger({
      level: "info",
      destination: {
        write: (line: string) => {
          output += line;
        },
      },
    });
    service = await startService({ env, log, rootDir: dir });
    await mixedRun({
      apiUrls: [service.apiUrl],
      poorWallet: POOR.address,
      wallet: WALLET.address,
      dai: chain.addresses.stableCoins.DAI,
      accessFile,
      deniedFile,
    });
    records = await auditRecords(service.apiUrl);
  });

  after(async function () {
    await service?.close();
    await receiver?.close();
    await chain?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("records every decision of the run, in order, and nothing for the malformed and unknown-key requests", function () {
    const trades = records.filter((r) => r.action.startsWith("trade.") && r.actor !== "later");
    expect(trades.map(described)).to.deep.equal(RUN_RECORDS.map((r) => [...r]));
    expect(records.map((r) => r.action).slice(0, 2)).to.deep.equal(["access.loaded", "service.started"]);
    const reloaded = records.find((r) => r.action === "access.reloaded")!;
    expect(reloaded.details).to.deep.include({ keysAdded: ["later"], keysRemoved: [], reason: "changed" });
    expect(records.filter((r) => r.actor === "later").map((r) => r.action)).to.deep.equal(["trade.accepted"]);
    expect(records.at(-1)).to.deep.include({ actor: "ops", action: "delivery.retried" });
    expect(records.map((r) => r.seq)).to.deep.equal(records.map((_, i) => i + 1));
  });

  it("answers the admin alone, filtered by action, actor and time, a page at a time, and as CSV", async function () {
    const url = service!.apiUrl;
    for (const key of [KEYS.desk, KEYS.viewer]) {
      const refused = await getJson(`${url}/api/v1/audit`, { apiKey: key });
      expect(refused.status).to.equal(403);
      expect(refused.body).to.deep.include({ code: "permission_denied" });
      expect(String(refused.body.message)).to.match(/may not read the audit log: its roles are .* \(it needs admin\)/);
    }
    expect((await getJson(`${url}/api/v1/audit`, { apiKey: "an-unknown-key-0123456789abcdef" })).status).to.equal(401);
    const refusals = await auditRecords(url, "&action=trade.refused", 2);
    expect(refusals.map((r) => r.seq)).to.deep.equal(
      records.filter((r) => r.action === "trade.refused").map((r) => r.seq),
    );
    expect((await auditRecords(url, "&actor=viewer")).map(described)).to.deep.equal([
      ["viewer", "trade.refused", "permission_denied role"],
    ]);
    const since = encodeURIComponent(records[3]!.at);
    expect((await auditRecords(url, `&since=${since}`)).every((r) => r.at >= records[3]!.at)).to.equal(true);
    expect(await auditRecords(url, "&until=2000-01-01T00:00:00Z")).to.deep.equal([]);
    const bad = await getJson(`${url}/api/v1/audit?action=trade.paid`, { apiKey: KEYS.ops });
    expect(bad.status).to.equal(400);
    expect(String(bad.body.message)).to.match(/^action: must be one of/);
    const csv = await fetch(`${url}/api/v1/audit?limit=3`, { headers: { api_key: KEYS.ops, accept: "text/csv" } });
    expect(csv.headers.get("content-type")).to.match(/^text\/csv/);
    expect(csv.headers.get("link")).to.equal('</api/v1/audit?limit=3&cursor=a3>; rel="next"');
    const lines = (await csv.text()).split("\r\n");
    expect(lines[0]).to.equal("seq,at,actor,action,subject,details,prevHash,hash");
    expect(lines[1]).to.match(new RegExp(`^1,${records[0]!.at},service,access.loaded,`));
    expect(lines[1]!.endsWith(`,${records[0]!.prevHash},${records[0]!.hash}`)).to.equal(true);
    expect(lines).to.have.length(5); // the header, three records, the final CRLF
    // The JSON page as the OpenAPI document describes it.
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    (addFormats as unknown as (a: Ajv2020) => void)(ajv);
    ajv.addSchema({ $id: "api", components: JSON.parse(JSON.stringify(OPENAPI_DOCUMENT.components)) });
    const validate = ajv.compile({ $ref: "api#/components/schemas/AuditList" });
    const page = await getJson(`${url}/api/v1/audit?limit=50`, { apiKey: KEYS.ops });
    expect(validate(page.body), JSON.stringify(validate.errors)).to.equal(true);
  });

  it("passes npm run audit -- verify once stopped, and fails naming the record after each tampering", async function () {
    await service!.close();
    service = undefined;
    const file = join(dir, "data", "journal.sqlite");
    const db = new DatabaseSync(file);
    const all = db.prepare("SELECT seq, action FROM audit_log ORDER BY seq").all();
    expect(all.at(-1)!.action, "the stop recorded").to.equal("service.stopped");
    const stopped = db.prepare("SELECT * FROM audit_log WHERE action IN ('service.started', 'service.stopped')").all();
    const secrets = [KEYS.desk, KEYS.viewer, KEYS.ops, WALLET.privateKey, POOR.privateKey, receiver.secret];
    for (const row of stopped) for (const secret of secrets) expect(JSON.stringify(row)).to.not.include(secret);
    const every = db.prepare("SELECT * FROM audit_log ORDER BY seq").all();
    db.close();
    const chained = every.map((row) => ({
      seq: Number(row.seq),
      at: String(row.at),
      actor: String(row.actor),
      action: String(row.action),
      subject: row.subject === null ? null : String(row.subject),
      details: JSON.parse(String(row.details)),
      prevHash: String(row.prev_hash),
      hash: String(row.hash),
    })) as AuditRecord[];
    const checkpoint = lastCheckpoint(output);
    expect(checkpoint.split(":")[0], "the last checkpoint, at stop, is the head").to.equal(String(chained.length));
    const sql = async (text: string) => {
      const writer = new DatabaseSync(file);
      try {
        writer.exec(text);
      } finally {
        writer.close();
      }
    };
    await tamperings(sql, (extra = []) => verifyCommand(["--journal", file, ...extra]), chained, checkpoint);
  });

  it("exports the records as JSON lines that verify --file checks, with the checkpoint, and refuses a bad --head", async function () {
    const file = join(dir, "data", "journal.sqlite");
    const exported = await auditCommand(["export", "--journal", file]);
    expect(exported.code, exported.stderr).to.equal(0);
    const lines = exported.stdout.trim().split("\n");
    expect(lines).to.have.length(records.length + 1); // and the stop
    writeFileSync(join(dir, "audit.jsonl"), exported.stdout);
    const checked = await verifyCommand(["--file", join(dir, "audit.jsonl"), "--head", lastCheckpoint(output)]);
    expect(checked.code, checked.stderr).to.equal(0);
    const after = await auditCommand(["export", "--journal", file, "--after", String(records.length)]);
    expect(
      after.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).action),
    ).to.deep.equal(["service.stopped"]);
    const bad = await verifyCommand(["--journal", file, "--head", "12"]);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.match(/--head: must be <seq>:<hash>/);
  });
});
