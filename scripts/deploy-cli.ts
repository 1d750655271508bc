/**
 * Deploys the token and the swap on any network, against stable coins and price feeds that
 * already exist there, and writes the deployment file `npm start` reads (DEPLOYMENT_FILE).
 *
 *   DEPLOY_RPC_URL=https://… DEPLOYER_PRIVATE_KEY=0x… DEPLOY_PARAMETERS=ignition/parameters/mainnet.json \
 *     npm run deploy
 *
 * - The network: `--network rpc` (hardhat.config.ts) reads DEPLOY_RPC_URL and
 *   DEPLOYER_PRIVATE_KEY as Hardhat configuration variables: from the environment, or from
 *   Hardhat's encrypted keystore (`npx hardhat keystore set DEPLOYER_PRIVATE_KEY`), which is
 *   the better place for a key. Any other network of hardhat.config.ts works too.
 * - The parameters: an Ignition parameters file (see ignition/parameters/example.json) with
 *   the stable coins and the token/USD, EUR/USD and CHF/USD feeds, and optionally
 *   `nativeUsdFeed`, the chain's native coin in USD (ETH / USD), for the gas in USD. They are checked on chain
 *   first (scripts/deploy-checks.ts); any problem stops the deployment before a transaction.
 * - DEPLOY_MOCKS=true deploys mock coins and feeds first (ignition/modules/DevMocks.ts), for dev
 *   and test networks only; it is refused on the main networks.
 * - The deployment itself is ignition/modules/TokenSwapSuite.ts, journalled by Ignition under
 *   ignition/deployments/<DEPLOYMENT_ID> (default chain-<chainId>): a rerun resumes it.
 * - Then the roles are checked on chain (scripts/deploy-checks.ts, checkSuiteRoles): the swap
 *   holds the token's MINTER_ROLE and the deployer does not; the deployer is the admin of both
 *   contracts and holds the swap's PAUSER_ROLE. A wrong role stops before the deployment file.
 * - Output: DEPLOYMENT_FILE, default deployments/<chainId>.json.
 * - Exchange wallets whose keys are in an HSM or KMS: with the service's SIGNER variables set
 *   (SIGNER=pkcs11 or aws-kms, EXCHANGE_ADDRESSES, PKCS11_* or KMS_KEY_IDS), their keys are opened
 *   and checked before anything is sent; after the deployment each wallet gets DEPLOY_WALLET_GAS
 *   native coin and, with DEPLOY_MOCKS=true, DEPLOY_WALLET_FUNDING tokens and mock coins, and
 *   approves the swap for its balances, signed by its signer (scripts/deploy-wallets.ts).
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

import { network } from "hardhat";

import DevMocks from "../ignition/modules/DevMocks.js";
import TokenSwapSuite from "../ignition/modules/TokenSwapSuite.js";
import { prepareWallets } from "./deploy-wallets.js";
import { openConfiguredSigners } from "./signer-wallet.js";
import {
  checkNetworkSupportsSuite,
  checkSuiteParameters,
  checkSuiteRoles,
  parseSeconds,
  type SuiteParameters,
} from "./deploy-checks.js";

/** Chains where mock coins must never be deployed: Ethereum, OP, BNB, Gnosis, Polygon, Base, Arbitrum One, Avalanche. */
const MAIN_NETWORKS = new Set([1n, 10n, 56n, 100n, 137n, 8453n, 42161n, 43114n]);

function fail(problems: string[]): never {
  console.error(`deploy: nothing was deployed:\n  - ${problems.join("\n  - ")}`);
  process.exit(1);
}

const connection = await network.create();
const { ethers, ignition } = connection;
const [deployer] = await ethers.getSigners();
if (deployer === undefined)
  fail(["the network has no deployer account: set DEPLOYER_PRIVATE_KEY (or the network's accounts)"]);
const { chainId } = await ethers.provider.getNetwork();

let params: Partial<SuiteParameters> = {};
if (process.env.DEPLOY_PARAMETERS !== undefined && process.env.DEPLOY_PARAMETERS !== "") {
  try {
    const file = JSON.parse(await readFile(process.env.DEPLOY_PARAMETERS, "utf8")) as {
      TokenSwapSuite?: Partial<SuiteParameters>;
    };
    params =
      file.TokenSwapSuite ??
      fail([`DEPLOY_PARAMETERS: ${process.env.DEPLOY_PARAMETERS} has no "TokenSwapSuite" section`]);
  } catch (error) {
    fail([`DEPLOY_PARAMETERS: ${process.env.DEPLOY_PARAMETERS} cannot be read as JSON (${(error as Error).message})`]);
  }
}
const deploymentId = process.env.DEPLOYMENT_ID || `chain-${chainId}`;

