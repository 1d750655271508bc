/**
 * The deployment module: deploys the whole suite (token, mock DAI/USDT/USDC, mock price
 * feeds including the native coin's ETH / USD, swap) on any network, seeds the swap's reserves, and funds and approves the
 * exchange wallets. The tests and the embedded chain of `npm start` call `deploySuite`;
 * `npm run deploy` (`scripts/deploy-cli.ts`) deploys through the Ignition module instead.
 */
import type { HardhatEthers } from "@nomicfoundation/hardhat-ethers/types";
import { id, parseUnits, type Signer } from "ethers";

import type { DeploymentAddresses } from "../adapters/chain/index.js";

export type { DeploymentAddresses };

export interface DeploySuiteOptions {
  /** Wallet(s) the service signs with: funded with tokens and stable coins, and approved for the swap. */
  exchangeWallet: Signer | readonly Signer[];
  /**
   * Admin (`DEFAULT_ADMIN_ROLE`, which `owner()` names) of the token and the swap, and holder of
   * the swap's PAUSER_ROLE; defaults to the first signer of `ethers`.
   */
  deployer?: Signer;
  /** Seconds a new admin of either contract waits before accepting the role. Default 0: a later block. */
  adminDelay?: bigint;
  token?: { name: string; symbol: string };
  /** Feed answers as decimal strings (8 decimals like Chainlink's USD feeds); `nativeUsd`: the chain's coin (ETH / USD). */
  prices?: { tokenUsd?: string; eurUsd?: string; chfUsd?: string; nativeUsd?: string };
  /** Oldest feed answer the swap accepts, in seconds. Default 25 hours (Chainlink fiat feeds beat daily). */
  maxPriceAge?: bigint;
  /** Stable-coin reserves seeded into the swap, in whole coins of each. */
  reservesPerStable?: string;
  /** Tokens and each stable coin given to every exchange wallet, in whole units. Also the approved amount. */
  walletFunding?: string;
  /**
   * Wallets whose keys are in a signer outside the process (an HSM, KMS): funded like the others
   * and given `walletGas` native coin from the deployer, but not approved (the service approves
   * the swap at its first trade, through its signer).
   */
  fundedAddresses?: readonly string[];
  /** Native coin given to each of `fundedAddresses`, in whole coins. Default 100. */
  walletGas?: string;
}

export const FEED_DECIMALS = 8;
export const DEFAULT_PRICES = { tokenUsd: "1.25", eurUsd: "1.08", chfUsd: "1.12", nativeUsd: "2500" } as const;
export const DEFAULT_MAX_PRICE_AGE = 25n * 60n * 60n;
/** The roles of the contracts (OpenZeppelin's convention: the keccak256 of the name). */
export const MINTER_ROLE = id("MINTER_ROLE");
export const PAUSER_ROLE = id("PAUSER_ROLE");

/**
 * Deploys the suite and returns its addresses and connected contracts. The roles end as a
 * production deployment leaves them: the swap alone holds the token's MINTER_ROLE (the deployer
 * holds it only while it funds the wallets), the deployer is both contracts' admin and holds
 * the swap's PAUSER_ROLE.
 *
 * The steps run in this order on purpose: a contract's address follows from the deployer's
 * nonce, so the same chain gets the same addresses every time (tests and .dev/deployment.json
 * rely on it).
 */
export async function deploySuite(ethers: HardhatEthers, options: DeploySuiteOptions) {
  const deployer = options.deployer ?? (await ethers.getSigners())[0];
  if (deployer === undefined) throw new Error("deploySuite: no deployer given and the network has no signer");
  const owner = await deployer.getAddress();
  const wallets = Array.isArray(options.exchangeWallet)
    ? (options.exchangeWallet as readonly Signer[])
    : [options.exchangeWallet as Signer];
  const prices = { ...DEFAULT_PRICES, ...options.prices };
  const adminDelay = options.adminDelay ?? 0n;

  const stableCoins = await deployStableCoins(ethers, deployer);
  const tokenUsdFeed = await deployFeed(ethers, deployer, `${options.token?.symbol ?? "TTK"} / USD`, prices.tokenUsd);
  const eurUsdFeed = await deployFeed(ethers, deployer, "EUR / USD", prices.eurUsd);
  const chfUsdFeed = await deployFeed(ethers, deployer, "CHF / USD", prices.chfUsd);
  const token = await deployToken(ethers, deployer, options.token, adminDelay, owner);
  const swap = await ethers.deployContract(
    "TokenSwap",
    [
      await token.getAddress(),
      await tokenUsdFeed.getAddress(),
      options.maxPriceAge ?? DEFAULT_MAX_PRICE_AGE,
      await Promise.all(Object.values(stableCoins).map((coin) => coin.getAddress())),
      adminDelay,
      owner,
    ],
    deployer,
  );
  const swapAddress = await swap.getAddress();
  await (await token.connect(deployer).grantRole(MINTER_ROLE, swapAddress)).wait();
  await (await swap.connect(deployer).grantRole(PAUSER_ROLE, owner)).wait();

  await seedReserves(stableCoins, deployer, swapAddress, options.reservesPerStable ?? "1000000");
  const funded = { token, stableCoins, deployer, owner, swapAddress };
  await fundWallets(funded, wallets, options.walletFunding ?? "1000000");
  // The native coin's USD price, for the gas in USD of quotes and the trade history. Deployed
  // last, so every other contract keeps the address it had before this feed existed.
  const nativeUsdFeed = await deployFeed(ethers, deployer, "ETH / USD", prices.nativeUsd);
  // After every contract, so each keeps the address it has without these wallets.
  if (options.fundedAddresses !== undefined && options.fundedAddresses.length > 0)
    await fundAddresses(
      funded,
      options.fundedAddresses,
      options.walletFunding ?? "1000000",
      options.walletGas ?? "100",
    );

  const feeds = { tokenUsd: tokenUsdFeed, eurUsd: eurUsdFeed, chfUsd: chfUsdFeed, nativeUsd: nativeUsdFeed };
  const addresses: DeploymentAddresses = {
    token: await token.getAddress(),
    swap: swapAddress,
    stableCoins: {
      DAI: await stableCoins.DAI.getAddress(),
      USDT: await stableCoins.USDT.getAddress(),
      USDC: await stableCoins.USDC.getAddress(),
    },
    feeds: {
      tokenUsd: await tokenUsdFeed.getAddress(),
      eurUsd: await eurUsdFeed.getAddress(),
      chfUsd: await chfUsdFeed.getAddress(),
      nativeUsd: await nativeUsdFeed.getAddress(),
    },
  };
  return { addresses, contracts: { token, swap, stableCoins, feeds } };
}

