/**
 * How the PKCS#11 token fails, in the signer's own process (pkcs11-token.ts, pkcs11-module.ts),
 * by what the signer does about it (pkcs11-process.ts).
 */

/**
 * What went wrong, by what the signer does about it: `pin`, the token refused the PIN (never
 * offered again); `token`, the token, its slot or the module is gone or broken (a new process may
 * find it again); `key`, a key is missing or not the one it was; `module`, the module cannot be
 * loaded; `sign`, this one signature failed.
 */
export type FailureKind = "pin" | "token" | "key" | "module" | "sign";

export class TokenFailure extends Error {
  override name = "TokenFailure";
  constructor(
    readonly kind: FailureKind,
    /** The setting to fix, when one is to blame. */
    readonly variable: string | undefined,
    message: string,
  ) {
    super(message);
  }
}
