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

/**
 * What to do when the binding is missing: pkcs11js is an optional dependency (it compiles with
 * node-gyp at install, which fails quietly where no compiler is), loaded only for SIGNER=pkcs11.
 */
export const PKCS11JS_MISSING =
  "pkcs11 needs the npm package pkcs11js, an optional dependency that compiles at install and is not installed here: " +
  "install a C++ compiler, make and Python (on Debian: apt-get install -y build-essential python3), then npm install pkcs11js";

/** Whether `error` is Node's answer to importing pkcs11js where it is not installed. */
export function isPkcs11jsMissing(error: unknown): boolean {
  return (error as { code?: string }).code === "ERR_MODULE_NOT_FOUND" && /pkcs11js/.test(String(error));
}
