/**
 * ACCESS_FILE: every api key by its SHA-256, what each may do, the spending limits, the approval
 * rules and the denylist (docs/operations.md "Access and limits" and "Approvals"; its JSON Schema, docs/access-file.schema.json,
 * is `accessFileJsonSchema()`). Read at start and at every reload (adapters/startup/access.ts):
 * a file with a problem is refused whole, each problem named by its place in the file
 * (`keys[2].wallets[0]: ...`), never echoing a key.
 */
import { createHash } from "node:crypto";
import { closeSync, fstatSync, openSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";

import { z } from "zod";

import {
  type AccessKey,
  type AccessPolicy,
  keyIdOf,
  LIMIT_PERS,
  LIMIT_USD_DECIMALS,
  ROLES,
  type Role,
  type SpendingLimit,
  type TradeKind,
} from "../../core/index.js";
import { approvalRuleSchema, checkApprovals } from "./access-file-approvals.js";
import { calendarTime, parseCidr, parseDenylist, parseWindow, usdUnits } from "./access-file-values.js";

export { parseCidr, parseDenylist, parseWindow } from "./access-file-values.js";

const ADDRESS = z.string().regex(/^0x[0-9a-fA-F]{40}$/, "must be an address: 0x followed by 40 hex digits");
const SHA256 = z
  .string()
  .regex(/^[0-9a-f]{64}$/, 'must be the lower-case hex SHA-256 of the key, 64 digits (printf %s "$KEY" | sha256sum)');
/** Names are what history, limits and `sees` refer to: short, printable, no spaces. */
const NAME = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$/,
    "must be 1 to 64 letters, digits or . _ : @ -, starting with a letter or digit",
  );
const nonEmpty = <T extends z.ZodType>(item: T) =>
  z.array(item).min(1, "must list at least one (leave it out for any)");

const keySchema = z.strictObject({
  name: NAME,
  sha256: z.union([SHA256, z.array(SHA256).min(1, "must list at least one hash")]),
  id: z
    .string()
    .regex(/^[0-9a-f]{32}$/, "must be a key id: 32 lower-case hex digits (the first 32 of a key's SHA-256)")
    .optional(),
  roles: z.array(z.enum(ROLES)).min(1, "must list at least one role"),
  kinds: nonEmpty(z.enum(["sell", "buy", "remittance"])).optional(),
  wallets: nonEmpty(ADDRESS).optional(),
  coins: nonEmpty(ADDRESS).optional(),
  destinataries: nonEmpty(ADDRESS).optional(),
  allowFrom: nonEmpty(z.string()).optional(),
  expiresAt: z
    .string()
    .regex(
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
      "must be an RFC 3339 time with an offset, such as 2027-01-01T00:00:00Z",
    )
    .optional(),
  sees: z.array(z.string()).optional(),
});

const limitSchema = z.strictObject({
  name: z.string().min(1, "must not be empty").max(100, "must be at most 100 characters"),
  per: z.enum(LIMIT_PERS),
  keys: nonEmpty(z.string()).optional(),
  window: z.string(),
  maxUsd: z
    .string()
    .regex(
      new RegExp(`^\\d+(\\.\\d{1,${LIMIT_USD_DECIMALS}})?$`),
      `must be a decimal string such as "250000" or "99.5" (at most ${LIMIT_USD_DECIMALS} decimals)`,
    )
    .optional(),
  maxTrades: z.int().min(0).optional(),
});

/** The access file's shape. The checks that relate fields, or the file to the service, are in `parseAccessFile`. */
export const ACCESS_FILE_SCHEMA = z.strictObject({
  /** Where an editor finds the schema (docs/access-file.schema.json): allowed, not read. */
  $schema: z.string().optional(),
  keys: z.array(keySchema).min(1, "must list at least one key"),
  limits: z.array(limitSchema).optional(),
  /** Approval rules (docs/operations.md "Approvals"): trades held for approver keys. */
  approvals: z.array(approvalRuleSchema).optional(),
  denylist: z.string().min(1, "must name a file").optional(),
});

