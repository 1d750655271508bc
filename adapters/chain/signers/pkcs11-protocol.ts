/**
 * The messages between the service and the PKCS#11 signer's own process (pkcs11-process.ts on
 * the service's side, pkcs11-host.ts in the child), over the child's IPC channel as JSON: bytes
 * as hex. Types only.
 */
import type { FailureKind, KeyRef, TokenSettings } from "./pkcs11-token.js";

export interface HostSettings extends TokenSettings {
  keys: readonly KeyRef[];
  keyVariable: string;
}

/** Why the child could not do something: what the parent does about it follows from `kind`. */
export interface Failure {
  kind: FailureKind | "binding";
  variable?: string;
  detail: string;
}

export type ToHost =
  /** First, once: the module, the token, the PIN, the keys. */
  | { type: "open"; settings: HostSettings }
  | { type: "sign"; id: number; key: number; digest: string }
  /** The caller gave up on `id`; the child answers whether the token is still busy with it. */
  | { type: "cancel"; id: number }
  /** At shutdown: the child waits up to `graceMs` for the C_Sign calls in the token, then leaves. */
  | { type: "close"; graceMs: number };

export type FromHost =
  /** The token is open: each key's CKA_EC_POINT, in the order of the keys. */
  | { type: "opened"; name: string; points: string[] }
  | { type: "refused"; failure: Failure }
  | { type: "signed"; id: number; signature: string }
  | { type: "failed"; id: number; failure: Failure }
  /** `inTokenMs`: how long the token has been at it, when it still is. */
  | { type: "cancelled"; id: number; inTokenMs?: number };
