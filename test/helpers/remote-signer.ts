/**
 * Signers outside this service, as a KMS or Vault adapter is one: objects of their own behind
 * the TransactionSigner port, which may answer a signature the wallet's key never made.
 */
import { toBeHex, type Signature, type SigningKey } from "ethers";

import type { TransactionSigner } from "../../adapters/chain/index.js";

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** Claims `address`; `signDigest` answers what `answer` makes of the signature `key` makes. */
export function remoteSigner(
  address: string,
  key: { readonly signingKey: SigningKey },
  answer: (signature: Signature) => Signature = (signature) => signature,
): TransactionSigner {
  return { address, signDigest: async (digest) => answer(key.signingKey.sign(digest)) };
}

/**
 * The same signature with `s` in the upper half (n - s, the other parity): valid for
 * secp256k1 and recovering to the same key, refused by Ethereum (EIP-2). A plain object, as a
 * hand-written KMS adapter may answer: ethers' Signature refuses most such values itself.
 */
export function withHighS(signature: Signature): Signature {
  return {
    r: signature.r,
    s: toBeHex(N - BigInt(signature.s), 32),
    yParity: signature.yParity === 0 ? 1 : 0,
  } as unknown as Signature;
}