/** The three mock stable coins, DAI and USDC as plain ERC-20s, USDT with its non-standard returns. */
async function deployStableCoins(ethers: HardhatEthers, deployer: Signer) {
  const dai = await ethers.deployContract("MockStableCoin", ["Dai Stablecoin", "DAI", 18], deployer);
  const usdt = await ethers.deployContract("MockUSDT", [], deployer);
  const usdc = await ethers.deployContract("MockStableCoin", ["USD Coin", "USDC", 6], deployer);
  return { DAI: dai, USDT: usdt, USDC: usdc };
}

type StableCoins = Awaited<ReturnType<typeof deployStableCoins>>;

/** The traded token, its admin `owner` (who may hand the role on after `adminDelay` seconds). */
function deployToken(
  ethers: HardhatEthers,
  deployer: Signer,
  token: DeploySuiteOptions["token"],
  adminDelay: bigint,
  owner: string,
) {
  return ethers.deployContract(
    "TradedToken",
    [token?.name ?? "Trade Token", token?.symbol ?? "TTK", adminDelay, owner],
    deployer,
  );
}

type Token = Awaited<ReturnType<typeof deployToken>>;

/** A mock Chainlink feed answering `value` (a decimal string) at FEED_DECIMALS. */
function deployFeed(ethers: HardhatEthers, deployer: Signer, description: string, value: string) {
  return ethers.deployContract(
    "MockAggregator",
    [FEED_DECIMALS, description, parseUnits(value, FEED_DECIMALS)],
    deployer,
  );
}

/** Mints `reserves` whole coins of each stable coin to the swap, which pays them out for tokens. */
async function seedReserves(stableCoins: StableCoins, deployer: Signer, swapAddress: string, reserves: string) {
  for (const coin of Object.values(stableCoins)) {
    const decimals = Number(await coin.decimals());
    await (await coin.connect(deployer).mint(swapAddress, parseUnits(reserves, decimals))).wait();
  }
}

/**
 * Gives every exchange wallet `funding` tokens and whole coins of each stable coin, each
 * approved for the swap. The deployer holds the token's MINTER_ROLE only for this step.
 */
async function fundWallets(
  suite: { token: Token; stableCoins: StableCoins; deployer: Signer; owner: string; swapAddress: string },
  wallets: readonly Signer[],
  funding: string,
) {
  const { token, stableCoins, deployer, owner, swapAddress } = suite;
  await (await token.connect(deployer).grantRole(MINTER_ROLE, owner)).wait();
  for (const wallet of wallets) {
    const address = await wallet.getAddress();
    const tokenFunding = parseUnits(funding, 18);
    await (await token.connect(deployer).mint(address, tokenFunding)).wait();
    await (await token.connect(wallet).approve(swapAddress, tokenFunding)).wait();
    for (const coin of Object.values(stableCoins)) {
      const amount = parseUnits(funding, Number(await coin.decimals()));
      await (await coin.connect(deployer).mint(address, amount)).wait();
      await (await coin.connect(wallet).approve(swapAddress, amount)).wait();
    }
  }
  await (await token.connect(deployer).renounceRole(MINTER_ROLE, owner)).wait();
}

/** Gives each address gas, `funding` tokens and whole coins of each stable coin, with no approval. */
async function fundAddresses(
  suite: { token: Token; stableCoins: StableCoins; deployer: Signer; owner: string },
  addresses: readonly string[],
  funding: string,
  gas: string,
) {
  const { token, stableCoins, deployer, owner } = suite;
  await (await token.connect(deployer).grantRole(MINTER_ROLE, owner)).wait();
  for (const address of addresses) {
    await (await deployer.sendTransaction({ to: address, value: parseUnits(gas, 18) })).wait();
    await (await token.connect(deployer).mint(address, parseUnits(funding, 18))).wait();
    for (const coin of Object.values(stableCoins))
      await (await coin.connect(deployer).mint(address, parseUnits(funding, Number(await coin.decimals())))).wait();
  }
  await (await token.connect(deployer).renounceRole(MINTER_ROLE, owner)).wait();
}

export type DeployedSuite = Awaited<ReturnType<typeof deploySuite>>;
