/**
 * What a key outside this process answers, made into what Ethereum takes: an HSM's `r‖s` or a
 * KMS's DER signature has no recovery id and may have a high `s`. `s` is normalised to the lower
 * half (EIP-2), then the recovery id is found by recovering each candidate and keeping the one
 * whose address is the wallet's. And the public key an HSM or KMS gives (a DER-wrapped EC point,
 * a SubjectPublicKeyInfo), made into the wallet's address.
 */
import { computeAddress, hexlify, Signature } from "ethers";
import { recover } from "tiny-secp256k1";

import { SignatureRefusedError } from "../tx/index.js";
import { SECP256K1_OID } from "./curve.js";

/** secp256k1's group order. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

const toHex32 = (n: bigint) => `0x${n.toString(16).padStart(64, "0")}`;

/**
 * The recoverable signature of `digest` by `address`'s key, from the signer's `r` and `s`.
 * @throws SignatureRefusedError when `r` or `s` is out of range, or neither recovery id
 *   recovers to `address` (the key signs for another address)
 */
export function recoverableSignature(address: string, digest: Uint8Array, r: bigint, s: bigint): Signature {
  const refuse = (why: string) =>
    new SignatureRefusedError(`the signer of ${address} answered a signature that ${why}: nothing is sent`);
  if (r <= 0n || r >= N || s <= 0n || s >= N) throw refuse("is out of range");
  const low = s > N / 2n ? N - s : s;
  const bytes = Buffer.alloc(64);
  bytes.write(toHex32(r).slice(2), 0, "hex");
  bytes.write(toHex32(low).slice(2), 32, "hex");
  const wanted = address.toLowerCase();
  let recovered = "";
  for (const parity of [0, 1] as const) {
    const point = recover(digest, bytes, parity, false);
    if (point === null) continue;
    recovered = computeAddress(hexlify(point));
    if (recovered.toLowerCase() === wanted) return Signature.from({ r: toHex32(r), s: toHex32(low), v: 27 + parity });
  }
  throw refuse(recovered === "" ? "recovers to no key" : `recovers to ${recovered}, not to the wallet`);
}

/** A DER reader over one buffer: a tag, a length, then the content. */
function readTlv(der: Uint8Array, at: number, tag: number, what: string): { content: Uint8Array; end: number } {
  if (der[at] !== tag) throw new Error(`${what}: expected DER tag 0x${tag.toString(16)} at byte ${at}`);
  let length = der[at + 1];
  let start = at + 2;
  if (length === undefined) throw new Error(`${what}: truncated`);
  if (length & 0x80) {
    const size = length & 0x7f;
    if (size === 0 || size > 2) throw new Error(`${what}: unsupported DER length`);
    length = 0;
    for (let i = 0; i < size; i++) length = (length << 8) | (der[start + i] ?? 0);
    start += size;
  }
  const end = start + length;
  if (end > der.length) throw new Error(`${what}: truncated`);
  return { content: der.subarray(start, end), end };
}

const bigintOf = (bytes: Uint8Array) => (bytes.length === 0 ? 0n : BigInt(hexlify(bytes)));

/**
 * `r` and `s` of a DER ECDSA signature (SEQUENCE { INTEGER r, INTEGER s }), as AWS KMS answers it.
 * @throws Error when it is not one
 */
export function derSignature(der: Uint8Array): { r: bigint; s: bigint } {
  const sequence = readTlv(der, 0, 0x30, "signature");
  if (sequence.end !== der.length) throw new Error("signature: bytes after the DER sequence");
  const r = readTlv(sequence.content, 0, 0x02, "signature r");
  const s = readTlv(sequence.content, r.end, 0x02, "signature s");
  if (s.end !== sequence.content.length) throw new Error("signature: more than two integers");
  return { r: bigintOf(r.content), s: bigintOf(s.content) };
}

/** `r` and `s` of a PKCS#11 CKM_ECDSA signature: 64 bytes, `r‖s`. */
export function rawSignature(bytes: Uint8Array): { r: bigint; s: bigint } {
  if (bytes.length !== 64) throw new Error(`signature: expected 64 bytes r‖s, got ${bytes.length}`);
  return { r: bigintOf(bytes.subarray(0, 32)), s: bigintOf(bytes.subarray(32)) };
}

/** The address of an uncompressed secp256k1 point (`04‖x‖y`). */
function addressOfPoint(point: Uint8Array, what: string): string {
  if (point.length !== 65 || point[0] !== 0x04) throw new Error(`${what}: not an uncompressed point (04‖x‖y)`);
  return computeAddress(hexlify(point));
}

/**
 * The address of a PKCS#11 key's CKA_EC_POINT: a DER OCTET STRING around `04‖x‖y`
 * (`04 41 04‖x‖y`); some modules answer the bare point, which is taken too.
 */
export function addressOfEcPoint(ecPoint: Uint8Array): string {
  if (ecPoint.length === 65) return addressOfPoint(ecPoint, "CKA_EC_POINT");
  const octets = readTlv(ecPoint, 0, 0x04, "CKA_EC_POINT");
  return addressOfPoint(octets.content, "CKA_EC_POINT");
}

/**
 * The address of a DER SubjectPublicKeyInfo for secp256k1 (what KMS GetPublicKey answers):
 * SEQUENCE { SEQUENCE { OID ecPublicKey, OID secp256k1 }, BIT STRING 00‖04‖x‖y }.
 * @throws Error when it is not a secp256k1 key
 */
export function addressOfSpki(spki: Uint8Array): string {
  const outer = readTlv(spki, 0, 0x30, "public key");
  const algorithm = readTlv(outer.content, 0, 0x30, "public key algorithm");
  const params = algorithm.content.subarray(algorithm.content.length - SECP256K1_OID.length);
  if (Buffer.compare(Buffer.from(params), Buffer.from(SECP256K1_OID)) !== 0)
    throw new Error("public key: not on secp256k1 (ECC_SECG_P256K1)");
  const bits = readTlv(outer.content, algorithm.end, 0x03, "public key bits");
  if (bits.content[0] !== 0) throw new Error("public key: unused bits in the key");
  return addressOfPoint(bits.content.subarray(1), "public key");
}
