/**
 * Shared test helpers for the contract suite: a fixture built with the deployment module,
 * and a way to name a receipt's logs ("TTK.Transfer", "TokenSwap.Sold", ...).
 */
import type { HardhatEthers, HardhatEthersSigner } from "@nomicfoundation/hardhat-ethers/types";
import type { Interface, LogDescription, TransactionReceipt } from "ethers";

import { deploySuite } from "../../scripts/deploy.js";

export const STABLES = ["DAI", "USDT", "USDC"] as const;
export type StableSymbol = (typeof STABLES)[number];

export type Tuple<T, N extends number, Acc extends T[] = []> = Acc["length"] extends N ? Acc : Tuple<T, N, [...Acc, T]>;

/** The network's first `n` signers, as a tuple of defined signers (throws if it has fewer). */
export async function signers<N extends number>(ethers: HardhatEthers, n: N): Promise<Tuple<HardhatEthersSigner, N>> {
  const all = await ethers.getSigners();
  if (all.length < n) throw new Error(`the network has ${all.length} signers, the test needs ${n}`);
  return all.slice(0, n) as Tuple<HardhatEthersSigner, N>;
}

/** Deploys the suite with signer #1 as exchange wallet; #0 owns it, #2 and #3 are customers. */
export async function suiteFixture(ethers: HardhatEthers) {
  const [owner, exchange, customer, other] = await signers(ethers, 4);
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

/**
 * The logs of `receipt`, each parsed by the one of `contracts` that emitted it; throws unless
 * there are exactly `n` and every one is known.
 */
export function parseLogs<N extends number>(
  receipt: TransactionReceipt,
  contracts: readonly { target: unknown; interface: Interface }[],
  n: N,
): Tuple<LogDescription, N> {
  if (receipt.logs.length !== n) throw new Error(`expected ${n} logs, the receipt has ${receipt.logs.length}`);
  return receipt.logs.map((log) => {
    const parsed = contracts.find((c) => c.target === log.address)?.interface.parseLog(log);
    if (!parsed) throw new Error(`log of ${log.address} not emitted by a given contract`);
    return parsed;
  }) as Tuple<LogDescription, N>;
}

/** stableOut = tokens * price * 10^d / (10^18 * 10^8), rounded down: the rule the swap documents. */
export function expectedStableOut(tokens: bigint, price: bigint, stableDecimals: number): bigint {
  return (tokens * price * 10n ** BigInt(stableDecimals)) / (10n ** 18n * 10n ** 8n);
}

/** tokensOut = usd * 10^18 * 10^8 / (price * 10^d), rounded down. */
export function expectedTokensOut(usd: bigint, price: bigint, stableDecimals: number): bigint {
  return (usd * 10n ** 18n * 10n ** 8n) / (price * 10n ** BigInt(stableDecimals));
}
