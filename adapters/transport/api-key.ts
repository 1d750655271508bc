import { hash } from "node:crypto";

import { API_KEY_HEADER } from "./headers.js";

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

/**
 * Whether `presented` equals `key`, in a time that depends on the length of
 * `presented` alone: every code unit is compared with no early exit, the key is read
 * cyclically so that a guess of any length costs the same as any other guess of that
 * length, and a difference in length is folded into the result.
 */
function constantTimeEquals(presented: string, key: string): boolean {
  let difference = presented.length ^ key.length;
  for (let i = 0; i < presented.length; i++) difference |= presented.charCodeAt(i) ^ key.charCodeAt(i % key.length);
  return difference === 0;
}

/**
 * Builds a verifier over the accepted keys. The presented value is compared with
 * every accepted key in constant time (constantTimeEquals, no early exit over the
 * keys either), so the time tells neither how close a guess came nor which key it
 * came close to; it depends only on the guess's length (bounded by Node's header
 * limit) and the number of keys. This runs on every request, so it is plain
 * arithmetic, with no hash of the presented value.
 * @throws TypeError when there is no key or a key is empty
 */
export function createApiKeyVerifier(acceptedKeys: readonly string[]): ApiKeyVerifier {
  const keys = [...acceptedKeys];
  if (keys.length === 0) throw new TypeError("at least one API key is required");
  if (keys.some((key) => key.length === 0)) throw new TypeError("API keys must not be empty");
  const accepted = keys.map(
    (key, keyIndex) => ({ ok: true, keyIndex, scope: hash("sha256", key, "hex").slice(0, 32) }) as const,
  );
  return {
    check(presented) {
      if (presented === undefined || presented === null || presented === "") {
        return { ok: false, message: MISSING_KEY_MESSAGE };
      }
      let match = -1;
      for (let index = 0; index < keys.length; index++) {
        // Both operands are always evaluated: no key is skipped once one has matched.
        const equal = constantTimeEquals(presented, keys[index]!);
        if (equal && match === -1) match = index;
      }
      return match === -1 ? { ok: false, message: WRONG_KEY_MESSAGE } : accepted[match]!;
    },
  };
}
