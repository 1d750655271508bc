import { expect } from "chai";
import fc from "fast-check";
import { SigningKey, Transaction, Wallet, hexlify, recoverAddress } from "ethers";

import { WasmSigningKey } from "../../../adapters/chain/tx/index.js";

/** secp256k1's group order: private keys are 1 … n − 1. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const privateKey = fc.bigInt({ min: 1n, max: N - 1n }).map((d) => `0x${d.toString(16).padStart(64, "0")}`);
const digest = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((bytes) => hexlify(bytes));

describe("WasmSigningKey (libsecp256k1 as WebAssembly)", function () {
  it("signs every digest exactly as ethers' own SigningKey does (fast-check)", function () {
    fc.assert(
      fc.property(privateKey, digest, (key, hash) => {
        const ours = new WasmSigningKey(key).sign(hash);
        const theirs = new SigningKey(key).sign(hash);
        expect(ours.serialized).to.equal(theirs.serialized);
        expect(recoverAddress(hash, ours)).to.equal(new Wallet(key).address);
      }),
      { numRuns: 300, seed: 20261122 },
    );
  });

  it("signs at the edges of the key range", function () {
    for (const key of [`0x${"0".repeat(63)}1`, `0x${(N - 1n).toString(16)}`]) {
      const hash = `0x${"ab".repeat(32)}`;
      expect(new WasmSigningKey(key).sign(hash).serialized).to.equal(new SigningKey(key).sign(hash).serialized);
    }
  });

  it("gives a Wallet the same signed transactions, byte for byte", async function () {
    const key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
    const tx = {
      type: 2,
      chainId: 31337n,
      nonce: 7,
      to: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      data: "0x12345678",
      gasLimit: 250_000n,
      maxFeePerGas: 3_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
      value: 0n,
    };
    const wallet = new Wallet(new WasmSigningKey(key));
    const raw = await wallet.signTransaction(tx);
    expect(raw).to.equal(await new Wallet(key).signTransaction(tx));
    expect(Transaction.from(raw).from).to.equal(wallet.address);
  });

  it("refuses a digest that is not 32 bytes and an invalid key", function () {
    const key = new WasmSigningKey(`0x${"11".repeat(32)}`);
    expect(() => key.sign(`0x${"ab".repeat(31)}`)).to.throw(/digest/);
    expect(() => key.sign(`0x${"ab".repeat(33)}`)).to.throw(/digest/);
    expect(() => new WasmSigningKey(`0x${"11".repeat(31)}`)).to.throw();
    expect(() => new WasmSigningKey(`0x${"00".repeat(32)}`).sign(`0x${"ab".repeat(32)}`)).to.throw();
  });
});
