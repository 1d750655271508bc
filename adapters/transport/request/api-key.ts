import { hash, timingSafeEqual } from "node:crypto";

import type { Caller } from "../../../core/index.js";
import { API_KEY_HEADER } from "./headers.js";

/** Why a key was refused; the messages say what is wrong without echoing the key. */
export const MISSING_KEY_MESSAGE = `missing ${API_KEY_HEADER} header`;
export const WRONG_KEY_MESSAGE = `invalid ${API_KEY_HEADER}`;

/**
 * `scope` identifies the caller without revealing its key (the first 16 bytes of the key's
 * SHA-256, hex): idempotency keys are scoped by it, and it stays the same across restarts
 * and reordered key lists.
 */
export type ApiKeyCheck =
  /** `caller`: the key's access-file entry with its id, when the service runs with ACCESS_FILE. */
  | { ok: true; keyIndex: number; scope: string; caller?: Caller }
  /**
   * `message` is what the client is told; for a known key refused all the same, `rule` (the
   * metrics' reason) and `reason` say why, for the operator only.
   */
  | { ok: false; message: string; rule?: "key_expired" | "key_address"; reason?: string };

/** Checks a presented key against the accepted ones. */
export interface ApiKeyVerifier {
  /**
   * @param presented - the header value, or null/undefined when the header is absent
   * @param clientAddress - the client's address (TRUSTED_PROXIES applied), asked for only by a key that may call from some addresses only
   * @returns which accepted key matched (its position, never the key), or why none did
   */
  check(presented: string | null | undefined, clientAddress?: () => string): ApiKeyCheck;
}

/**
 * Builds a verifier over the accepted keys. The presented value is hashed (SHA-256) and its
 * digest looked up among the accepted keys' digests, then compared with the one found by
 * crypto.timingSafeEqual: the comparison is over 32 bytes whatever was presented, so its
 * time tells nothing of how close a guess came, and the lookup works on a digest the caller
 * cannot steer. One hash and one map lookup, whatever the number of keys: this runs on every
 * request, the refused ones included.
 * @throws TypeError when there is no key or a key is empty
 */
export function createApiKeyVerifier(acceptedKeys: readonly string[]): ApiKeyVerifier {
  const keys = [...acceptedKeys];
  if (keys.length === 0) throw new TypeError("at least one API key is required");
  if (keys.some((key) => key.length === 0)) throw new TypeError("API keys must not be empty");
  const byDigest = new Map<string, { digest: Buffer; check: ApiKeyCheck }>();
  keys.forEach((key, keyIndex) => {
    const digest = hash("sha256", key, "buffer");
    const hex = digest.toString("hex");
    // A key listed twice answers as its first position.
    if (!byDigest.has(hex)) byDigest.set(hex, { digest, check: { ok: true, keyIndex, scope: hex.slice(0, 32) } });
  });
  return {
    check(presented) {
      if (presented === undefined || presented === null || presented === "") {
        return { ok: false, message: MISSING_KEY_MESSAGE };
      }
      // As hex first: crypto.hash answers a string faster than a Buffer.
      const hex = hash("sha256", presented, "hex");
      const found = byDigest.get(hex);
      return found !== undefined && timingSafeEqual(Buffer.from(hex, "hex"), found.digest)
        ? found.check
        : { ok: false, message: WRONG_KEY_MESSAGE };
    },
  };
}
