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
 * The signers whose keys never enter this process implement the same interface
 * (adapters/chain/signers/: PKCS#11 for an HSM, AWS KMS): `address` from the key's public key,
 * `signDigest` by asking the HSM or KMS for an ECDSA signature of the digest, then normalising `s`
 * to the lower half and finding the recovery bit by recovering the address. It is asynchronous
 * for that reason. What such a signer answers is checked again before it goes into a transaction
 * (assertSignedBy): a high `s`, or a signature that recovers to another address, is refused, and
 * nothing is sent.
 * The local key's signatures are its own, and are not checked again.
 */
import {
  computeAddress,
  decryptKeystoreJson,
  getBytes,
  hexlify,
  isKeystoreJson,
  type Signature,
  type SigningKey,
} from "ethers";
import { recover } from "tiny-secp256k1";

import { WasmSigningKey } from "./signing-key.js";

/** How a signature is asked for. */
export interface SignOptions {
  /**
   * When the trade first asked for this signature (Date.now() ms): a remote signer's budget
   * (SIGNER_TIMEOUT_MS) counts from then, so a signature asked for again (at another nonce, in
   * the same round) does not start a new one. Unset: now.
   */
  startedAt?: number;
}

export interface TransactionSigner {
  /** The checksummed address whose transactions this signs. */
  readonly address: string;
  /** Signs a 32-byte digest: a recoverable secp256k1 signature with a low `s`. */
  signDigest(digest: Uint8Array, options?: SignOptions): Promise<Signature>;
  /**
   * How many signatures it serves well at once (a remote signer's sessions or connections): the
   * send queue asks for that many of a round at a time. Unset: one at a time (a local key signs
   * synchronously, so asking for more gains nothing).
   */
  readonly concurrency?: number;
}

/** A signer over a key held in memory. */
export function rawKeySigner(privateKey: string): TransactionSigner {
  return keySigner(new WasmSigningKey(privateKey));
}

/** The signers over a key in this process (keySigner's): their signatures need no check. */
const LOCAL_SIGNERS = new WeakSet<TransactionSigner>();

/** A signer over an ethers SigningKey (tests hand in ethers Wallets; the service a WasmSigningKey). */
function keySigner(key: SigningKey): TransactionSigner {
  const signer: TransactionSigner = {
    address: computeAddress(key.publicKey),
    signDigest: (digest) => Promise.resolve(key.sign(digest)),
  };
  LOCAL_SIGNERS.add(signer);
  return signer;
}

/** Whether `signer` signs with a key in this process (a raw key, a keystore's, an ethers Wallet's). */
export function isLocalSigner(signer: TransactionSigner): boolean {
  return LOCAL_SIGNERS.has(signer);
}

/** A signature a signer answered that must not go into a transaction: the message names the wallet, never a key. */
export class SignatureRefusedError extends Error {
  override name = "SignatureRefusedError";
}

/** secp256k1's group order. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * Checks a signature of `digest` a signer answered for `address`: `r` and `s` in range, `s` in
 * the lower half (EIP-2: nodes refuse a high `s`), and the signature recovering to `address`.
 * @throws SignatureRefusedError naming the wallet (and the address it recovers to)
 */
export function assertSignedBy(address: string, digest: Uint8Array, signature: Signature): void {
  const refuse = (why: string) =>
    new SignatureRefusedError(`the signer of ${address} answered a signature that ${why}: nothing is sent`);
  let r: bigint;
  let s: bigint;
  try {
    r = BigInt(signature.r);
    s = BigInt(signature.s);
  } catch {
    throw refuse("cannot be read");
  }
  const parity = signature.yParity;
  if (r <= 0n || r >= N || s <= 0n || s >= N || (parity !== 0 && parity !== 1)) throw refuse("is out of range");
  if (s > N / 2n) throw refuse("has a high s (EIP-2 wants s in the lower half)");
  const bytes = new Uint8Array(64);
  bytes.set(getBytes(`0x${r.toString(16).padStart(64, "0")}`), 0);
  bytes.set(getBytes(`0x${s.toString(16).padStart(64, "0")}`), 32);
  const publicKey = recover(digest, bytes, parity, false);
  if (publicKey === null) throw refuse("recovers to no key");
  const recovered = computeAddress(hexlify(publicKey));
  if (recovered.toLowerCase() !== address.toLowerCase()) throw refuse(`recovers to ${recovered}`);
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
