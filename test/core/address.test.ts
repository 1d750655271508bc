import { expect } from "chai";
import { getAddress } from "ethers";

import { parseAddress } from "../../core/index.js";
import { expectInvalid } from "./fixtures.js";

// Test vectors from EIP-55 itself.
const CHECKSUMMED = [
  "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
  "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
  "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
  "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
  "0x52908400098527886E0F7030069857D2E4169EE7",
  "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
  "0xde709f2102306220921060314715629080e2fb77",
  "0x27b1fdb04752bbc536007a920d24acb045561c26",
];

/** Flips the case of the first letter among the hex digits. */
function flipOneLetter(address: string): string {
  const i = address.slice(2).search(/[a-fA-F]/) + 2;
  const c = address[i]!;
  const flipped = c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase();
  return address.slice(0, i) + flipped + address.slice(i + 1);
}

describe("parseAddress", () => {
  describe("when the address is valid", () => {
    for (const address of CHECKSUMMED) {
      it(`accepts ${address} and returns it unchanged when it is already checksummed`, () => {
        expect(parseAddress("userAddress", address)).to.equal(address);
      });
    }

    it("accepts an all-lowercase address and returns its checksummed form", () => {
      const address = CHECKSUMMED[0]!;
      expect(parseAddress("userAddress", address.toLowerCase())).to.equal(address);
    });

    it("accepts an all-uppercase address and returns its checksummed form", () => {
      const address = CHECKSUMMED[0]!;
      expect(parseAddress("userAddress", `0x${address.slice(2).toUpperCase()}`)).to.equal(address);
    });

    it("checksums the same way as ethers for many addresses", () => {
      for (let n = 1; n <= 50; n++) {
        const lower = `0x${(BigInt(n) * 0x9e3779b97f4a7c15f39cc0605cedc834n).toString(16).padStart(40, "0").slice(-40)}`;
        expect(parseAddress("userAddress", lower)).to.equal(getAddress(lower));
      }
    });

    it("accepts the zero address when the field may be zero", () => {
      expect(parseAddress("userAddress", `0x${"0".repeat(40)}`)).to.equal(`0x${"0".repeat(40)}`);
    });
  });

  describe("when the address is malformed", () => {
    const cases: Array<[string, unknown]> = [
      ["an empty string", ""],
      ["no 0x prefix", "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"],
      ["an uppercase 0X prefix", "0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"],
      ["39 hex digits", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe"],
      ["41 hex digits", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAedd"],
      ["a non-hex digit", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg"],
      ["surrounding spaces", " 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed "],
      ["a trailing newline", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed\n"],
      ["a number", 0x1234],
      ["null", null],
      ["undefined", undefined],
    ];
    for (const [what, value] of cases) {
      it(`refuses ${what}, naming the field`, () => {
        expectInvalid(
          () => parseAddress("destinatary", value),
          "destinatary",
          /^destinatary: must be a 0x-prefixed 40-hex-digit address$/,
        );
      });
    }
  });

  describe("when a mixed-case address fails its EIP-55 checksum", () => {
    for (const address of CHECKSUMMED.slice(0, 4)) {
      it(`refuses ${address} with one letter's case flipped`, () => {
        expectInvalid(
          () => parseAddress("usdAddress", flipOneLetter(address)),
          "usdAddress",
          /fails its EIP-55 checksum$/,
        );
      });
    }
  });

  describe("when the address is the zero address", () => {
    it("refuses it if the field must not be zero", () => {
      expectInvalid(
        () => parseAddress("destinatary", `0x${"0".repeat(40)}`, { nonZero: true }),
        "destinatary",
        /must not be the zero address$/,
      );
    });
  });
});