type AccessFile = z.infer<typeof ACCESS_FILE_SCHEMA>;

/** The published JSON Schema of the access file (docs/access-file.schema.json), from the same definition. */
export function accessFileJsonSchema(): object {
  return {
    ...z.toJSONSchema(ACCESS_FILE_SCHEMA),
    title: "ACCESS_FILE",
    description:
      "The api keys (by SHA-256), their roles and scopes, the spending limits, the approval rules and the denylist of the token trading service. docs/operations.md, 'Access and limits' and 'Approvals'.",
  };
}

/** What the file is checked against: the service's exchange wallets and stable coins (absent: not checked). */
export interface AccessContext {
  wallets?: readonly string[];
  /** Stable coin address (any case) → symbol. */
  coins?: ReadonlyMap<string, string>;
}

/** A zod issue's path as the file's reader writes it: `keys[2].wallets[0]`. */
function pathText(path: readonly PropertyKey[]): string {
  return path
    .map((part, i) => (typeof part === "number" ? `[${part}]` : `${i === 0 ? "" : "."}${String(part)}`))
    .join("");
}

function issueText(issue: z.core.$ZodIssue): string {
  const at = pathText(issue.path);
  const prefix = at === "" ? "" : `${at}: `;
  switch (issue.code) {
    case "unrecognized_keys":
      return `${prefix}unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
    case "invalid_type":
      return `${prefix}must be ${issue.expected === "array" ? "an array" : `a ${issue.expected}`}`;
    case "invalid_value":
      return `${prefix}must be one of ${issue.values.map(String).join(", ")}`;
    case "invalid_union":
      return `${prefix}must be a SHA-256 (64 lower-case hex digits) or an array of them`;
    default:
      return `${prefix}${issue.message}`;
  }
}

/** The file's bytes and the denylist's, as read together. */
export interface AccessFileText {
  text: string;
  /** Reads the denylist the file names (resolved from the file's folder); throws with a code when it cannot. */
  readDenylist(path: string): string;
}

/**
 * Checks the access file whole and builds the policy, or adds every problem to `problems`
 * (each starting with its place in the file) and returns undefined.
 */
export function parseAccessFile(
  source: AccessFileText,
  context: AccessContext,
  problems: string[],
): AccessPolicy | undefined {
  const before = problems.length;
  let document: unknown;
  try {
    document = JSON.parse(source.text);
  } catch {
    // Not the parser's message: it quotes the text around the error, which may hold a key pasted by mistake.
    problems.push("is not valid JSON (a JSON linter, such as jq, shows where)");
    return undefined;
  }
  const parsed = ACCESS_FILE_SCHEMA.safeParse(document);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.push(issueText(issue));
    return undefined;
  }
  const file = parsed.data;
  const keys = checkKeys(file, context, problems);
  const limits = checkLimits(file, new Set(file.keys.map((k) => k.name)), problems);
  const approvals = checkApprovals(file.approvals, file.keys, problems);
  let denylist = new Set<string>();
  let denylistText = "";
  if (file.denylist !== undefined) {
    try {
      denylistText = source.readDenylist(file.denylist);
      denylist = parseDenylist(denylistText, problems);
    } catch (error) {
      problems.push(`denylist: cannot read ${file.denylist} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
  }
  if (problems.length > before) return undefined;
  const version = createHash("sha256").update(source.text).update("\0").update(denylistText).digest("hex").slice(0, 16);
  return { version, keys, limits, denylist, ...(approvals.length > 0 && { approvals }) };
}

