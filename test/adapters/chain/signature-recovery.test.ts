/**
 * A remote signer's `r`, `s` made into Ethereum's signature (adapters/chain/signers/recovery.ts),
 * at its edges. Any (r, s, digest) with r a point's x recovers to some key, so the edge values
 * are made exactly: s = (n-1)/2 (the highest low s), s = (n+1)/2 (the lowest high s), r of one
 * byte (short DER integers), r and s with the top bit set (DER's leading 0x00), long-form DER
 * lengths.
 */
import { expect } from "chai";
import { Transaction, computeAddress, getBytes, hexlify, randomBytes, recoverAddress } from "ethers";
import { recover } from "tiny-secp256k1";

import { derSignature, rawSignature, recoverableSignature } from "../../../adapters/chain/signers/index.js";
import { signEip1559With, type TransactionSigner } from "../../../adapters/chain/tx/index.js";

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const hex32 = (n: bigint) => n.toString(16).padStart(64, "0");
const bytes64 = (r: bigint, s: bigint) => Buffer.from(hex32(r) + hex32(s), "hex");

/** The address that (r, s) over `digest` recovers to with `parity`, or undefined (r no point's x). */
function keyOf(digest: Uint8Array, r: bigint, s: bigint, parity: 0 | 1): string | undefined {
  const point = recover(digest, bytes64(r, s), parity, false);
  return point === null ? undefined : computeAddress(hexlify(point));
}

function derInt(n: bigint, pad = false): Buffer {
  let h = n.toString(16);
  if (h.length % 2) h = `0${h}`;
  let b = Buffer.from(h, "hex");
  if (pad || b[0]! & 0x80) b = Buffer.concat([Buffer.of(0), b]);
  return Buffer.concat([Buffer.of(0x02, b.length), b]);
}

describe("signature recovery of a remote signer's r and s, at the edges", function () {
  const digest = getBytes(randomBytes(32));
  // A small r that is a point's x: DER writes it in one byte.
  let smallR = 1n;
  while (keyOf(digest, smallR, 5n, 0) === undefined) smallR += 1n;

  it("keeps s = (n-1)/2 as it is, and takes s = (n+1)/2 to (n-1)/2 with the other parity", function () {
    const s = (N - 1n) / 2n;
    const address = keyOf(digest, smallR, s, 0)!;
    const kept = recoverableSignature(address, digest, smallR, s);
    expect(BigInt(kept.s)).to.equal(s);
    expect(recoverAddress(digest, kept)).to.equal(address);
    const flipped = recoverableSignature(address, digest, smallR, N - s);
    expect(BigInt(flipped.s)).to.equal(s);
    expect(flipped.yParity).to.equal(kept.yParity);
  });

  it("reads short, padded and long-form DER integers, and signs a transaction ethers reads back", async function () {
    const s = (N + 1n) / 2n; // high: normalised
    const address = keyOf(digest, smallR, N - s, 1)!;
    const shapes = [
      Buffer.concat([Buffer.of(0x30), Buffer.of(derInt(smallR).length + derInt(s).length), derInt(smallR), derInt(s)]),
      // non-minimal: r with a needless 0x00, the sequence's length in long form (0x81)
      (() => {
        const body = Buffer.concat([derInt(smallR, true), derInt(s)]);
        return Buffer.concat([Buffer.of(0x30, 0x81, body.length), body]);
      })(),
    ];
    for (const der of shapes) {
      const { r, s: read } = derSignature(der);
      expect([r, read]).to.deep.equal([smallR, s]);
      const signature = recoverableSignature(address, digest, r, read);
      expect(recoverAddress(digest, signature)).to.equal(address);
    }
    expect(rawSignature(bytes64(smallR, s))).to.deep.equal({ r: smallR, s });
    // Through the encoder's own check (assertSignedBy) with a real transaction's digest.
    let captured: Uint8Array | undefined;
    const probe: TransactionSigner = {
      address,
      signDigest: async (d) => {
        captured = d;
        throw new Error("probe");
      },
    };
    const tx = {
      chainId: 31337n,
      nonce: 0,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      gasLimit: 21_000n,
      to: address,
      value: 0n,
      data: "0x",
    };
    await signEip1559With(probe, tx).catch(() => {});
    const txAddress = keyOf(captured!, smallR, (N - 1n) / 2n, 0)!;
    const signed = await signEip1559With(
      { address: txAddress, signDigest: async (d) => recoverableSignature(txAddress, d, smallR, (N + 1n) / 2n) },
      tx,
    );
    expect(Transaction.from(signed.rawTx).from).to.equal(txAddress);
  });

  it("refuses r or s of 0 or n, and a signature of another key", function () {
    const address = keyOf(digest, smallR, 5n, 0)!;
    for (const [r, s] of [
      [0n, 5n],
      [smallR, 0n],
      [N, 5n],
      [smallR, N],
    ] as const)
      expect(() => recoverableSignature(address, digest, r, s)).to.throw(/out of range/);
    expect(() => recoverableSignature("0x000000000000000000000000000000000000dEaD", digest, smallR, 5n)).to.throw(
      /not to the wallet/,
    );
  });
});
