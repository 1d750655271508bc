/**
 * Shared test helpers for the contract suite: a fixture built with the deployment module,
 * and a way to name a receipt's logs ("TTK.Transfer", "TokenSwap.Sold", ...).
 */
import type { HardhatEthers } from "@nomicfoundation/hardhat-ethers/types";
import type { Interface, TransactionReceipt } from "ethers";

import { deploySuite } from "../../scripts/deploy.js";

export const STABLES = ["DAI", "USDT", "USDC"] as const;
export type StableSymbol = (typeof STABLES)[number];

/** Deploys the suite with signer #1 as exchange wallet; #0 owns it, #2 and #3 are customers. */
export async function suiteFixture(ethers: HardhatEthers) {
  const [owner, exchange, customer, other] = await ethers.getSigners();
  const suite = await deploySuite(ethers, { exchangeWallet: exchange, deployer: owner });
  return { ...suite.contracts, addresses: suite.addresses, owner, exchange, customer, other };
}

/** Names each log of `receipt` as "<label>.<Event>", in log order, using the given contracts. */
export async function logNames(
  receipt: TransactionReceipt,
  contracts: Record<string, { getAddress(): Promise<string>; interface: Interface }>,
): Promise<string[]> {
  const byAddress = new Map<string, { label: string; iface: Interface }>();
  for (const [label, contract] of Object.entries(contracts)) {
    byAddress.set((await contract.getAddress()).toLowerCase(), { label, iface: contract.interface });
  }
  return receipt.logs.map((log) => {
    const known = byAddress.get(log.address.toLowerCase());
    if (!known) return `${log.address}.?`;
    const parsed = known.iface.parseLog({ topics: [...log.topics], data: log.data });
    return `${known.label}.${parsed?.name ?? "?"}`;
  });
}

/** stableOut = tokens * price * 10^d / (10^18 * 10^8), rounded down: the rule the swap documents. */
export function expectedStableOut(tokens: bigint, price: bigint, stableDecimals: number): bigint {
  return (tokens * price * 10n ** BigInt(stableDecimals)) / (10n ** 18n * 10n ** 8n);
}

/** tokensOut = usd * 10^18 * 10^8 / (price * 10^d), rounded down. */
export function expectedTokensOut(usd: bigint, price: bigint, stableDecimals: number): bigint {
  return (usd * 10n ** 18n * 10n ** 8n) / (price * 10n ** BigInt(stableDecimals));
}
