/**
 * What the deploy CLI checks on chain before it deploys anything: each stable coin and feed
 * it is pointed at is a contract with the decimals the swap and the service assume (6 or 18
 * for a stable coin, 8 for a Chainlink USD feed) and a feed's answer is positive. A wrong
 * address found after deployment costs a redeploy; found before, it costs nothing.
 */
import { Contract, getAddress, isAddress, type Provider } from "ethers";

/** The parameters of ignition/modules/TokenSwapSuite.ts, plus the FX feeds only the service reads. */
export interface SuiteParameters {
  dai: string;
  usdt: string;
  usdc: string;
  tokenUsdFeed: string;
  eurUsdFeed: string;
  chfUsdFeed: string;
  tokenName?: string;
  tokenSymbol?: string;
  maxPriceAge?: bigint | string | number;
}

const ERC20 = ["function decimals() view returns (uint8)", "function symbol() view returns (string)"];
const FEED = [
  "function decimals() view returns (uint8)",
  "function latestRoundData() view returns (uint80, int256, uint256, uint256, uint80)",
];

export const STABLE_DECIMALS = [6, 18] as const;
export const FEED_DECIMALS = 8;

/**
 * Every problem with the parameters, each naming its parameter; empty when all hold.
 * Nothing is sent: only reads.
 */
export async function checkSuiteParameters(provider: Provider, params: Partial<SuiteParameters>): Promise<string[]> {
  const problems: string[] = [];
  const seen = new Map<string, string>();
  const contractAt = async (name: keyof SuiteParameters): Promise<string | undefined> => {
    const value = params[name];
    if (typeof value !== "string" || !isAddress(value)) {
      problems.push(`${name}: must be a 0x-prefixed contract address (got ${JSON.stringify(value ?? null)})`);
      return undefined;
    }
    const address = getAddress(value);
    if (seen.has(address)) problems.push(`${name}: is the same address as ${seen.get(address)}`);
    seen.set(address, name);
    if ((await provider.getCode(address)) === "0x") {
      problems.push(`${name}: no contract at ${address} on this network`);
      return undefined;
    }
    return address;
  };
  const decimalsOf = async (
    name: keyof SuiteParameters,
    address: string,
    abi: string[],
  ): Promise<number | undefined> => {
    try {
      return Number(await new Contract(address, abi, provider).getFunction("decimals")());
    } catch {
      problems.push(`${name}: ${address} has no decimals() (not an ERC-20 or a Chainlink feed?)`);
      return undefined;
    }
  };

  for (const name of ["dai", "usdt", "usdc"] as const) {
    const address = await contractAt(name);
    if (address === undefined) continue;
    const decimals = await decimalsOf(name, address, ERC20);
    if (decimals !== undefined && !(STABLE_DECIMALS as readonly number[]).includes(decimals)) {
      problems.push(`${name}: ${address} has ${decimals} decimals; a stable coin must have 6 or 18`);
    }
  }
  for (const name of ["tokenUsdFeed", "eurUsdFeed", "chfUsdFeed"] as const) {
    const address = await contractAt(name);
    if (address === undefined) continue;
    const decimals = await decimalsOf(name, address, FEED);
    if (decimals === undefined) continue;
    if (decimals !== FEED_DECIMALS) {
      problems.push(`${name}: ${address} has ${decimals} decimals; a USD feed must have ${FEED_DECIMALS}`);
      continue;
    }
    try {
      const [, answer] = (await new Contract(address, FEED, provider).getFunction("latestRoundData")()) as [
        bigint,
        bigint,
      ];
      if (answer <= 0n)
        problems.push(`${name}: ${address} answers ${answer}; a price feed must answer a positive price`);
    } catch {
      problems.push(`${name}: ${address} has no latestRoundData() (not a Chainlink feed?)`);
    }
  }
  return problems;
}
