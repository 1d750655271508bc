/**
 * Signs an EIP-1559 (type 2) transaction without an access list: the only kind the
 * service sends.
 *
 * ethers' Wallet.signTransaction builds a Transaction object, resolves and checksums the
 * `to` address twice (a keccak each), serializes the transaction once for the digest and
 * again with the signature, and the caller hashes the result once more for its hash: about
 * 0.3 ms of a trade's CPU besides the signature itself. Here the field list is built once
 * and RLP-encoded twice with ethers' own encoder. The bytes are the same as ethers': the
 * tests compare them for random keys and fields (test/adapters/chain/eip1559.test.ts).
 */
import { type SigningKey, encodeRlp, keccak256, toBeArray } from "ethers";

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

export function signEip1559(key: SigningKey, tx: Eip1559Transaction): SignedTransaction {
  if (!Number.isSafeInteger(tx.nonce) || tx.nonce < 0) throw new RangeError("tx.nonce: must be a non-negative safe integer");
  if (!ADDRESS.test(tx.to)) throw new TypeError("tx.to: must be a 20-byte hex address");
  if (!HEX.test(tx.data)) throw new TypeError("tx.data: must be 0x-prefixed hex of whole bytes");
  if (tx.maxPriorityFeePerGas > tx.maxFeePerGas) throw new RangeError("tx.maxPriorityFeePerGas: must not be more than maxFeePerGas");
  const fields: Array<Uint8Array | string | never[]> = [
    quantity(tx.chainId, "chainId"),
    quantity(tx.nonce, "nonce"),
    quantity(tx.maxPriorityFeePerGas, "maxPriorityFeePerGas"),
    quantity(tx.maxFeePerGas, "maxFeePerGas"),
    quantity(tx.gasLimit, "gasLimit"),
    tx.to,
    quantity(tx.value, "value"),
    tx.data,
    [], // no access list
  ];
  const signature = key.sign(keccak256(`0x02${encodeRlp(fields).slice(2)}`));
  fields.push(toBeArray(signature.yParity), toBeArray(signature.r), toBeArray(signature.s));
  const rawTx = `0x02${encodeRlp(fields).slice(2)}`;
  return { rawTx, txHash: keccak256(rawTx) };
}
