import { hash, timingSafeEqual } from "node:crypto";

import type { Caller } from "../../../core/index.js";
import { API_KEY_HEADER } from "./headers.js";

/** Why a key was refused; the messages say what is wrong without echoing the key. */
export const MISSING_KEY_MESSAGE = `missing ${API_KEY_HEADER} header`;
export const WRONG_KEY_MESSAGE = `invalid ${API_KEY_HEADER}`;

/**
 * A key the verifier accepted. `scope` identifies the caller without revealing its key (the first
 * 16 bytes of the key's SHA-256, hex): idempotency keys are scoped by it, and it stays the same
 * across restarts and reordered key lists.
 */
export type AcceptedKey = {
  ok: true;
  keyIndex: number;
  scope: string;
  /** The key's access-file entry with its id, when the service runs with ACCESS_FILE. */
  caller?: Caller;
};

/** What the use cases are told of an accepted key: its scope, and the caller (with its entry, under an access file). */
export function callerOf(key: AcceptedKey): { scope: string; caller: Caller } {
  return { scope: key.scope, caller: key.caller ?? { id: key.scope } };
}

/**
 * The verifier's answer for one request, made once by the pipeline (http/steps/api-key.ts) and
 * handed whole, as it is, to the request's handler (in its RequestContext), to Connect's handlers
 * (rpc/request-values.ts), to the lean gRPC path and to the access line: whatever a verifier puts in
 * it reaches all of them.
 */
export type ApiKeyCheck =
  | AcceptedKey
  /**
   * `message` is what the client is told; for a key the access file knows, refused all the same
   * (expired, or used from elsewhere), `rule` (the metrics' reason) and `reason` say why, for the operator only.
   */
  | { ok: false; message: string; rule?: "key_expired" | "key_address"; reason?: string };

/** What a verifier may ask of the request besides its key: the client's address, found when asked. */
export interface KeyClient {
  /** By TRUSTED_PROXIES' rule (http/client-address.ts). */
  readonly clientAddress: string;
}

/** Checks a presented key against the accepted ones. */
export interface ApiKeyVerifier {
  /**
   * @param presented - the header value, or null/undefined when the header is absent
   * @param client - the request it came with (its context), for a verifier that looks at more than the key
   * @returns which accepted key matched (its position, never the key), or why none did
   */
  check(presented: string | null | undefined, client?: KeyClient): ApiKeyCheck;
}

/** The refusals, one object each: the pipeline checks every request, the probes' (without a key) included. */
const MISSING_KEY: ApiKeyCheck = Object.freeze({ ok: false, message: MISSING_KEY_MESSAGE });
const WRONG_KEY: ApiKeyCheck = Object.freeze({ ok: false, message: WRONG_KEY_MESSAGE });

/**
 * Builds a verifier over the accepted keys. The presented value is hashed (SHA-256) and its
 * digest looked up among the accepted keys' digests, then compared with the one found by
 * crypto.timingSafeEqual: the comparison is over 32 bytes whatever was presented, so its
 * time tells nothing of how close a guess came, and the lookup works on a digest the caller
 * cannot steer. One hash and one map lookup, whatever the number of keys: this runs on every
 * request, the refused ones included, so it makes no string of the digest beyond what the hash
 * answers and no buffer.
 * @throws TypeError when there is no key or a key is empty
 */
export function createApiKeyVerifier(acceptedKeys: readonly string[]): ApiKeyVerifier {
  const keys = [...acceptedKeys];
  if (keys.length === 0) throw new TypeError("at least one API key is required");
  if (keys.some((key) => key.length === 0)) throw new TypeError("API keys must not be empty");
  // The accepted digests by their first four bytes: a number to look up, rather than a string to hash.
  const byPrefix = new Map<number, Array<{ digest: Buffer; check: AcceptedKey }>>();
  const listed = new Set<string>();
  keys.forEach((key, keyIndex) => {
    const digest = hash("sha256", key, "buffer");
    const hex = digest.toString("hex");
    // A key listed twice answers as its first position.
    if (listed.has(hex)) return;
    listed.add(hex);
    const prefix = digest.readInt32BE(0);
    const sharing = byPrefix.get(prefix) ?? [];
    sharing.push({ digest, check: { ok: true, keyIndex, scope: hex.slice(0, 32) } });
    byPrefix.set(prefix, sharing);
  });
  /** The presented key's digest, written here for timingSafeEqual (check never waits, so one serves every call). */
  const presentedDigest = Buffer.alloc(32);
  return {
    check(presented) {
      if (presented === undefined || presented === null || presented === "") return MISSING_KEY;
      // As "binary" (latin1), a character per byte: crypto.hash answers a string faster than a Buffer.
      const digest = hash("sha256", presented, "binary");
      const candidates = byPrefix.get(prefixOf(digest));
      if (candidates === undefined) return WRONG_KEY;
      presentedDigest.write(digest, 0, "latin1");
      for (const candidate of candidates)
        if (timingSafeEqual(presentedDigest, candidate.digest)) return candidate.check;
      return WRONG_KEY;
    },
  };
}

/** A "binary" digest's first four bytes, as Buffer.readInt32BE reads them. */
function prefixOf(digest: string): number {
  return (
    (digest.charCodeAt(0) << 24) | (digest.charCodeAt(1) << 16) | (digest.charCodeAt(2) << 8) | digest.charCodeAt(3)
  );
}