// The wallets' keys, opened and checked against EXCHANGE_ADDRESSES before anything is sent.
const wallets = await openConfiguredSigners(process.env).catch((error: unknown) => fail([(error as Error).message]));

if (process.env.DEPLOY_MOCKS === "true") {
  if (MAIN_NETWORKS.has(chainId))
    fail([
      `DEPLOY_MOCKS: refused on chain ${chainId}, a main network; point DEPLOY_PARAMETERS at the real stable coins and feeds`,
    ]);
  console.log(`Deploying mock stable coins and feeds on chain ${chainId} (DEPLOY_MOCKS=true)`);
  const mocks = await ignition.deploy(DevMocks, { deploymentId: `${deploymentId}-mocks` });
  params = {
    ...params,
    dai: await mocks.dai.getAddress(),
    usdt: await mocks.usdt.getAddress(),
    usdc: await mocks.usdc.getAddress(),
    tokenUsdFeed: await mocks.tokenUsdFeed.getAddress(),
    eurUsdFeed: await mocks.eurUsdFeed.getAddress(),
    chfUsdFeed: await mocks.chfUsdFeed.getAddress(),
    nativeUsdFeed: await mocks.nativeUsdFeed.getAddress(),
  };
} else if (Object.keys(params).length === 0) {
  fail([
    "DEPLOY_PARAMETERS: is required (the stable coins and feeds to deploy against), or DEPLOY_MOCKS=true on a dev network",
  ]);
}

const problems = [
  ...(await checkNetworkSupportsSuite(ethers.provider)),
  ...(await checkSuiteParameters(ethers.provider, params)),
];
if (problems.length > 0) fail(problems);
const checked = params as SuiteParameters;

console.log(
  `Deploying the token and the swap on chain ${chainId} from ${deployer.address} (Ignition deployment ${deploymentId})`,
);
const { token, swap } = await ignition.deploy(TokenSwapSuite, {
  deploymentId,
  parameters: {
    TokenSwapSuite: {
      dai: checked.dai,
      usdt: checked.usdt,
      usdc: checked.usdc,
      tokenUsdFeed: checked.tokenUsdFeed,
      ...(checked.tokenName === undefined ? {} : { tokenName: checked.tokenName }),
      ...(checked.tokenSymbol === undefined ? {} : { tokenSymbol: checked.tokenSymbol }),
      ...(checked.maxPriceAge === undefined
        ? {}
        : { maxPriceAge: BigInt(String(checked.maxPriceAge).replace(/n$/, "")) }),
      ...(checked.adminDelay === undefined ? {} : { adminDelay: parseSeconds(checked.adminDelay)! }),
    },
  },
});

const roleProblems = await checkSuiteRoles(ethers.provider, {
  token: await token.getAddress(),
  swap: await swap.getAddress(),
  admin: deployer.address,
});
if (roleProblems.length > 0) {
  console.error(
    `deploy: deployed (Ignition deployment ${deploymentId}), but the roles are wrong; no deployment file written:\n  - ${roleProblems.join("\n  - ")}`,
  );
  process.exit(1);
}

const deployment = {
  chainId: Number(chainId),
  token: await token.getAddress(),
  swap: await swap.getAddress(),
  stableCoins: { DAI: checked.dai, USDT: checked.usdt, USDC: checked.usdc },
  feeds: {
    tokenUsd: checked.tokenUsdFeed,
    eurUsd: checked.eurUsdFeed,
    chfUsd: checked.chfUsdFeed,
    // Optional: the service's gas in USD stays null without it (or with NATIVE_USD_FEED set instead).
    ...(checked.nativeUsdFeed === undefined ? {} : { nativeUsd: checked.nativeUsdFeed }),
  },
};
const file = process.env.DEPLOYMENT_FILE || `deployments/${chainId}.json`;
await mkdir(dirname(file), { recursive: true });
await writeFile(file, `${JSON.stringify(deployment, null, 2)}\n`);
console.log(`Deployed; DEPLOYMENT_FILE written to ${file}:`);
console.log(JSON.stringify(deployment, null, 2));
if (wallets !== undefined) {
  console.log(
    `Preparing ${wallets.signers.length} exchange wallet(s) whose keys are in the ${process.env.SIGNER} signer:`,
  );
  try {
    await prepareWallets({
      provider: ethers.provider,
      deployer,
      signers: wallets.signers,
      swap: deployment.swap,
      token: deployment.token,
      stableCoins: Object.values(deployment.stableCoins),
      ...(process.env.DEPLOY_WALLET_GAS ? { gas: process.env.DEPLOY_WALLET_GAS } : {}),
      ...(process.env.DEPLOY_MOCKS === "true" ? { funding: process.env.DEPLOY_WALLET_FUNDING || "1000000" } : {}),
      log: (line) => console.log(line),
    });
  } finally {
    await wallets.close();
  }
}
await connection.close();
