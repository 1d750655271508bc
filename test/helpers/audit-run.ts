/**
 * The audit log's end-to-end suites (issue 38, "done when") share this: an access file with a
 * trader, a viewer and an admin, a spending limit and a denylist; a mixed run of requests through
 * the service (trades accepted, refused by role, denylist and limit, refused after acceptance,
 * malformed and unknown-key requests that record nothing, a reload, a delivery retried by hand);
 * `npm run audit -- verify` as a child process; and the three tamperings it must catch.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { renameSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

import type { AuditRecord } from "../../core/index.js";
import { getJson, postJson } from "../adapters/transport/helpers.js";
import { waitFor } from "./wait.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export const KEYS = {
  desk: "audit-desk-key-0123456789abcdef",
  viewer: "audit-viewer-key-0123456789abc",
  ops: "audit-ops-key-0123456789abcdefg",
  later: "audit-later-key-0123456789abcde",
} as const;
export const DENIED = "0x8589427373D6D84E98730D7795D8f6f8731FDA16";
export const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

const sha = (key: string) => createHash("sha256").update(key).digest("hex");

/** The access file: desk trades (up to 1000 USD a day), viewer reads, ops administers; `later` once reloaded. */
export function writeAccessFile(file: string, deniedFile: string, withLater = false): void {
  const keys = [
    { name: "desk", sha256: sha(KEYS.desk), roles: ["trader"] },
    { name: "viewer", sha256: sha(KEYS.viewer), roles: ["viewer"] },
    { name: "ops", sha256: sha(KEYS.ops), roles: ["admin"] },
    ...(withLater ? [{ name: "later", sha256: sha(KEYS.later), roles: ["trader"] }] : []),
  ];
  writeFileSync(deniedFile, `${DENIED}\n`);
  writeFileSync(
    `${file}.new`,
    JSON.stringify({
      keys,
      limits: [{ name: "desk daily", per: "key", window: "24h", maxUsd: "1000" }],
      denylist: deniedFile,
    }),
  );
  renameSync(`${file}.new`, file);
}

/** Every record, oldest first, as the admin reads them through GET /api/v1/audit, `size` a page. */
export async function auditRecords(apiUrl: string, query = "", size = 5): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  let cursor: string | null = "";
  while (cursor !== null) {
    const page = await getJson(
      `${apiUrl}/api/v1/audit?limit=${size}${query}${cursor === "" ? "" : `&cursor=${cursor}`}`,
      { apiKey: KEYS.ops },
    );
    expect(page.status, page.text).to.equal(200);
    const body = page.body as unknown as { records: AuditRecord[]; nextCursor: string | null };
    records.push(...body.records);
    cursor = body.nextCursor;
  }
  return records;
}

export interface RunContext {
  /** The instance each step is sent to, in turn (one, or two sharing a journal). */
  apiUrls: string[];
  /** An exchange wallet of the service's that cannot pay (unfunded, or without allowance). */
  poorWallet: string;
  wallet: string;
  dai: string;
  accessFile: string;
  deniedFile: string;
}

/**
 * The mixed run, each step sent to the next instance in turn: what its trades record is
 * RUN_RECORDS (and one trade of the key the reload added, per instance), besides the reload and
 * the retried delivery.
 */
export async function mixedRun(run: RunContext): Promise<void> {
  let turn = 0;
  const url = () => run.apiUrls[turn++ % run.apiUrls.length]!;
  const body = (amount: string, extra: Record<string, string> = {}) => ({
    userAddress: run.wallet,
    destinatary: CUSTOMER,
    amount,
    usdAddress: run.dai,
    ...extra,
  });
  const trade = async (path: string, key: string, payload: object, status: number) => {
    const answer = await postJson(`${url()}${path}`, payload, { apiKey: key });
    expect(answer.status, `${path} ${answer.text}`).to.equal(status);
    return answer;
  };
  await trade("/api/v1/token/buy", KEYS.desk, body("25"), 200);
  await trade("/api/v1/token/sell", KEYS.desk, body("10"), 200);
  await trade("/api/v1/remmitance", KEYS.desk, body("5"), 200);
  await trade("/api/v1/token/buy", KEYS.viewer, body("1"), 403);
  await trade("/api/v1/token/buy", KEYS.desk, body("1", { destinatary: DENIED }), 403);
  await trade("/api/v1/token/buy", KEYS.desk, body("5000"), 429);
  const poor = await postJson(`${url()}/api/v1/token/buy`, body("2", { userAddress: run.poorWallet }), {
    apiKey: KEYS.desk,
  });
  expect(poor.status, poor.text).to.be.within(400, 499);
  // Neither recorded: a malformed request, an unknown key.
  await trade("/api/v1/token/buy", KEYS.desk, body("not a number"), 400);
  await trade("/api/v1/token/buy", "an-unknown-key-0123456789abcdef", body("1"), 401);
  writeAccessFile(run.accessFile, run.deniedFile, true);
  for (const apiUrl of run.apiUrls)
    await waitFor("the reloaded file in force", async () => {
      const answer = await postJson(`${apiUrl}/api/v1/token/buy`, body("1"), { apiKey: KEYS.later });
      return answer.status === 200;
    });
  // The receiver is down and the retry window 1 s: the desk's deliveries fail, and ops retries one.
  const failed = await waitFor("a failed delivery", async () => {
    const list = await getJson(`${run.apiUrls[0]}/api/v1/webhooks/deliveries?status=failed`, { apiKey: KEYS.desk });
    return (list.body as unknown as { deliveries: Array<{ id: string }> }).deliveries[0]?.id;
  });
  const retried = await postJson(`${url()}/api/v1/webhooks/deliveries/${failed}/retry`, undefined, {
    apiKey: KEYS.ops,
    contentType: null,
  });
  expect(retried.status, retried.text).to.equal(200);
}

