/**
 * Signers whose keys never enter this process: the PKCS#11 signer (an HSM, or SoftHSM) and the
 * AWS KMS signer, both behind the TransactionSigner port (tx/), with what they share: the
 * recovery of Ethereum's signature from a bare `r`, `s` (recovery.ts), and how they fail at start
 * (naming the variable) and while trading (unavailable, nothing sent). Imports tx/.
 *
 * The PKCS#11 binding and the AWS SDK are loaded only when a signer of theirs is opened: a service
 * whose key is in memory never loads them (the SDK alone costs about 100 ms at start). The binding,
 * pkcs11js, is an optional dependency (it compiles at install): where it is missing, SIGNER=pkcs11
 * stops the start saying what to install.
 */
import type pkcs11js from "pkcs11js";

import type { KmsSignerSettings } from "./kms.js";
import type { OpenedSigners, Pkcs11SignerSettings } from "./pkcs11.js";
import { isPkcs11jsMissing, PKCS11JS_MISSING } from "./pkcs11-failure.js";

export { SignerStartError } from "./errors.js";
export type { KmsSignerSettings } from "./kms.js";
export type { KeyRef, OpenedSigners, Pkcs11SignerSettings, SignerLog } from "./pkcs11.js";
export { addressOfEcPoint, addressOfSpki, derSignature, rawSignature, recoverableSignature } from "./recovery.js";

/**
 * Opens the token and one signer per key (pkcs11.ts).
 * @throws SignerStartError naming the variable to fix
 */
export async function openPkcs11Signers(settings: Pkcs11SignerSettings): Promise<OpenedSigners> {
  return (await import("./pkcs11.js")).openPkcs11Signers(settings);
}

/**
 * One signer per KMS key, each checked against its wallet's address (kms.ts).
 * @throws SignerStartError naming the variable to fix
 */
export async function openKmsSigners(settings: KmsSignerSettings): Promise<OpenedSigners> {
  return (await import("./kms.js")).openKmsSigners(settings);
}

/**
 * The PKCS#11 modules of this process, loaded once each and shared, and the binding's constants:
 * for set-up scripts and tests (the signers use the token from a process of their own,
 * pkcs11-process.ts).
 * @throws Error saying what to install when the optional binding pkcs11js is missing
 */
export async function pkcs11Modules(): Promise<{
  load(path: string): pkcs11js.PKCS11;
  unload(path: string): void;
  pkcs11js: typeof pkcs11js;
}> {
  try {
    const [module, binding] = await Promise.all([import("./pkcs11-module.js"), import("pkcs11js")]);
    return { load: module.loadModule, unload: module.unloadModule, pkcs11js: binding.default };
  } catch (error) {
    if (isPkcs11jsMissing(error)) throw new Error(PKCS11JS_MISSING);
    throw error;
  }
}
