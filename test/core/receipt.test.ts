import { expect } from "chai";
import { keccak256, toUtf8Bytes } from "ethers";

import { web3LogId } from "../../core/index.js";

const BLOCK = "0x6a7f8c1e1fd4a5ba7e8f2f5e2d1a6c9b0e3f4d5c6b7a8998877665544332211f";
const TX = "0x0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";

/** What web3.js 1.x does, written the way it is written there, hashed with ethers. */
function web3Reference(blockHash: string, transactionHash: string, logIndexHex: string): string {
  const text = blockHash.replace("0x", "") + transactionHash.replace("0x", "") + logIndexHex.replace("0x", "");
  return `log_${keccak256(toUtf8Bytes(text)).replace("0x", "").slice(0, 8)}`;
}

describe("web3LogId", () => {
  for (const [index, hex] of [
    [0, "0x0"],
    [1, "0x1"],
    [10, "0xa"],
    [15, "0xf"],
    [16, "0x10"],
    [255, "0xff"],
    [4096, "0x1000"],
  ] as Array<[number, string]>) {
    it(`matches web3.js for log index ${index} (${hex} on the wire)`, () => {
      expect(web3LogId(BLOCK, TX, index)).to.equal(web3Reference(BLOCK, TX, hex));
    });
  }

  it('has the form "log_" and 8 lowercase hex digits', () => {
    expect(web3LogId(BLOCK, TX, 3)).to.match(/^log_[0-9a-f]{8}$/);
  });

  it("hashes the hex as text, not as bytes", () => {
    const asBytes = `log_${keccak256(`0x${BLOCK.slice(2)}${TX.slice(2)}00`).slice(2, 10)}`;
    expect(web3LogId(BLOCK, TX, 0)).not.to.equal(asBytes);
  });

  it("gives different ids to logs that differ only in index", () => {
    expect(web3LogId(BLOCK, TX, 1)).not.to.equal(web3LogId(BLOCK, TX, 2));
  });

  it("refuses a negative or fractional log index", () => {
    expect(() => web3LogId(BLOCK, TX, -1)).to.throw(RangeError);
    expect(() => web3LogId(BLOCK, TX, 1.5)).to.throw(RangeError);
  });
});
