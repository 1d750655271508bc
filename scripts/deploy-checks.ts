/**
 * What the deploy CLI checks on chain before it deploys anything: each stable coin and feed
 * it is pointed at is a contract with the decimals the swap and the service assume (6 or 18
 * for a stable coin, 8 for a Chainlink USD feed) and a feed's answer is positive. A wrong
 * address found after deployment costs a redeploy; found before, it costs nothing.
 *
 * And what it checks after: the roles of the deployed token and swap (checkSuiteRoles).
 */
import { Contract, getAddress, id, isAddress, type Provider, ZeroAddress } from "ethers";

/** The parameters of ignition/modules/TokenSwapSuite.ts, plus the FX feeds only the service reads. */
export interface SuiteParameters {
  dai: string;
  usdt: string;
  usdc: string;
  tokenUsdFeed: string;
  eurUsdFeed: string;
  chfUsdFeed: string;
  /** The chain's native coin in USD (e.g. Chainlink's ETH / USD): optional, for the gas in USD only. */
  nativeUsdFeed?: string;
  tokenName?: string;
  tokenSymbol?: string;
  maxPriceAge?: bigint | string | number;
  /** Seconds a new admin of the token or the swap waits before accepting the role (Ignition's "123n" form too). */
  adminDelay?: bigint | string | number;
}

/** The largest admin delay the contracts take (a uint48). */
const MAX_ADMIN_DELAY = 2n ** 48n - 1n;

/** `value` as a bigint: a number, a decimal string, or Ignition's "123n"; undefined when it is none of these. */
export function parseSeconds(value: bigint | string | number): bigint | undefined {
  try {
    return BigInt(String(value).replace(/n$/, ""));
  } catch {
    return undefined;
  }
}

const ERC20 = ["function decimals() view returns (uint8)", "function symbol() view returns (string)"];
const FEED = [
  "function decimals() view returns (uint8)",
  "function latestRoundData() view returns (uint80, int256, uint256, uint256, uint80)",
];

export const STABLE_DECIMALS = [6, 18] as const;
export const FEED_DECIMALS = 8;

/** Creation code that runs PUSH0 PUSH0 TSTORE STOP: it fails on a chain without EIP-1153 (Cancun). */
const TSTORE_PROBE = "0x5f5f5d00";

/**
 * A problem when the network cannot run the suite: TokenSwap's reentrancy guard keeps its lock
 * in transient storage (EIP-1153, Cancun), so on an older EVM the deployment would succeed and
 * every trade revert. Empty when an eth_call of TSTORE succeeds. Only reads.
 */
export async function checkNetworkSupportsSuite(provider: Provider): Promise<string[]> {
  try {
    await provider.call({ data: TSTORE_PROBE });
    return [];
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
    return [
      `network: does not run TSTORE (EIP-1153, the Cancun upgrade), which TokenSwap's reentrancy guard needs (${reason})`,
    ];
  }
}

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
  if (params.adminDelay !== undefined) {
    const delay = parseSeconds(params.adminDelay);
    if (delay === undefined || delay < 0n || delay > MAX_ADMIN_DELAY) {
      problems.push(
        `adminDelay: must be whole seconds from 0 to 2^48 - 1 (got ${JSON.stringify(String(params.adminDelay))})`,
      );
    }
  }
  const feedNames = ["tokenUsdFeed", "eurUsdFeed", "chfUsdFeed"] as const;
  for (const name of params.nativeUsdFeed === undefined ? feedNames : [...feedNames, "nativeUsdFeed" as const]) {
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

const MINTER_ROLE = id("MINTER_ROLE");
const PAUSER_ROLE = id("PAUSER_ROLE");
const ACCESS_CONTROL = [
  "function hasRole(bytes32 role, address account) view returns (bool)",
  "function defaultAdmin() view returns (address)",
  "function pendingDefaultAdmin() view returns (address newAdmin, uint48 schedule)",
  "event RoleGranted(bytes32 indexed role, address indexed account, address indexed sender)",
];
const SWAP = [...ACCESS_CONTROL, "function token() view returns (address)"];

/**
 * Every problem with the roles of a deployed suite, each naming its contract; empty when all
 * hold: the swap trades `token` and is the only holder of its MINTER_ROLE (every account the
 * token's RoleGranted logs name since `fromBlock`, default 0, is asked); `admin` is the admin of
 * both contracts, with no handover to another admin pending, and holds the swap's PAUSER_ROLE.
 * Only reads.
 */
export async function checkSuiteRoles(
  provider: Provider,
  suite: { token: string; swap: string; admin: string; fromBlock?: number },
): Promise<string[]> {
  const problems: string[] = [];
  const token = new Contract(suite.token, ACCESS_CONTROL, provider);
  const swap = new Contract(suite.swap, SWAP, provider);
  const admin = getAddress(suite.admin);
  const read = async <T>(what: string, call: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await call();
    } catch {
      problems.push(what);
      return undefined;
    }
  };

  /** A begun and not yet accepted transfer of the admin role: the deployment is not what it should be yet. */
  const pendingHandover = async (name: string, contract: Contract) => {
    const [newAdmin] = (await contract.getFunction("pendingDefaultAdmin")()) as [string, bigint];
    if (newAdmin !== ZeroAddress) problems.push(`${name}: a transfer of its admin role to ${newAdmin} is pending`);
  };

  const traded = await read(
    `swap: ${suite.swap} has no token() (not the TokenSwap?)`,
    () => swap.getFunction("token")() as Promise<string>,
  );
  if (traded !== undefined && getAddress(traded) !== getAddress(suite.token)) {
    problems.push(`swap: trades ${traded}, not the token ${suite.token}`);
  }
  const tokenAdmin = await read(
    `token: ${suite.token} has no access control (not the TradedToken?)`,
    () => token.getFunction("defaultAdmin")() as Promise<string>,
  );
  if (tokenAdmin !== undefined) {
    if (tokenAdmin !== admin) problems.push(`token: its admin is ${tokenAdmin}, not ${admin}`);
    if (!(await token.getFunction("hasRole")(MINTER_ROLE, suite.swap))) {
      problems.push(`token: the swap ${suite.swap} lacks MINTER_ROLE, so it cannot mint or burn`);
    }
    const granted = await read(`token: could not list who was granted MINTER_ROLE (eth_getLogs)`, () =>
      token.queryFilter(token.filters.RoleGranted!(MINTER_ROLE), suite.fromBlock ?? 0),
    );
    const accounts = new Set([admin, ...(granted ?? []).map((log) => getAddress(String(log.topics[2]).slice(26)))]);
    for (const account of accounts) {
      if (account === getAddress(suite.swap)) continue;
      if (await token.getFunction("hasRole")(MINTER_ROLE, account)) {
        problems.push(
          `token: ${account === admin ? `the admin ${admin}` : account} holds MINTER_ROLE; only the swap should`,
        );
      }
    }
    await pendingHandover("token", token);
  }
  const swapAdmin = await read(
    `swap: ${suite.swap} has no access control (not the TokenSwap?)`,
    () => swap.getFunction("defaultAdmin")() as Promise<string>,
  );
  if (swapAdmin !== undefined) {
    if (swapAdmin !== admin) problems.push(`swap: its admin is ${swapAdmin}, not ${admin}`);
    if (!(await swap.getFunction("hasRole")(PAUSER_ROLE, admin))) {
      problems.push(`swap: the admin ${admin} lacks PAUSER_ROLE`);
    }
    await pendingHandover("swap", swap);
  }
  return problems;
}
