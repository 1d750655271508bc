/**
 * The api_key check of a service with an access file (ACCESS_FILE): the presented key's SHA-256
 * looked up among the file's, then the key's expiry and the addresses it may call from. A key
 * that is unknown, expired, or used from elsewhere is refused exactly as a wrong key is (401,
 * "invalid api_key"), so that a stolen key's holder learns nothing; the log says which (the
 * `reason`, never the key). The policy is read on every check, so a reload is in force at once.
 */
import { hash, timingSafeEqual } from "node:crypto";
import { BlockList, isIP } from "node:net";

import type { AccessKey, AccessPolicy } from "../../../core/index.js";
import { type ApiKeyCheck, type ApiKeyVerifier, MISSING_KEY_MESSAGE, WRONG_KEY_MESSAGE } from "./api-key.js";

/** One policy's keys, by digest, with the networks each may call from. */
interface KeyTable {
  policy: AccessPolicy;
  byDigest: Map<string, { digest: Buffer; key: AccessKey; allowFrom: BlockList | undefined }>;
}

function networks(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of cidrs) {
    const [address, prefix] = entry.split("/");
    const family = isIP(address!) === 4 ? "ipv4" : "ipv6";
    if (prefix === undefined) list.addAddress(address!, family);
    else list.addSubnet(address!, Number(prefix), family);
  }
  return list;
}

function tableOf(policy: AccessPolicy): KeyTable {
  const byDigest: KeyTable["byDigest"] = new Map();
  for (const key of policy.keys) {
    const allowFrom = key.allowFrom === undefined ? undefined : networks(key.allowFrom);
    for (const hex of key.sha256) byDigest.set(hex, { digest: Buffer.from(hex, "hex"), key, allowFrom });
  }
  return { policy, byDigest };
}

/** Whether `address` (the client's, as TRUSTED_PROXIES reads it) is in `list`; IPv4-mapped IPv6 counts as IPv4. */
function allowed(list: BlockList, address: string | undefined): boolean {
  if (address === undefined) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  const plain = mapped === null ? address : mapped[1]!;
  const family = isIP(plain);
  return family !== 0 && list.check(plain, family === 4 ? "ipv4" : "ipv6");
}

/**
 * A verifier over the policy `current()` answers (reloaded with its file). One hash and one map
 * lookup a check, as without an access file; the table is rebuilt only when the policy changes.
 * @param now - the clock expiry is read against
 */
export function createAccessKeyVerifier(current: () => AccessPolicy, now: () => number = Date.now): ApiKeyVerifier {
  let table = tableOf(current());
  return {
    check(presented, client) {
      if (presented === undefined || presented === null || presented === "") {
        return { ok: false, message: MISSING_KEY_MESSAGE };
      }
      const policy = current();
      if (policy !== table.policy) table = tableOf(policy);
      const hex = hash("sha256", presented, "hex");
      const found = table.byDigest.get(hex);
      if (found === undefined || !timingSafeEqual(Buffer.from(hex, "hex"), found.digest))
        return { ok: false, message: WRONG_KEY_MESSAGE };
      const { key, allowFrom } = found;
      if (key.expiresAt !== undefined && now() >= key.expiresAt)
        return { ok: false, message: WRONG_KEY_MESSAGE, rule: "key_expired", reason: `api key "${key.name}" expired` };
      if (allowFrom !== undefined) {
        const address = client?.clientAddress;
        if (!allowed(allowFrom, address))
          return {
            ok: false,
            message: WRONG_KEY_MESSAGE,
            rule: "key_address",
            reason: `api key "${key.name}" may not be used from ${address ?? "an unknown address"}`,
          };
      }
      // The entry's id, whichever of its hashes was sent: a rotation keeps idempotency keys, quotes and webhooks.
      return { ok: true, keyIndex: 0, scope: key.id, caller: { id: key.id, key } } satisfies ApiKeyCheck;
    },
  };
}
