/**
 * Signs an EIP-1559 (type 2) transaction without an access list: the only kind the
 * service sends.
 *
 * ethers' Wallet.signTransaction builds a Transaction object, resolves and checksums the
 * `to` address twice (a keccak each), serializes the transaction once for the digest and
 * again with the signature, through hex strings, and the caller hashes the result once
 * more for its hash (docs/decisions/0002-eip1559-serialization.md). Here the
 * fields are RLP-encoded once, as bytes; the signed form is the same encoded fields under a
 * longer list header, followed by the signature's three. The bytes are the same as ethers':
 * the tests compare them for random keys and fields (test/adapters/chain/eip1559.test.ts).
 *
 * RLP (Ethereum's yellow paper, appendix B) as used here: a byte string of one byte below
 * 0x80 is itself; a longer one up to 55 bytes is 0x80 + length, then the bytes; beyond
 * that, 0xb7 + the length's own length, the length, then the bytes. A list is the same
 * with 0xc0 and 0xf7 over its encoded items.
 */
import { keccak_256 } from "@noble/hashes/sha3.js";
import { type Signature, toBeArray } from "ethers";

import { assertSignedBy, isLocalSigner, type SignOptions, type TransactionSigner } from "./signer.js";

export interface Eip1559Transaction {
  chainId: bigint;
  nonce: number;
  maxPriorityFeePerGas: bigint;
  maxFeePerGas: bigint;
  gasLimit: bigint;
  /** The callee: a 20-byte hex address (not checksum-checked: the service's addresses are). */
  to: string;
  value: bigint;
  /** Calldata, 0x-prefixed hex. */
  data: string;
}

export interface SignedTransaction {
  /** The signed transaction as eth_sendRawTransaction takes it. */
  rawTx: string;
  /** Its hash: keccak256 of `rawTx`. */
  txHash: string;
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HEX = /^0x(?:[0-9a-fA-F]{2})*$/;
/** Quantities are at most 32 bytes, as in ethers (and the chain). */
const MAX_QUANTITY = 2n ** 256n - 1n;

function quantity(value: bigint | number, name: string): Uint8Array {
  const n = BigInt(value);
  if (n < 0n || n > MAX_QUANTITY) throw new RangeError(`tx.${name}: must be an unsigned 256-bit integer`);
  return toBeArray(n);
}

/** The RLP header of a string (0x80) or list (0xc0) whose content is `length` bytes. */
function rlpHeader(length: number, offset: 0x80 | 0xc0): Buffer {
  if (length <= 55) return Buffer.of(offset + length);
  const size = toBeArray(length);
  return Buffer.concat([Buffer.of(offset + 55 + size.length), size]);
}

/** A byte string, RLP-encoded. */
function rlpString(bytes: Uint8Array): Buffer {
  if (bytes.length === 1 && bytes[0]! < 0x80) return Buffer.from(bytes);
  return Buffer.concat([rlpHeader(bytes.length, 0x80), bytes]);
}

/** 0x02 (the type), then the RLP list of the given encoded items. */
function typed(items: readonly Buffer[]): Buffer {
  const length = items.reduce((sum, item) => sum + item.length, 0);
  return Buffer.concat([Buffer.of(0x02), rlpHeader(length, 0xc0), ...items]);
}

const EMPTY_LIST = Buffer.of(0xc0);

/** Signs with a key in memory, synchronously (an ethers SigningKey or WasmSigningKey). */
export function signEip1559(key: { sign(digest: Uint8Array): Signature }, tx: Eip1559Transaction): SignedTransaction {
  const fields = encodeFields(tx);
  return withSignature(fields, key.sign(keccak_256(typed(fields))));
}

/**
 * Signs through the signer port (a raw key, a keystore's key, or a remote signer). A remote
 * signer's answer is checked first (low `s`, recovers to its address): every transaction the
 * service sends is signed here, so a bad signature never reaches a node.
 * @throws SignatureRefusedError when a remote signer's signature is not the wallet's
 */
export async function signEip1559With(
  signer: TransactionSigner,
  tx: Eip1559Transaction,
  options?: SignOptions,
): Promise<SignedTransaction> {
  const fields = encodeFields(tx);
  const digest = keccak_256(typed(fields));
  const signature = await signer.signDigest(digest, options);
  if (!isLocalSigner(signer)) assertSignedBy(signer.address, digest, signature);
  return withSignature(fields, signature);
}

/** The unsigned transaction's RLP-encoded fields, checked. */
function encodeFields(tx: Eip1559Transaction): Buffer[] {
  // Chain ids start at 1: a 0 or a negative one comes from a misconfiguration, never from a chain.
  if (BigInt(tx.chainId) <= 0n) throw new RangeError("tx.chainId: must be a positive integer");
  if (!Number.isSafeInteger(tx.nonce) || tx.nonce < 0)
    throw new RangeError("tx.nonce: must be a non-negative safe integer");
  if (!ADDRESS.test(tx.to)) throw new TypeError("tx.to: must be a 20-byte hex address");
  if (!HEX.test(tx.data)) throw new TypeError("tx.data: must be 0x-prefixed hex of whole bytes");
  if (tx.maxPriorityFeePerGas > tx.maxFeePerGas)
    throw new RangeError("tx.maxPriorityFeePerGas: must not be more than maxFeePerGas");
  return [
    rlpString(quantity(tx.chainId, "chainId")),
    rlpString(quantity(tx.nonce, "nonce")),
    rlpString(quantity(tx.maxPriorityFeePerGas, "maxPriorityFeePerGas")),
    rlpString(quantity(tx.maxFeePerGas, "maxFeePerGas")),
    rlpString(quantity(tx.gasLimit, "gasLimit")),
    rlpString(Buffer.from(tx.to.slice(2), "hex")),
    rlpString(quantity(tx.value, "value")),
    rlpString(Buffer.from(tx.data.slice(2), "hex")),
    EMPTY_LIST, // no access list
  ];
}

function withSignature(fields: readonly Buffer[], signature: Signature): SignedTransaction {
  const signed = typed([
    ...fields,
    rlpString(toBeArray(signature.yParity)),
    rlpString(toBeArray(signature.r)),
    rlpString(toBeArray(signature.s)),
  ]);
  return { rawTx: `0x${signed.toString("hex")}`, txHash: `0x${Buffer.from(keccak_256(signed)).toString("hex")}` };
}
