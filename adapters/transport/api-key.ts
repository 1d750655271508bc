import { createHash, timingSafeEqual } from "node:crypto";

/** The request header (gRPC metadata key) that carries the caller's key, as the SPEC names it. */
export const API_KEY_HEADER = "api_key";

/** Why a key was refused; the messages say what is wrong without echoing the key. */
export const MISSING_KEY_MESSAGE = `missing ${API_KEY_HEADER} header`;
export const WRONG_KEY_MESSAGE = `invalid ${API_KEY_HEADER}`;

/**
 * `scope` identifies the caller without revealing its key (the first 16 bytes of the key's
 * SHA-256, hex): idempotency keys are scoped by it, and it stays the same across restarts
 * and reordered key lists.
 */
export type ApiKeyCheck = { ok: true; keyIndex: number; scope: string } | { ok: false; message: string };

/** Checks a presented key against the accepted ones. */
export interface ApiKeyVerifier {
  /**
   * @param presented - the header value, or null/undefined when the header is absent
   * @returns which accepted key matched (its position, never the key), or why none did
   */
  check(presented: string | null | undefined): ApiKeyCheck;
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/**
 * Builds a verifier over the accepted keys. Keys and the presented value are both
 * hashed with SHA-256 and compared with crypto.timingSafeEqual, so the comparison
 * takes the same time whatever the length or content of the presented value, and
 * every accepted key is compared (no early exit) so the time does not tell which
 * key came close.
 * @throws TypeError when there is no key or a key is empty
 */
export function createApiKeyVerifier(keys: readonly string[]): ApiKeyVerifier {
  if (keys.length === 0) throw new TypeError("at least one API key is required");
  if (keys.some((key) => key.length === 0)) throw new TypeError("API keys must not be empty");
  const digests = keys.map(sha256);
  return {
    check(presented) {
      if (presented === undefined || presented === null || presented === "") {
        return { ok: false, message: MISSING_KEY_MESSAGE };
      }
      const candidate = sha256(presented);
      let match = -1;
      digests.forEach((digest, index) => {
        if (timingSafeEqual(digest, candidate) && match === -1) match = index;
      });
      if (match === -1) return { ok: false, message: WRONG_KEY_MESSAGE };
      return { ok: true, keyIndex: match, scope: digests[match]!.subarray(0, 16).toString("hex") };
    },
  };
}
