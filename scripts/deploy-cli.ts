/**
 * Deploys the suite from the command line and writes its addresses to a deployment file,
 * the file the service reads in production mode (DEPLOYMENT_FILE).
 *
 *   npx hardhat run scripts/deploy-cli.ts --network <name>
 *
 * The network's first account deploys and owns the suite; the second is funded and
 * approved as the exchange wallet (or the addresses' signers chosen with DEPLOYER_INDEX
 * and EXCHANGE_WALLET_INDEX). Output: $DEPLOYMENT_FILE, default deployments/<chainId>.json.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

import { network } from "hardhat";

import { deploySuite } from "./deploy.js";

const { ethers } = await network.create();
const signers = await ethers.getSigners();
const deployer = signers[Number(process.env.DEPLOYER_INDEX ?? 0)];
const exchangeWallet = signers[Number(process.env.EXCHANGE_WALLET_INDEX ?? 1)];
if (!deployer || !exchangeWallet) throw new Error("the network needs two accounts: a deployer and an exchange wallet");

const { chainId } = await ethers.provider.getNetwork();
const { addresses } = await deploySuite(ethers, { deployer, exchangeWallet });
const file = process.env.DEPLOYMENT_FILE ?? `deployments/${chainId}.json`;
await mkdir(dirname(file), { recursive: true });
const deployment = { chainId: Number(chainId), exchangeWallet: exchangeWallet.address, ...addresses };
await writeFile(file, `${JSON.stringify(deployment, null, 2)}\n`);
console.log(`Deployed on chain ${chainId}; addresses written to ${file}`);
console.log(JSON.stringify(deployment, null, 2));
