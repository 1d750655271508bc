import { expect } from "chai";

import { InvalidArgumentError } from "../../core/errors.js";
import type { StableCoin, TradeConfig, TradeOrder, TransactionReceipt } from "../../core/index.js";

// Shared fixtures for the core's unit tests: real mainnet stable-coin addresses and
// plausible limits, so the tests read like production traffic.

export const DAI: StableCoin = { symbol: "DAI", address: "0x6B175474E89094C44Da98b954EedeAC495271d0F", decimals: 18 };
export const USDT: StableCoin = { symbol: "USDT", address: "0xdAC17F958D2ee523a2206206994597C13D831ec7", decimals: 6 };
export const USDC: StableCoin = { symbol: "USDC", address: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", decimals: 6 };

export const CONFIG: TradeConfig = {
  stableCoins: [DAI, USDT, USDC],
  limits: { maxSellTokens: 1_000n * 10n ** 18n, maxUsd: "10000" },
};

/** Addresses from the EIP-55 test vectors, in their checksummed form. */
export const WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
export const CUSTOMER = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359";

/** A valid trade request body; override fields to make it invalid. */
export function request(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { userAddress: WALLET, destinatary: CUSTOMER, amount: "1.5", usdAddress: USDT.address, ...overrides };
}

/** A receipt as a trade port would return it. */
export function fakeReceipt(order: TradeOrder): TransactionReceipt {
  return {
    blockHash: `0x${"ab".repeat(32)}`,
    blockNumber: 7,
    contractAddress: null,
    cumulativeGasUsed: 90_000,
    effectiveGasPrice: 1_000_000_000,
    from: order.wallet.toLowerCase(),
    gasUsed: 90_000,
    logsBloom: `0x${"00".repeat(256)}`,
    status: true,
    to: "0x0000000000000000000000000000000000001234",
    transactionHash: `0x${"cd".repeat(32)}`,
    transactionIndex: 0,
    type: "0x2",
    events: {},
  };
}

/** Asserts that `fn` throws an InvalidArgumentError for `field` whose message matches `reason`. */
export function expectInvalid(fn: () => unknown, field: string, reason?: RegExp): InvalidArgumentError {
  let thrown: unknown;
  try {
    fn();
  } catch (error) {
    thrown = error;
  }
  expect(thrown, "expected an InvalidArgumentError").to.be.instanceOf(InvalidArgumentError);
  const error = thrown as InvalidArgumentError;
  expect(error.field).to.equal(field);
  expect(error.code).to.equal("invalid_argument");
  expect(error.message.startsWith(`${field}: `), error.message).to.equal(true);
  if (reason) expect(error.message).to.match(reason);
  return error;
}
