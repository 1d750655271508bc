/**
 * Transaction signing with libsecp256k1 (compiled to WebAssembly, from tiny-secp256k1)
 * instead of ethers' pure-JS noble-curves.
 *
 * Each trade is signed on the service's event loop, so a signature's CPU is taken from every
 * other request (docs/decisions/0001-wasm-signing-key.md). This key is a drop-in ethers
 * SigningKey: `new Wallet(new
 * WasmSigningKey(key))` signs the same bytes, because both libraries make deterministic
 * RFC 6979 signatures with a low `s` (the tests compare them for random keys and
 * digests). Only `sign` changes; the public key, address and ECDH stay ethers'.
 */
import { Signature, SigningKey, getBytes, hexlify, type BytesLike } from "ethers";
import { signRecoverable } from "tiny-secp256k1";

export class WasmSigningKey extends SigningKey {
  readonly #secret: Uint8Array;

  /** @throws when the key is not 32 bytes, or is not a valid secp256k1 private key */
  constructor(privateKey: BytesLike) {
    super(privateKey);
    this.#secret = getBytes(this.privateKey);
  }

  /**
   * Signs a 32-byte digest.
   * @throws when the digest is not 32 bytes
   */
  override sign(digest: BytesLike): Signature {
    const hash = getBytes(digest, "digest");
    if (hash.length !== 32) throw new TypeError(`digest: must be 32 bytes, got ${hash.length}`);
    const { signature, recoveryId } = signRecoverable(hash, this.#secret);
    return Signature.from({
      r: hexlify(signature.subarray(0, 32)),
      s: hexlify(signature.subarray(32)),
      v: 27 + recoveryId,
    });
  }
}
