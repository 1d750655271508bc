import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";

import { expect } from "chai";
import { type Logger, pino } from "pino";

import { ConfigError, loadConfig } from "../../../adapters/config/env.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import { openAccess, watcherScopes } from "../../../adapters/startup/access.js";
import { Shutdown } from "../../../adapters/startup/shutdown.js";
import { waitFor } from "../../helpers/wait.js";

const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const DAI = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const CHAIN = { wallets: [WALLET], coins: new Map([[DAI, "DAI"]]) };

describe("the access file in force, reloaded", function () {
  let dir: string;
  let file: string;
  let lines: Array<Record<string, unknown>>;
  let log: Logger;
  let shutdown: Shutdown;
  let events: string[];
  const hangUps = new EventEmitter();
  let journal: MemoryJournal;

  const write = (keys: string[], extra: Record<string, unknown> = {}) => {
    // Written beside it and renamed over it, as editors and configuration tools do.
    writeFileSync(
      `${file}.new`,
      JSON.stringify({ keys: keys.map((name) => ({ name, sha256: sha(name), roles: ["trader"] })), ...extra }),
    );
    renameSync(`${file}.new`, file);
  };

  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), "access-reload-"));
    file = join(dir, "access.json");
    lines = [];
    const stream = new PassThrough();
    stream.on("data", (chunk: Buffer) => {
      for (const line of chunk.toString().split("\n")) if (line !== "") lines.push(JSON.parse(line));
    });
    log = pino({ level: "info" }, stream);
    shutdown = new Shutdown(log);
    events = [];
    journal = new MemoryJournal();
  });
  afterEach(async function () {
    await shutdown.run();
    rmSync(dir, { recursive: true, force: true });
  });

  async function open() {
    const config = loadConfig({ ACCESS_FILE: file });
    const observer = {
      loaded: (policy: { version: string }) => events.push(`loaded ${policy.version}`),
      refused: () => events.push("refused"),
    };
    // SIGHUP heard on an emitter of the test's: the test process's own signal handling is left alone
    // (removing a handler restores the default, which would end this process on the next real SIGHUP).
    // The poll compares the files with their stamps as read, so a change right after the start is seen.
    return (await openAccess(config, { ...CHAIN, log, shutdown, observer, hangUps, audit: journal.ports.audit }))!;
  }

  const names = (control: Awaited<ReturnType<typeof open>>) => control.current().keys.map((k) => k.name);
  const records = async () => (await journal.auditPage({ limit: 100 })).records;

  it("puts a changed file in force within 2 s, and logs which keys came and went", async function () {
    write(["desk-eu", "backoffice"]);
    const control = await open();
    expect(names(control)).to.deep.equal(["desk-eu", "backoffice"]);
    const started = Date.now();
    write(["desk-eu", "desk-us"]);
    await waitFor("the new file in force", async () => names(control).includes("desk-us"), 2_000, 50);
    expect(Date.now() - started).to.be.below(2_000);
    const reloaded = lines.find((line) => line.msg === "access file reloaded")!;
    expect(reloaded).to.deep.include({ keysAdded: ["desk-us"], keysRemoved: ["backoffice"], reason: "changed" });
    expect(events).to.have.length(2);
    // Each load recorded before it was in force, by the service, its subject the file's digest.
    const [loaded, reloadedRecord] = await records();
    expect(loaded).to.deep.include({ seq: 1, actor: "service", action: "access.loaded" });
    expect(loaded!.details).to.deep.equal({
      keys: ["desk-eu", "backoffice"],
      limits: [],
      approvals: [],
      denylisted: 0,
    });
    expect(reloadedRecord).to.deep.include({ seq: 2, action: "access.reloaded", subject: control.current().version });
    expect(reloadedRecord!.details).to.deep.include({
      keysAdded: ["desk-us"],
      keysRemoved: ["backoffice"],
      keysChanged: [],
      previous: loaded!.subject,
      reason: "changed",
    });
  });

  it("records the keys and limits a reload changed, and keeps the old file when the record cannot be written", async function () {
    write(["desk-eu", "ops"], { limits: [{ name: "daily", per: "key", window: "24h", maxUsd: "100" }] });
    const control = await open();
    const desk = { name: "desk-eu", sha256: sha("desk-eu"), roles: ["viewer"] };
    const document = (maxUsd: string) =>
      JSON.stringify({
        keys: [desk, { name: "ops", sha256: sha("ops"), roles: ["trader"] }],
        limits: [{ name: "daily", per: "key", window: "24h", maxUsd }],
      });
    writeFileSync(file, document("200"));
    expect(await control.reload("SIGHUP")).to.equal(true);
    expect((await records()).at(-1)!.details).to.deep.include({ keysChanged: ["desk-eu"], limitsChanged: ["daily"] });
    const before = control.current();
    const append = journal.ports.audit.appendAudit;
    journal.ports.audit.appendAudit = async () => {
      throw new Error("the journal is down");
    };
    try {
      writeFileSync(file, document("300"));
      expect(await control.reload("SIGHUP")).to.equal(false);
      expect(control.current(), "not in force without its record").to.equal(before);
      expect(lines.at(-1)).to.deep.include({ msg: "access file not reloaded: its audit record could not be written" });
    } finally {
      journal.ports.audit.appendAudit = append;
    }
    expect(await control.reload("SIGHUP")).to.equal(true);
    expect(control.current()).to.not.equal(before);
  });

  it("under OUTSIDE_TX_POLICY=pause, refuses a new file without an admin key that has not expired: a paused wallet could not be resumed", async function () {
    const file2 = (admin: Record<string, unknown> | undefined) =>
      JSON.stringify({
        keys: [
          { name: "desk", sha256: sha("desk"), roles: ["trader"] },
          ...(admin === undefined ? [] : [{ name: "ops", sha256: sha("ops"), roles: ["admin"], ...admin }]),
        ],
      });
    writeFileSync(file, file2({}));
    const config = loadConfig({ ACCESS_FILE: file, OUTSIDE_TX_POLICY: "pause" });
    const control = (await openAccess(config, { ...CHAIN, log, shutdown, hangUps, audit: journal.ports.audit }))!;
    for (const admin of [undefined, { expiresAt: "2020-01-01T00:00:00Z" }]) {
      writeFileSync(file, file2(admin));
      expect(await control.reload("SIGHUP"), JSON.stringify(admin)).to.equal(false);
      expect(control.current().keys.map((k) => k.name)).to.deep.equal(["desk", "ops"]);
    }
    const refused = (await records()).filter((record) => record.action === "access.refused");
    expect(refused).to.have.length(2);
    expect(JSON.stringify(refused[0]!.details.problems)).to.include(
      "OUTSIDE_TX_POLICY=pause needs a key with the admin role",
    );
    // Without the pause, the same file is taken.
    writeFileSync(file, file2(undefined));
    const alert = (await openAccess(loadConfig({ ACCESS_FILE: file }), {
      ...CHAIN,
      log,
      shutdown,
      hangUps,
    }))!;
    expect(alert.current().keys.map((k) => k.name)).to.deep.equal(["desk"]);
  });

  it("refuses an invalid new file whole: the one in force stays, logged as an error and counted", async function () {
    write(["desk-eu"]);
    const control = await open();
    const before = control.current();
    writeFileSync(file, JSON.stringify({ keys: [{ name: "desk-eu", sha256: "not a hash", roles: ["trader"] }] }));
    await waitFor("the refusal", async () => events.includes("refused"), 2_000, 50);
    expect(control.current()).to.equal(before);
    const refused = lines.find((line) => line.msg === "access file refused: the one in force stays")!;
    expect(refused.level).to.equal(50);
    expect((refused.problems as string[])[0]).to.match(/^keys\[0\]\.sha256: must be the lower-case hex SHA-256/);
    // Mended, it is taken.
    write(["desk-eu", "desk-us"]);
    await waitFor("the mended file in force", async () => names(control).includes("desk-us"), 2_000, 50);
    const refusal = (await records()).find((r) => r.action === "access.refused")!;
    expect(refusal).to.deep.include({ actor: "service", subject: before.version });
    expect((refusal.details.problems as string[])[0]).to.match(/^keys\[0\]\.sha256/);
  });

  it("refuses a file that went away once, not at every look, and takes it again when it is back", async function () {
    write(["desk-eu"]);
    const control = await open();
    rmSync(file);
    await waitFor("the refusal", async () => events.includes("refused"), 2_000, 50);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(events.filter((e) => e === "refused")).to.have.length(1);
    expect(names(control)).to.deep.equal(["desk-eu"]);
    write(["desk-eu", "desk-us"]);
    await waitFor("the file back in force", async () => names(control).includes("desk-us"), 2_000, 50);
  });

  it("reads the file again on SIGHUP, and when only its denylist changes", async function () {
    write(["desk-eu"], { denylist: "denied.txt" });
    writeFileSync(join(dir, "denied.txt"), "# none yet\n");
    const control = await open();
    expect(control.current().denylist.size).to.equal(0);
    writeFileSync(join(dir, "denied.txt"), "0x8589427373D6D84E98730D7795D8f6f8731FDA16\n");
    await waitFor("the new denylist in force", async () => control.current().denylist.size === 1, 2_000, 50);
    // SIGHUP: read at once, whatever the poll.
    control.close();
    write(["desk-eu", "ops"], { denylist: "denied.txt" });
    hangUps.emit("SIGHUP");
    await waitFor("the SIGHUP's file in force", async () => names(control).includes("ops"), 2_000, 10);
    expect(names(control)).to.deep.equal(["desk-eu", "ops"]);
    expect(lines.at(-1)).to.deep.include({ msg: "access file reloaded", reason: "SIGHUP" });
  });

  it("refuses at start a file that names a wallet or coin this service does not have", async function () {
    writeFileSync(
      file,
      JSON.stringify({
        keys: [{ name: "desk", sha256: sha("desk"), roles: ["trader"], wallets: [DAI], coins: [WALLET] }],
      }),
    );
    const refused = await open().catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(ConfigError);
    expect((refused as ConfigError).problems).to.deep.equal([
      `ACCESS_FILE: keys[0].wallets[0]: ${DAI} is not an exchange wallet of this service`,
      `ACCESS_FILE: keys[0].coins[0]: ${WALLET} is not a stable coin of this service`,
    ]);
  });

  it("is refused at start together with API_KEYS or API_KEYS_FILE, naming them", function () {
    write(["desk-eu"]);
    const problems = (env: NodeJS.ProcessEnv) => {
      try {
        loadConfig({ ACCESS_FILE: file, ...env });
      } catch (error) {
        return (error as ConfigError).problems;
      }
      return [];
    };
    const keysFile = join(dir, "keys.txt");
    writeFileSync(keysFile, "a-key-of-sixteen-characters\n");
    expect(problems({ API_KEYS: "a-key-of-sixteen-characters", API_KEYS_FILE: keysFile })).to.include(
      "ACCESS_FILE: lists the api keys, so API_KEYS and API_KEYS_FILE must be unset (both are set)",
    );
    expect(problems({ API_KEYS: "a-key-of-sixteen-characters" })).to.include(
      "ACCESS_FILE: lists the api keys, so API_KEYS must be unset (it is set)",
    );
    // On a real chain the file is enough: no API_KEYS needed.
    expect(
      problems({
        RPC_URL: "http://127.0.0.1:1",
        DEPLOYMENT_FILE: join(dir, "d.json"),
        EXCHANGE_PRIVATE_KEYS: `0x${"1".repeat(64)}`,
      }),
    ).to.not.include.members(["API_KEYS: is required when RPC_URL is set (or API_KEYS_FILE, or ACCESS_FILE)"]);
  });
});

describe("the keys that get the wallets' and the swap's events (watcherScopes)", function () {
  it("are the admins and the keys that see every trade, under each hash, but those expired", function () {
    const key = (name: string, roles: string[], extra: Record<string, unknown> = {}) => ({
      name,
      id: `${name}-id`,
      sha256: [sha(name)],
      roles: new Set(roles),
      sees: new Set<string>(),
      ...extra,
    });
    const policy = {
      version: "v",
      limits: [],
      denylist: new Set<string>(),
      keys: [
        key("ops", ["admin"]),
        key("old-ops", ["admin"], { expiresAt: Date.now() - 1000 }),
        key("audit", ["viewer"], { sees: "all" }),
        key("desk", ["trader"]),
        key("back", ["viewer"]),
      ],
    } as unknown as Parameters<typeof watcherScopes>[0];
    const scopes = watcherScopes(policy);
    expect(scopes).to.include("ops-id").and.include("audit-id");
    expect(scopes).to.not.include("old-ops-id");
    expect(scopes).to.not.include("desk-id");
    expect(scopes).to.not.include("back-id");
  });
});
