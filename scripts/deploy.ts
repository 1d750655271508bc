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
 */
export async function deploySuite(ethers: HardhatEthers, options: DeploySuiteOptions) {
  const deployer = options.deployer ?? (await ethers.getSigners())[0];
  if (deployer === undefined) throw new Error("deploySuite: no deployer given and the network has no signer");
  const owner = await deployer.getAddress();
  const wallets = Array.isArray(options.exchangeWallet)
    ? (options.exchangeWallet as readonly Signer[])
    : [options.exchangeWallet as Signer];
  const prices = { ...DEFAULT_PRICES, ...options.prices };
  const feedAnswer = (value: string) => parseUnits(value, FEED_DECIMALS);
  const adminDelay = options.adminDelay ?? 0n;

  const dai = await ethers.deployContract("MockStableCoin", ["Dai Stablecoin", "DAI", 18], deployer);
  const usdt = await ethers.deployContract("MockUSDT", [], deployer);
  const usdc = await ethers.deployContract("MockStableCoin", ["USD Coin", "USDC", 6], deployer);
  const tokenUsdFeed = await ethers.deployContract(
    "MockAggregator",
    [FEED_DECIMALS, `${options.token?.symbol ?? "TTK"} / USD`, feedAnswer(prices.tokenUsd)],
    deployer,
  );
  const eurUsdFeed = await ethers.deployContract(
    "MockAggregator",
    [FEED_DECIMALS, "EUR / USD", feedAnswer(prices.eurUsd)],
    deployer,
  );
  const chfUsdFeed = await ethers.deployContract(
    "MockAggregator",
    [FEED_DECIMALS, "CHF / USD", feedAnswer(prices.chfUsd)],
    deployer,
  );
  const token = await ethers.deployContract(
    "TradedToken",
    [options.token?.name ?? "Trade Token", options.token?.symbol ?? "TTK", adminDelay, owner],
    deployer,
  );
  const stableCoins = { DAI: dai, USDT: usdt, USDC: usdc };
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

  const reserves = options.reservesPerStable ?? "1000000";
  const funding = options.walletFunding ?? "1000000";
  for (const coin of Object.values(stableCoins)) {
    const decimals = Number(await coin.decimals());
    await (await coin.connect(deployer).mint(swapAddress, parseUnits(reserves, decimals))).wait();
  }
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
  // The native coin's USD price, for the gas in USD of quotes and the trade history. Deployed
  // last, so every other contract keeps the address it had before this feed existed.
  const nativeUsdFeed = await ethers.deployContract(
    "MockAggregator",
    [FEED_DECIMALS, "ETH / USD", feedAnswer(prices.nativeUsd)],
    deployer,
  );

  const addresses: DeploymentAddresses = {
    token: await token.getAddress(),
    swap: swapAddress,
    stableCoins: { DAI: await dai.getAddress(), USDT: await usdt.getAddress(), USDC: await usdc.getAddress() },
    feeds: {
      tokenUsd: await tokenUsdFeed.getAddress(),
      eurUsd: await eurUsdFeed.getAddress(),
      chfUsd: await chfUsdFeed.getAddress(),
      nativeUsd: await nativeUsdFeed.getAddress(),
    },
  };
  return {
    addresses,
    contracts: {
      token,
      swap,
      stableCoins,
      feeds: { tokenUsd: tokenUsdFeed, eurUsd: eurUsdFeed, chfUsd: chfUsdFeed, nativeUsd: nativeUsdFeed },
    },
  };
}

export type DeployedSuite = Awaited<ReturnType<typeof deploySuite>>;
