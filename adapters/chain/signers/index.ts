/**
 * Signers whose keys never enter this process: the PKCS#11 signer (an HSM, or SoftHSM) and the
 * AWS KMS signer, both behind the TransactionSigner port (tx/), with what they share: the
 * recovery of Ethereum's signature from a bare `r`, `s` (recovery.ts), and how they fail at start
 * (naming the variable) and while trading (unavailable, nothing sent). Imports tx/.
 */
export { SignerStartError } from "./errors.js";
export { openKmsSigners, type KmsSignerSettings } from "./kms.js";
export { loadModule as loadPkcs11Module, unloadModule as unloadPkcs11Module } from "./pkcs11-token.js";
export { openPkcs11Signers, type KeyRef, type OpenedSigners, type Pkcs11SignerSettings } from "./pkcs11.js";
export { addressOfEcPoint, addressOfSpki, derSignature, rawSignature, recoverableSignature } from "./recovery.js";