function checkKeys(file: AccessFile, context: AccessContext, problems: string[]): AccessKey[] {
  const names = new Map<string, number>();
  const hashes = new Map<string, number>();
  const ids = new Map<string, number>();
  file.keys.forEach((key, i) => {
    const seen = names.get(key.name);
    if (seen !== undefined) problems.push(`keys[${i}].name: "${key.name}" is already the name of keys[${seen}]`);
    else names.set(key.name, i);
    let sameKey = false;
    for (const hash of typeof key.sha256 === "string" ? [key.sha256] : key.sha256) {
      const other = hashes.get(hash);
      if (other !== undefined) problems.push(`keys[${i}].sha256: the same key as keys[${other}]'s`);
      else hashes.set(hash, i);
      sameKey ||= other !== undefined;
    }
    const id = idOf(key);
    if (key.id !== undefined) {
      // An id that is another entry's hash's would share that key's idempotency keys, quotes and readers.
      const owner = file.keys.findIndex((k, j) => j !== i && hashesOf(k).some((hash) => keyIdOf(hash) === key.id));
      if (owner !== -1) problems.push(`keys[${i}].id: ${key.id} is the id of a key of keys[${owner}]`);
    }
    const other = ids.get(id);
    // Two entries of one key share its id too: said once, as the same key.
    if (other !== undefined && (key.id !== undefined || !sameKey))
      problems.push(`keys[${i}].id: ${id} is already the id of keys[${other}]`);
    else if (other === undefined) ids.set(id, i);
  });
  const wallets = context.wallets === undefined ? undefined : new Set(context.wallets.map((w) => w.toLowerCase()));
  const coins =
    context.coins === undefined ? undefined : new Set([...context.coins.keys()].map((c) => c.toLowerCase()));
  return file.keys.map((key, i) => {
    const at = `keys[${i}]`;
    key.wallets?.forEach((wallet, j) => {
      if (wallets !== undefined && !wallets.has(wallet.toLowerCase()))
        problems.push(`${at}.wallets[${j}]: ${wallet} is not an exchange wallet of this service`);
    });
    key.coins?.forEach((coin, j) => {
      if (coins !== undefined && !coins.has(coin.toLowerCase()))
        problems.push(`${at}.coins[${j}]: ${coin} is not a stable coin of this service`);
    });
    key.allowFrom?.forEach((cidr, j) => {
      if (parseCidr(cidr) === undefined)
        problems.push(`${at}.allowFrom[${j}]: "${cidr}" is not a CIDR (10.0.0.0/8, 2001:db8::/32) or an address`);
    });
    const expiresAt = key.expiresAt === undefined ? undefined : calendarTime(key.expiresAt);
    if (expiresAt !== undefined && Number.isNaN(expiresAt)) problems.push(`${at}.expiresAt: is not a valid time`);
    const sees = key.sees ?? [];
    if (sees.length > 0 && !key.roles.some((role) => role === "viewer" || role === "approver"))
      problems.push(
        `${at}.sees: only a viewer or an approver reads other keys' trades (an admin reads every trade); this key's roles are ${key.roles.join(", ")}`,
      );
    sees.forEach((name, j) => {
      if (name === "*" ? sees.length > 1 : !names.has(name))
        problems.push(
          `${at}.sees[${j}]: ${name === "*" ? '"*" (every key) stands alone' : `"${name}" is the name of no key`}`,
        );
    });
    return accessKey(key, expiresAt, sees);
  });
}

function hashesOf(key: AccessFile["keys"][number]): string[] {
  return typeof key.sha256 === "string" ? [key.sha256] : key.sha256;
}

/** A key's id: the file's, else its first hash's first 32 hex digits. */
function idOf(key: AccessFile["keys"][number]): string {
  return key.id ?? keyIdOf(typeof key.sha256 === "string" ? key.sha256 : key.sha256[0]!);
}

function lowerSet(list: readonly string[] | undefined): ReadonlySet<string> | undefined {
  return list === undefined ? undefined : new Set(list.map((a) => a.toLowerCase()));
}

