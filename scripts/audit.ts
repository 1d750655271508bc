/**
 * `npm run audit -- <command>`: the audit log read straight from the journal (docs/operations.md
 * "The audit log").
 *
 *   verify [--journal <file|url>] [--head <seq>:<hash>] [--file <records.jsonl>]
 *     Recomputes the chain: every record's seq, prevHash and hash. With --head (a checkpoint's
 *     seq and hash, from the log), the chain must still hold that record with that hash, so a
 *     tail cut after it, or a chain rewritten up to it, fails. Exits 0 when it verifies, 1 naming
 *     the first record that does not match, 2 when the journal cannot be read.
 *   export [--journal <file|url>] [--after <seq>]
 *     Writes the records after `seq` (default all) to stdout, one JSON record a line, as
 *     GET /api/v1/audit answers them: `verify --file` checks such a file.
 *
 * The journal: --journal (a SQLite file, or a postgres:// URL), else JOURNAL_URL, else
 * <DATA_DIR>/journal.sqlite (DATA_DIR default "data"), as the service finds it. A SQLite journal
 * is held by the running service: stop it first, or verify an export.
 */
import { createReadStream } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

import { readAuditLog, verifyAudit } from "../adapters/journal/index.js";
import type { AuditHead, AuditRecord } from "../core/index.js";

const USAGE =
  "usage: npm run audit -- verify [--journal <file|url>] [--head <seq>:<hash>] [--file <records.jsonl>]\n" +
  "       npm run audit -- export [--journal <file|url>] [--after <seq>]";

function parseHead(text: string): AuditHead {
  const match = /^(\d{1,15}):([0-9a-f]{64})$/.exec(text.trim());
  if (match === null) throw new UsageError("--head: must be <seq>:<hash>, as an audit checkpoint logged them");
  return { seq: Number(match[1]), hash: match[2]! };
}

class UsageError extends Error {}

/** The records of a JSON-lines file: one record a line, or one page ({"records": [...]}) a line. */
async function* fileRecords(path: string): AsyncGenerator<AuditRecord> {
  const lines = createInterface({ input: createReadStream(path, "utf8"), crlfDelay: Number.POSITIVE_INFINITY });
  let n = 0;
  for await (const line of lines) {
    n += 1;
    if (line.trim() === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`${path}:${n}: not JSON`);
    }
    const page = value as { records?: AuditRecord[] };
    if (Array.isArray(page.records)) yield* page.records;
    else yield value as AuditRecord;
  }
}

function journalOf(flag: string | undefined): { url?: string; file: string } {
  const named = flag ?? process.env.JOURNAL_URL?.trim() ?? "";
  if (/^postgres(ql)?:\/\//i.test(named)) return { url: named, file: "" };
  if (flag !== undefined) return { file: flag };
  return { file: join(process.env.DATA_DIR?.trim() || "data", "journal.sqlite") };
}

async function verify(values: { journal?: string; head?: string; file?: string }): Promise<number> {
  const checkpoint = values.head === undefined ? undefined : parseHead(values.head);
  const source =
    values.file === undefined
      ? await readAuditLog(journalOf(values.journal))
      : { records: fileRecords(values.file), close: async () => {} };
  try {
    const verdict = await verifyAudit(source.records, checkpoint);
    if (!verdict.ok) {
      process.stderr.write(`audit log does not verify: record ${verdict.seq}: ${verdict.problem}\n`);
      process.stderr.write(
        `(${verdict.records} records before it verified, up to ${verdict.head.seq}:${verdict.head.hash})\n`,
      );
      return 1;
    }
    const against = checkpoint === undefined ? "" : `, holding the checkpoint ${checkpoint.seq}:${checkpoint.hash}`;
    process.stdout.write(
      `audit log verified: ${verdict.records} records, head ${verdict.head.seq}:${verdict.head.hash}${against}\n`,
    );
    return 0;
  } finally {
    await source.close();
  }
}

async function exportRecords(values: { journal?: string; after?: string }): Promise<number> {
  const after = values.after === undefined ? 0 : Number(values.after);
  if (!Number.isSafeInteger(after) || after < 0) throw new UsageError("--after: must be a seq (0 or more)");
  const source = await readAuditLog(journalOf(values.journal));
  try {
    for await (const record of source.records) {
      if (record.seq <= after) continue;
      if (!process.stdout.write(`${JSON.stringify(record)}\n`))
        await new Promise((resolve) => process.stdout.once("drain", resolve));
    }
    return 0;
  } finally {
    await source.close();
  }
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      journal: { type: "string" },
      head: { type: "string" },
      file: { type: "string" },
      after: { type: "string" },
    },
  });
  const [command, ...rest] = positionals;
  if (rest.length > 0) throw new UsageError(`unexpected ${rest.join(" ")}`);
  if (command === "verify") return verify(values);
  if (command === "export") return exportRecords(values);
  throw new UsageError(command === undefined ? "a command is needed" : `unknown command ${command}`);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`npm run audit: ${message}\n${error instanceof UsageError ? `${USAGE}\n` : ""}`);
  process.exitCode = 2;
}
