import { expect } from "chai";
import fc from "fast-check";
import { Interface, MaxUint256, getAddress, hexlify } from "ethers";

import { ERC20_ABI, SWAP_ABI, staticCallEncoder } from "../../../adapters/chain/tx/index.js";

const swap = new Interface(SWAP_ABI);
const erc20 = new Interface(ERC20_ABI);
/** Checksummed, as the core hands addresses over. */
const address = fc.uint8Array({ minLength: 20, maxLength: 20 }).map((bytes) => getAddress(hexlify(bytes)));
const uint256 = fc.oneof(fc.bigInt({ min: 0n, max: MaxUint256 }), fc.constantFrom(0n, 1n, MaxUint256, 2n ** 255n));

describe("staticCallEncoder (calldata of address/uint256-only functions)", function () {
  for (const name of ["sell", "buy", "buyAndRemit"]) {
    it(`encodes TokenSwap.${name} exactly as ethers' Interface does (fast-check)`, function () {
      const encode = staticCallEncoder(swap, name);
      fc.assert(
        fc.property(address, uint256, address, uint256, uint256, (stable, amount, to, minOut, deadline) => {
          const args = [stable, amount, to, minOut, deadline] as const;
          expect(encode(args)).to.equal(swap.encodeFunctionData(name, args));
        }),
        { numRuns: 300, seed: 20261122 },
      );
    });
  }

  it("encodes ERC-20 approve and allowance the same way, whatever the address's case", function () {
    fc.assert(
      fc.property(address, uint256, address, (spender, value, owner) => {
        expect(staticCallEncoder(erc20, "approve")([spender.toLowerCase(), value])).to.equal(
          erc20.encodeFunctionData("approve", [spender, value]),
        );
        expect(staticCallEncoder(erc20, "allowance")([owner, spender])).to.equal(
          erc20.encodeFunctionData("allowance", [owner, spender]),
        );
      }),
      { numRuns: 100, seed: 7 },
    );
  });

  it("refuses a function with any other parameter type, when the encoder is made", function () {
    const other = new Interface(["function f(address a, bytes b)", "function g(uint8 x)", "function h(int256 x)"]);
    for (const name of ["f", "g", "h"])
      expect(() => staticCallEncoder(other, name)).to.throw(TypeError, /not a static address or uint256/);
    expect(() => staticCallEncoder(swap, "nope")).to.throw(TypeError, /nope: not in the ABI/);
  });

  it("refuses arguments that are not what the ABI says, instead of encoding garbage", function () {
    const encode = staticCallEncoder(swap, "sell");
    const to = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
    expect(() => encode([to, 1n, to, 0n])).to.throw(TypeError, /expected 5 arguments, got 4/);
    expect(() => encode([to, -1n, to, 0n, 0n])).to.throw(RangeError, /argument 1 is not a uint256/);
    expect(() => encode([to, MaxUint256 + 1n, to, 0n, 0n])).to.throw(RangeError, /argument 1 is not a uint256/);
    expect(() => encode([to, "1", to, 0n, 0n])).to.throw(RangeError, /argument 1 is not a uint256/);
    expect(() => encode([to.slice(0, 41), 1n, to, 0n, 0n])).to.throw(TypeError, /argument 0 is not an address/);
    expect(() => encode([to, 1n, `${to}00`, 0n, 0n])).to.throw(TypeError, /argument 2 is not an address/);
    expect(() => encode([to, 1n, 5n, 0n, 0n])).to.throw(TypeError, /argument 2 is not an address/);
  });
});
