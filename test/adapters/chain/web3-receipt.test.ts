/** toWeb3Receipt (adapters/chain/blocks/web3-receipt.ts): a node's receipt in web3.js 1.x shape. */
import { expect } from "chai";
import { getAddress, keccak256, toUtf8Bytes } from "ethers";

import { toWeb3Receipt, type RpcReceipt } from "../../../adapters/chain/blocks/index.js";
import { RECEIPT_KEYS } from "../../helpers/web3-receipt-shape.js";

const BLOCK = `0x${"ab".repeat(32)}`;
const TX = `0x${"cd".repeat(32)}`;
const TOKEN = "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512";

const raw = (overrides: Partial<RpcReceipt> = {}): RpcReceipt => ({
  blockHash: BLOCK,
  blockNumber: "0x1b",
  cumulativeGasUsed: "0x1cb43",
  effectiveGasPrice: "0x3b9aca07",
  from: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  gasUsed: "0x1cb43",
  logs: [
    {
      address: TOKEN,
      blockHash: BLOCK,
      blockNumber: "0x1b",
      data: "0x01",
      logIndex: "0x0",
      removed: false,
      topics: ["0x11"],
      transactionHash: TX,
      transactionIndex: "0x0",
    },
    {
      address: TOKEN,
      blockHash: BLOCK,
      blockNumber: "0x1b",
      data: "0x",
      logIndex: "0xa",
      topics: [],
      transactionHash: TX,
      transactionIndex: "0x0",
    },
  ],
  logsBloom: `0x${"00".repeat(256)}`,
  status: "0x1",
  to: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  transactionHash: TX,
  transactionIndex: "0x0",
  type: "0x2",
  ...overrides,
});

describe("toWeb3Receipt", function () {
  it("turns quantities into numbers, lowercases from and to, checksums log addresses and keys events by position", function () {
    const receipt = toWeb3Receipt(raw());
    expect(Object.keys(receipt)).to.deep.equal(RECEIPT_KEYS);
    expect(receipt).to.include({
      blockNumber: 27,
      contractAddress: null,
      cumulativeGasUsed: 117_571,
      effectiveGasPrice: 1_000_000_007,
      from: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
      gasUsed: 117_571,
      status: true,
      to: "0x5fbdb2315678afecb367f032d93f642f64180aa3",
      transactionIndex: 0,
      type: "0x2",
    });
    expect(Object.keys(receipt.events)).to.deep.equal(["0", "1"]);
    const second = receipt.events["1"]!;
    expect(second.address).to.equal(getAddress(TOKEN));
    expect(second.logIndex).to.equal(10);
    expect(second.removed).to.equal(false); // the node omitted it
    // web3.js 1.x: keccak256 of the text blockHash + transactionHash + hex index, without 0x.
    expect(second.id).to.equal(`log_${keccak256(toUtf8Bytes(`${"ab".repeat(32)}${"cd".repeat(32)}a`)).slice(2, 10)}`);
    expect(receipt.events["0"]!.raw).to.deep.equal({ data: "0x01", topics: ["0x11"] });
  });

  it("reports a reverted receipt as status false, and a legacy one as type 0x0", function () {
    const legacy = raw({ status: "0x0", logs: [] });
    delete legacy.type; // a legacy receipt has no type field
    const receipt = toWeb3Receipt(legacy);
    expect(receipt.status).to.equal(false);
    expect(receipt.type).to.equal("0x0");
    expect(receipt.events).to.deep.equal({});
  });

  it("refuses a quantity that is not hex, or too large for a JSON number", function () {
    expect(() => toWeb3Receipt(raw({ gasUsed: "12" }))).to.throw(TypeError, /gasUsed/);
    expect(() => toWeb3Receipt(raw({ cumulativeGasUsed: "0x20000000000000" }))).to.throw(
      RangeError,
      /cumulativeGasUsed/,
    );
  });
});
