/**
 * `npm run deploy`'s last step when the exchange wallets' keys are in an HSM or KMS (SIGNER=pkcs11
 * or aws-kms, configured as for the service): the deployer gives each wallet gas (DEPLOY_WALLET_GAS,
 * in whole native coins, up to that balance) and, with DEPLOY_MOCKS=true, tokens and mock stable
 * coins (DEPLOY_WALLET_FUNDING whole units each); then each wallet approves the swap for its
 * balance of the token and of each stable coin, signed in the HSM or KMS (signer-wallet.ts), so
 * its key never leaves it. An allowance already at the balance is left alone; one below it but
 * not zero is first reset to zero (USDT refuses to change a non-zero allowance to another).
 */
import { Contract, formatUnits, id, parseUnits, type Provider, type Signer } from "ethers";

import { SignerWallet } from "./signer-wallet.js";
import type { TransactionSigner } from "../adapters/chain/index.js";

const ERC20 = [
  "function balanceOf(address) view returns (uint256)",
  "function allowance(address,address) view returns (uint256)",
  "function approve(address,uint256)",
  "function decimals() view returns (uint8)",
  "function symbol() view returns (string)",
  "function mint(address,uint256)",
];
const TOKEN_ROLES = ["function grantRole(bytes32,address)", "function renounceRole(bytes32,address)"];

export interface WalletSetup {
  provider: Provider;
  deployer: Signer;
  signers: readonly TransactionSigner[];
  swap: string;
  token: string;
  stableCoins: readonly string[];
  /** Whole native coins each wallet should have for gas; unset: none sent. */
  gas?: string;
  /** With mocks: whole units of the token and of each stable coin minted to each wallet; unset: none. */
  funding?: string;
  log: (line: string) => void;
}

/** Funds (gas, and mocks when asked) and approves every wallet; the approvals are signed by its signer. */
export async function prepareWallets(setup: WalletSetup): Promise<void> {
  const { provider, deployer, signers, log } = setup;
  for (const signer of signers) {
    if (setup.gas !== undefined) {
      const want = parseUnits(setup.gas, 18);
      const has = await provider.getBalance(signer.address);
      if (has < want) {
        await (await deployer.sendTransaction({ to: signer.address, value: want - has })).wait();
        log(`  ${signer.address}: ${formatUnits(want - has, 18)} native coin for gas, from the deployer`);
      }
    }
  }
  if (setup.funding !== undefined) await mintMocks(setup, setup.funding);
  for (const signer of signers) {
    const wallet = new SignerWallet(signer, provider);
    for (const asset of [setup.token, ...setup.stableCoins]) await approveBalance(wallet, asset, setup.swap, log);
  }
}

/** Mock stable coins mint to anyone; the token only to a minter: the deployer (its admin) is one for this step. */
async function mintMocks(setup: WalletSetup, funding: string): Promise<void> {
  const { deployer, signers, log } = setup;
  const deployerAddress = await deployer.getAddress();
  const roles = new Contract(setup.token, TOKEN_ROLES, deployer);
  const minter = id("MINTER_ROLE");
  await (await roles.getFunction("grantRole")(minter, deployerAddress)).wait();
  try {
    for (const asset of [setup.token, ...setup.stableCoins]) {
      const coin = new Contract(asset, ERC20, deployer);
      const amount = parseUnits(funding, Number(await coin.getFunction("decimals")()));
      for (const signer of signers) await (await coin.getFunction("mint")(signer.address, amount)).wait();
      log(`  minted ${funding} ${await coin.getFunction("symbol")()} to each wallet (DEPLOY_MOCKS)`);
    }
  } finally {
    await (await roles.getFunction("renounceRole")(minter, deployerAddress)).wait();
  }
}

async function approveBalance(wallet: SignerWallet, asset: string, swap: string, log: (line: string) => void) {
  const coin = new Contract(asset, ERC20, wallet);
  const [balance, allowance, symbol] = await Promise.all([
    coin.getFunction("balanceOf")(wallet.address) as Promise<bigint>,
    coin.getFunction("allowance")(wallet.address, swap) as Promise<bigint>,
    coin.getFunction("symbol")() as Promise<string>,
  ]);
  if (balance === 0n || allowance >= balance) return;
  if (allowance > 0n) await (await coin.getFunction("approve")(swap, 0n)).wait();
  await (await coin.getFunction("approve")(swap, balance)).wait();
  log(`  ${wallet.address} approved the swap for ${balance} base units of ${symbol} (signed by its signer)`);
}