function accessKey(key: AccessFile["keys"][number], expiresAt: number | undefined, sees: string[]): AccessKey {
  const kinds = key.kinds === undefined ? undefined : new Set<TradeKind>(key.kinds);
  const wallets = lowerSet(key.wallets);
  const coins = lowerSet(key.coins);
  const destinataries = lowerSet(key.destinataries);
  return {
    name: key.name,
    sha256: typeof key.sha256 === "string" ? [key.sha256] : [...key.sha256],
    id: idOf(key),
    roles: new Set<Role>(key.roles),
    ...(kinds && { kinds }),
    ...(wallets && { wallets }),
    ...(coins && { coins }),
    ...(destinataries && { destinataries }),
    ...(key.allowFrom && { allowFrom: [...key.allowFrom] }),
    ...(expiresAt !== undefined && { expiresAt }),
    sees: sees.includes("*") ? "all" : new Set(sees),
  };
}

function checkLimits(file: AccessFile, keyNames: ReadonlySet<string>, problems: string[]): SpendingLimit[] {
  const names = new Map<string, number>();
  return (file.limits ?? []).flatMap((limit, i) => {
    const at = `limits[${i}]`;
    const before = problems.length;
    const seen = names.get(limit.name);
    if (seen !== undefined) problems.push(`${at}.name: "${limit.name}" is already the name of limits[${seen}]`);
    else names.set(limit.name, i);
    const windowMs = parseWindow(limit.window);
    if (windowMs === undefined)
      problems.push(
        `${at}.window: "${limit.window}" is not a duration (a whole number of s, m, h or d, at most 366d: 30m, 1h, 24h, 7d)`,
      );
    if (limit.keys !== undefined && limit.per !== "key")
      problems.push(`${at}.keys: only a limit with per "key" names keys (this one is per "${limit.per}")`);
    limit.keys?.forEach((name, j) => {
      if (!keyNames.has(name)) problems.push(`${at}.keys[${j}]: "${name}" is the name of no key`);
    });
    if (limit.maxUsd === undefined && limit.maxTrades === undefined)
      problems.push(`${at}: must set maxUsd, maxTrades or both`);
    const maxUsd = limit.maxUsd === undefined ? undefined : usdUnits(limit.maxUsd);
    if (problems.length > before || windowMs === undefined) return [];
    return [
      {
        name: limit.name,
        per: limit.per,
        ...(limit.keys && { keys: new Set(limit.keys) }),
        windowMs,
        window: limit.window,
        ...(maxUsd !== undefined && { maxUsd }),
        ...(limit.maxTrades !== undefined && { maxTrades: limit.maxTrades }),
      },
    ];
  });
}

/** The file at `path` with its denylist resolved from its folder, read synchronously (start and reload). */
export function accessFileText(path: string, read: (path: string) => string): AccessFileText {
  const absolute = resolve(path);
  return { text: read(absolute), readDenylist: (denylist) => read(resolve(dirname(absolute), denylist)) };
}

/** A file as it was read: its absolute path, and its identity then (inode, size, times), to tell when it changed. */
export interface ReadFile {
  path: string;
  stamp: string;
}

/** A file's identity: what changes when it is written, or replaced by a rename or a symlink swap. */
export function stampOf(stats: { ino: number; size: number; mtimeMs: number; ctimeMs: number }): string {
  return `${stats.ino}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`;
}

/** What reading the access file found: the policy, or the problems; and the files it read (to watch). */
export interface LoadedAccessFile {
  policy?: AccessPolicy;
  problems: string[];
  /** The access file and the denylist it names, each stamped as it was read. */
  files: ReadFile[];
}

/** Reads and checks the access file at `path` (and its denylist) now. */
export function loadAccessFile(path: string, context: AccessContext): LoadedAccessFile {
  const files: ReadFile[] = [];
  const read = (file: string) => {
    // Stamped from the descriptor the text is read from: the stamp is the text's, whatever is renamed meanwhile.
    const fd = openSync(file, "r");
    try {
      files.push({ path: file, stamp: stampOf(fstatSync(fd)) });
      return readFileSync(fd, "utf8");
    } finally {
      closeSync(fd);
    }
  };
  const problems: string[] = [];
  let source: AccessFileText;
  try {
    source = accessFileText(path, read);
  } catch (error) {
    return { problems: [`cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`], files };
  }
  const policy = parseAccessFile(source, context, problems);
  return { ...(policy !== undefined && { policy }), problems, files };
}