/** What the mixed run records, by action and its refusal's code and rule or limit, in order. */
export const RUN_RECORDS = [
  ["desk", "trade.accepted", null],
  ["desk", "trade.accepted", null],
  ["desk", "trade.accepted", null],
  ["viewer", "trade.refused", "permission_denied role"],
  ["desk", "trade.refused", "permission_denied denylist"],
  ["desk", "trade.refused", "spending_limit_exceeded desk daily"],
  ["desk", "trade.accepted", null],
  ["desk", "trade.refused", "after acceptance"],
] as const;

/** A record as RUN_RECORDS names it. */
export function described(record: AuditRecord): [string, string, string | null] {
  const { code, rule, limit } = record.details as Record<string, string | undefined>;
  if (record.action !== "trade.refused") return [record.actor, record.action, null];
  if (record.subject !== null) return [record.actor, record.action, "after acceptance"];
  return [record.actor, record.action, `${code} ${rule ?? limit}`];
}

/** `npm run audit -- verify` as an operator runs it (a child process), with `args`. */
export function verifyCommand(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return auditCommand(["verify", ...args], env);
}

/** `npm run audit -- <args>` (a child process). */
export async function auditCommand(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/audit.ts", ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number>((resolve) => child.on("close", (c) => resolve(c ?? -1)));
  return { code, stdout, stderr };
}

/** The last "audit checkpoint" line of a log's JSON lines, as `--head` takes it. */
export function lastCheckpoint(output: string): string {
  const lines = output
    .split("\n")
    .filter((line) => line.includes('"audit checkpoint"'))
    .map((line) => JSON.parse(line) as { seq: number; hash: string });
  const last = lines.at(-1);
  if (last === undefined) throw new Error("no audit checkpoint was logged");
  return `${last.seq}:${last.hash}`;
}

/**
 * The three tamperings, each undone before the next, on a journal `sql` writes to: a record's
 * details changed, a middle record deleted, the tail cut after the last checkpoint. `verify` must
 * pass before, fail naming the record during each (the cut only with --head), and pass after.
 */
export async function tamperings(
  sql: (text: string) => Promise<void>,
  verify: (extra?: string[]) => Promise<{ code: number; stdout: string; stderr: string }>,
  records: AuditRecord[],
  checkpoint: string,
): Promise<void> {
  const passes = async (extra: string[] = []) => {
    const result = await verify(extra);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.match(new RegExp(`audit log verified: ${records.length} records`));
  };
  const fails = async (naming: RegExp, extra: string[] = []) => {
    const result = await verify(extra);
    expect(result.code, result.stdout).to.equal(1);
    expect(result.stderr).to.match(naming);
  };
  await passes(["--head", checkpoint]);
  const middle = records[Math.floor(records.length / 2)]!;
  const changed = records.find((r) => r.action === "trade.accepted")!;
  const quote = (text: string) => `'${text.replace(/'/g, "''")}'`;
  await sql(
    `UPDATE audit_log SET details = ${quote(JSON.stringify({ ...changed.details, amount: "2500" }))} WHERE seq = ${changed.seq}`,
  );
  await fails(new RegExp(`record ${changed.seq}: record ${changed.seq}'s hash does not match its contents`));
  await sql(`UPDATE audit_log SET details = ${quote(canonicalText(changed.details))} WHERE seq = ${changed.seq}`);
  await passes();
  await sql(`DELETE FROM audit_log WHERE seq = ${middle.seq}`);
  await fails(new RegExp(`record ${middle.seq}: record ${middle.seq} is missing`));
  await sql(insertOf(middle));
  await passes();
  const cut = records.slice(-3);
  await sql(`DELETE FROM audit_log WHERE seq >= ${cut[0]!.seq}`);
  const without = await verify();
  expect(without.code, "a cut tail alone leaves a valid chain").to.equal(0);
  await fails(
    new RegExp(`record ${cut[0]!.seq}: the chain ends at record ${cut[0]!.seq - 1}, before the checkpoint's`),
    ["--head", checkpoint],
  );
  for (const record of cut) await sql(insertOf(record));
  await passes(["--head", checkpoint]);
}

/** The details as the journal keeps them: canonical JSON (keys sorted; the records' details hold no floats). */
function canonicalText(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : inner,
  );
}

function insertOf(record: AuditRecord): string {
  const text = (value: string | null) => (value === null ? "NULL" : `'${value.replace(/'/g, "''")}'`);
  return `INSERT INTO audit_log (seq, at, actor, action, subject, details, prev_hash, hash) VALUES (${record.seq}, ${text(record.at)}, ${text(record.actor)}, ${text(record.action)}, ${text(record.subject)}, ${text(canonicalText(record.details))}, ${text(record.prevHash)}, ${text(record.hash)})`;
}
