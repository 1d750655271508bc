/**
 * The signer port: every transaction the service sends (trades, replacements, no-ops) is
 * signed through `TransactionSigner`, so where the key lives is one adapter's business.
 *
 * Two adapters here:
 * - `rawKeySigner`: a private key in memory (EXCHANGE_PRIVATE_KEYS), signed with
 *   libsecp256k1 compiled to WebAssembly (signing-key.ts), the service's fast path;
 * - `keystoreSigner`: an encrypted JSON keystore (Web3 Secret Storage v3, as geth,
 *   `cast wallet` and ethers write it), decrypted once at start with its password, then
 *   signing like the raw key. The key never sits in plain text on disk or in the
 *   environment.
 *
 * A KMS or Vault signer implements the same interface: `address` from the key's public key,
 * `signDigest` by calling the service (AWS KMS `Sign` with ECDSA_SHA_256 over the digest, or
 * Vault's transit `sign` with `prehashed=true`), then normalising `s` to the lower half and
 * finding the recovery bit by recovering the address. It is asynchronous for that reason.
 */
import { computeAddress, decryptKeystoreJson, isKeystoreJson, type Signature, type SigningKey } from "ethers";

import { WasmSigningKey } from "./signing-key.js";

export interface TransactionSigner {
  /** The checksummed address whose transactions this signs. */
  readonly address: string;
  /** Signs a 32-byte digest: a recoverable secp256k1 signature with a low `s`. */
  signDigest(digest: Uint8Array): Promise<Signature>;
}

/** A signer over a key held in memory. */
export function rawKeySigner(privateKey: string): TransactionSigner {
  return keySigner(new WasmSigningKey(privateKey));
}

/** A signer over an ethers SigningKey (tests hand in ethers Wallets; the service a WasmSigningKey). */
function keySigner(key: SigningKey): TransactionSigner {
  return { address: computeAddress(key.publicKey), signDigest: (digest) => Promise.resolve(key.sign(digest)) };
}

/** A wrong password or a damaged file: the message says which file, never the password. */
export class KeystoreError extends Error {
  override name = "KeystoreError";
}

/**
 * Decrypts a Web3 Secret Storage v3 keystore (scrypt or pbkdf2, aes-128-ctr) once.
 * @param source names the keystore in errors (its path)
 * @throws KeystoreError when the JSON is not a keystore, the password is wrong, or the
 *   address in the file does not match the key
 */
export async function keystoreSigner(
  json: string,
  password: string,
  source = "the keystore",
): Promise<TransactionSigner> {
  if (!isKeystoreJson(json)) throw new KeystoreError(`${source} is not a JSON keystore (Web3 Secret Storage v3)`);
  let privateKey: string;
  try {
    ({ privateKey } = await decryptKeystoreJson(json, password));
  } catch (error) {
    const message = (error as Error).message;
    if (/password|mac/i.test(message)) throw new KeystoreError(`${source} could not be decrypted: wrong password`);
    throw new KeystoreError(`${source} could not be decrypted: ${message.split("(")[0]!.trim()}`);
  }
  return rawKeySigner(privateKey);
}

/** The service's signer for a wallet given either way: a TransactionSigner as is, an ethers Wallet by its key. */
export function toSigner(wallet: TransactionSigner | { readonly signingKey: SigningKey }): TransactionSigner {
  return "signDigest" in wallet ? wallet : keySigner(wallet.signingKey);
}
