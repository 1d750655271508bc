/**
 * `npm run key`: api keys for the access file (ACCESS_FILE, docs/operations.md "Access and limits").
 *
 *   npm run key -- new --name desk-eu --role trader [--role viewer]
 *       a new random key (32 random bytes, base64url), printed once, and the entry to add to
 *       the file's "keys" (the key's SHA-256, never the key);
 *   npm run key -- hash < key.txt
 *       the SHA-256 of a key read from standard input (an existing API_KEYS key moving into the file);
 *   npm run key -- check access.json
 *       checks a file as the service would at start (all but the chain's wallets and coins); exit 1 on a problem.
 */
import { createHash, randomBytes } from "node:crypto";
import { parseArgs } from "node:util";

import { loadAccessFile } from "../adapters/config/access-file.js";
import { ROLES, type Role } from "../core/index.js";

const USAGE = `usage: npm run key -- new --name <name> --role <${ROLES.join("|")}> [--role ...]
       npm run key -- hash < file-holding-the-key
       npm run key -- check <access-file.json>`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

function newKey(args: string[]): void {
  const { values } = parseArgs({
    args,
    options: { name: { type: "string" }, role: { type: "string", multiple: true } },
    strict: true,
  });
  if (values.name === undefined) fail("new: --name is required");
  const roles = values.role ?? [];
  if (roles.length === 0) fail("new: at least one --role is required");
  for (const role of roles) if (!(ROLES as readonly string[]).includes(role)) fail(`new: --role ${role} is not a role`);
  const key = randomBytes(32).toString("base64url");
  const entry = { name: values.name, sha256: createHash("sha256").update(key).digest("hex"), roles: roles as Role[] };
  process.stdout.write(
    `The new api key, shown this once (the service keeps only its SHA-256):\n\n  ${key}\n\n` +
      `Add this entry to the access file's "keys" (and its scopes: kinds, wallets, coins, destinataries, allowFrom, expiresAt):\n\n` +
      `  ${JSON.stringify(entry)}\n`,
  );
}

async function hashKey(): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  // A trailing newline (echo, a file) is not part of the key the header carries.
  const key = Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
  if (key === "") fail("hash: no key on standard input");
  process.stdout.write(`${createHash("sha256").update(key).digest("hex")}\n`);
}

function check(path: string | undefined): void {
  if (path === undefined) fail("check: name the access file");
  const { policy, problems } = loadAccessFile(path, {});
  if (policy === undefined) {
    process.stderr.write(`${path}: refused\n${problems.map((p) => `  ${p}\n`).join("")}`);
    process.exit(1);
  }
  process.stdout.write(
    `${path}: valid (version ${policy.version}; ${policy.keys.length} keys, ${policy.limits.length} limits, ${policy.denylist.size} denied addresses)\n`,
  );
}

const [command, ...rest] = process.argv.slice(2);
if (command === "new") newKey(rest);
else if (command === "hash") await hashKey();
else if (command === "check") check(rest[0]);
else fail(command === undefined ? "name a command" : `unknown command ${command}`);
