import { expect } from "chai";
import fc from "fast-check";
import { SigningKey, Transaction, Wallet, getAddress, hexlify, keccak256 } from "ethers";

import { WasmSigningKey, signEip1559, signEip1559With, toSigner } from "../../../adapters/chain/tx/index.js";

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const privateKey = fc.bigInt({ min: 1n, max: N - 1n }).map((d) => `0x${d.toString(16).padStart(64, "0")}`);
const quantity = (max: bigint) =>
  fc.oneof(fc.bigInt({ min: 0n, max }), fc.constantFrom(0n, 1n, 127n, 128n, 255n, 256n, max));
/** A priority fee above the fee cap is refused, by ethers and by nodes. */
const fees = fc
  .tuple(quantity(2n ** 128n), quantity(2n ** 128n))
  .map(([a, b]): [bigint, bigint] => (a <= b ? [a, b] : [b, a]));
const transaction = fc.record({
  chainId: fc.oneof(fc.constantFrom(1n, 31337n), fc.bigInt({ min: 1n, max: 2n ** 64n - 1n })),
  nonce: fc.oneof(fc.nat({ max: 1000 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })),
  fees,
  gasLimit: quantity(30_000_000n),
  to: fc.uint8Array({ minLength: 20, maxLength: 20 }).map((bytes) => getAddress(hexlify(bytes))),
  value: quantity(2n ** 256n - 1n),
  // Every RLP length form: empty, one byte (below 0x80 it is its own encoding), up to 55
  // bytes, and longer ones with a one- and a two-byte length.
  data: fc
    .oneof(
      fc.uint8Array({ maxLength: 60 }),
      fc.uint8Array({ minLength: 250, maxLength: 600 }),
      fc
        .constantFrom(0, 1, 55, 56, 255, 256)
        .chain((length) => fc.uint8Array({ minLength: length, maxLength: length })),
    )
    .map((bytes) => hexlify(bytes)),
});

describe("signEip1559 (type-2 transactions, signed without ethers' Transaction object)", function () {
  it("makes the same bytes as ethers' Wallet.signTransaction, and their hash (fast-check)", async function () {
    await fc.assert(
      fc.asyncProperty(
        privateKey,
        transaction,
        async (key, { fees: [maxPriorityFeePerGas, maxFeePerGas], ...fields }) => {
          const tx = { ...fields, maxPriorityFeePerGas, maxFeePerGas };
          const ours = signEip1559(new WasmSigningKey(key), tx);
          const theirs = await new Wallet(key).signTransaction({ ...tx, type: 2 });
          expect(ours.rawTx).to.equal(theirs);
          expect(ours.txHash).to.equal(keccak256(theirs));
          const parsed = Transaction.from(ours.rawTx);
          expect(parsed.from).to.equal(new Wallet(key).address);
          expect(parsed.nonce).to.equal(tx.nonce);
        },
      ),
      { numRuns: 200, seed: 20261122 },
    );
  });

  it("works with ethers' own SigningKey as well", function () {
    const key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
    const tx = {
      chainId: 31337n,
      nonce: 0,
      maxPriorityFeePerGas: 1n,
      maxFeePerGas: 2n,
      gasLimit: 21_000n,
      to: "0x5fbdb2315678afecb367f032d93f642f64180aa3",
      value: 0n,
      data: "0x",
    };
    expect(signEip1559(new SigningKey(key), tx)).to.deep.equal(signEip1559(new WasmSigningKey(key), tx));
    expect(Transaction.from(signEip1559(new SigningKey(key), tx).rawTx).to).to.equal(getAddress(tx.to));
  });

  it("refuses fields that would make a different or invalid transaction", function () {
    const key = new WasmSigningKey(`0x${"11".repeat(32)}`);
    const tx = {
      chainId: 1n,
      nonce: 0,
      maxPriorityFeePerGas: 1n,
      maxFeePerGas: 2n,
      gasLimit: 21_000n,
      to: `0x${"22".repeat(20)}`,
      value: 0n,
      data: "0x",
    };
    expect(() => signEip1559(key, { ...tx, nonce: -1 })).to.throw(RangeError, /tx\.nonce/);
    expect(() => signEip1559(key, { ...tx, nonce: 1.5 })).to.throw(RangeError, /tx\.nonce/);
    expect(() => signEip1559(key, { ...tx, gasLimit: -1n })).to.throw(RangeError, /tx\.gasLimit/);
    expect(() => signEip1559(key, { ...tx, maxPriorityFeePerGas: 3n })).to.throw(
      RangeError,
      /tx\.maxPriorityFeePerGas/,
    );
    expect(() => signEip1559(key, { ...tx, value: 2n ** 256n })).to.throw(RangeError, /tx\.value/);
    expect(() => signEip1559(key, { ...tx, to: "0x1234" })).to.throw(TypeError, /tx\.to/);
    expect(() => signEip1559(key, { ...tx, data: "0xabc" })).to.throw(TypeError, /tx\.data/);
    expect(() => signEip1559(key, { ...tx, data: "abcd" })).to.throw(TypeError, /tx\.data/);
  });

  it("refuses a chain id of 0 or below: such a transaction replays on every chain or on none", async function () {
    const key = new WasmSigningKey(`0x${"11".repeat(32)}`);
    const tx = {
      nonce: 0,
      maxPriorityFeePerGas: 1n,
      maxFeePerGas: 2n,
      gasLimit: 21_000n,
      to: `0x${"22".repeat(20)}`,
      value: 0n,
      data: "0x",
    };
    for (const chainId of [0n, -1n, -31337n]) {
      expect(() => signEip1559(key, { ...tx, chainId }), String(chainId)).to.throw(
        RangeError,
        "tx.chainId: must be a positive integer",
      );
      const thrown = await signEip1559With(toSigner(new Wallet(key)), { ...tx, chainId }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(thrown, String(chainId)).to.be.instanceOf(RangeError);
    }
    expect(() => signEip1559(key, { ...tx, chainId: 1n })).not.to.throw();
  });
});
