/**
 * The records bench's A/B switch for decision 0002 (docs/decisions/0002-eip1559-serialization.md):
 * loaded in place of eip1559.ts in the bench's service process only (adapters/shared/records.ab.ts
 * says how). With the switch on, a transaction is signed as ethers' `Wallet.signTransaction`
 * signs it (a copy of the request, its `to` resolved, a `Transaction` built, its unsigned hash
 * signed, serialized with the signature) and hashed with `keccak256`, as the bench:micro bench
 * compares them; the digest is signed through the signer port, as in the service, so the key
 * (decision 0001) is the same on both sides. Off, by `signEip1559With`.
 *
 * Each signing is counted and timed on the event loop, the signature included, without the
 * waits between its parts: ethers' parts are timed one by one; the service's function is timed
 * up to its await of the signature (which the local key computes before it returns), and its
 * last part from a microtask queued just before the call, which runs right before that part.
 */
import {
  Transaction,
  copyRequest,
  getBytes,
  keccak256,
  resolveAddress,
  resolveProperties,
  type TransactionLike,
} from "ethers";

import { tally, usesLibrary } from "../../shared/records.ab.js";
import { signEip1559With as replacement, type Eip1559Transaction, type SignedTransaction } from "./eip1559.js";
import { assertSignedBy, isLocalSigner, type TransactionSigner } from "./signer.js";

export { signEip1559, type Eip1559Transaction, type SignedTransaction } from "./eip1559.js";

export async function signEip1559With(signer: TransactionSigner, tx: Eip1559Transaction): Promise<SignedTransaction> {
  return usesLibrary("0002") ? signAsEthers(signer, tx) : timedReplacement(signer, tx);
}

async function timedReplacement(signer: TransactionSigner, tx: Eip1559Transaction): Promise<SignedTransaction> {
  let lastPartStarted = 0;
  queueMicrotask(() => {
    lastPartStarted = performance.now();
  });
  const started = performance.now();
  const pending = replacement(signer, tx);
  const firstPartMs = performance.now() - started;
  const signed = await pending;
  tally("0002 sign", 1, firstPartMs + (performance.now() - lastPartStarted));
  return signed;
}

/** BaseWallet.signTransaction (ethers 6), its key's `sign` replaced by the signer port. */
async function signAsEthers(signer: TransactionSigner, tx: Eip1559Transaction): Promise<SignedTransaction> {
  let started = performance.now();
  const request = copyRequest({ ...tx, type: 2 });
  const resolving = resolveProperties({ to: request.to ? resolveAddress(request.to) : undefined });
  let ms = performance.now() - started;
  const { to } = await resolving;

  started = performance.now();
  if (to != null) request.to = to;
  // As BaseWallet does: the request, its `to` now an address, is a TransactionLike.
  const btx = Transaction.from(request as TransactionLike<string>);
  const digest = getBytes(btx.unsignedHash);
  const signing = signer.signDigest(digest);
  ms += performance.now() - started;
  const signature = await signing;

  started = performance.now();
  if (!isLocalSigner(signer)) assertSignedBy(signer.address, digest, signature);
  btx.signature = signature;
  const rawTx = btx.serialized;
  const signed = { rawTx, txHash: keccak256(rawTx) };
  tally("0002 sign", 1, ms + (performance.now() - started));
  return signed;
}
