/**
 * `npm run deploy` with the exchange wallet's key in an HSM (SoftHSM, SIGNER=pkcs11): the key is
 * opened and checked before anything is sent, the deployer gives the wallet gas and (mocks) coins,
 * and the wallet's approvals of the swap are signed in the token, so the key never leaves it.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import { Contract, JsonRpcProvider, parseUnits } from "ethers";

import { hardhatAccount } from "../../scripts/embedded-chain/chain.js";
import { startAnvil, type Anvil } from "../helpers/anvil.js";
import { softHsmToken, type TestToken } from "../helpers/softhsm.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const HARDHAT = join(ROOT, "node_modules", ".bin", "hardhat");
const DEPLOYER = hardhatAccount(0);
const ERC20 = [
  "function allowance(address,address) view returns (uint256)",
  "function balanceOf(address) view returns (uint256)",
];

describe("npm run deploy with the exchange wallet's key in an HSM", function () {
  this.timeout(240_000);
  let anvil: Anvil;
  let dir: string;
  let token: TestToken;
  let key: { label: string; address: string };

  before(async function () {
    anvil = await startAnvil();
    dir = mkdtempSync(join(tmpdir(), "deploy-signers-"));
    token = await softHsmToken(`deploy-${process.pid}`);
    key = await token.newKey("exchange");
  });

  after(async function () {
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    for (const id of ["ok", "bad"])
      rmSync(join(ROOT, "ignition", "deployments", `test-hsm-${id}-${process.pid}`), { recursive: true, force: true });
  });

  const deploy = (id: string, env: Record<string, string>) =>
    spawnSync(HARDHAT, ["run", "scripts/deploy-cli.ts", "--network", "rpc"], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        DEPLOY_RPC_URL: anvil.url,
        DEPLOYER_PRIVATE_KEY: DEPLOYER.privateKey,
        DEPLOY_MOCKS: "true",
        DEPLOYMENT_ID: `test-hsm-${id}-${process.pid}`,
        DEPLOYMENT_FILE: join(dir, `${id}.json`),
        ...token.env,
        PKCS11_KEY_LABELS: key.label,
        EXCHANGE_ADDRESSES: key.address,
        DEPLOY_WALLET_GAS: "5",
        DEPLOY_WALLET_FUNDING: "1000",
        ...env,
      },
      encoding: "utf8",
      timeout: 180_000,
    });

  it("refuses a wrong PIN before sending anything, naming PKCS11_PIN_FILE and not the PIN", async function () {
    const wrong = join(dir, "wrong.pin");
    writeFileSync(wrong, "wrong-pin-0000\n");
    const nonce = await anvil.rpc<string>("eth_getTransactionCount", [DEPLOYER.address, "pending"]);
    const run = deploy("bad", { PKCS11_PIN_FILE: wrong });
    expect(run.status, run.stdout + run.stderr).to.equal(1);
    expect(run.stderr).to.match(/PKCS11_PIN_FILE: the token "deploy-\d+" refused the PIN/);
    expect(run.stdout + run.stderr).to.not.include("wrong-pin-0000");
    expect(await anvil.rpc<string>("eth_getTransactionCount", [DEPLOYER.address, "pending"])).to.equal(nonce);
  });

  it("funds the wallet and has it approve the swap for its balances, every approval signed in the HSM", async function () {
    const run = deploy("ok", {});
    expect(run.status, run.stdout + run.stderr).to.equal(0);
    expect(run.stdout + run.stderr).to.not.include(token.pin);
    const deployment = JSON.parse(readFileSync(join(dir, "ok.json"), "utf8")) as {
      token: string;
      swap: string;
      stableCoins: Record<string, string>;
    };
    const provider = new JsonRpcProvider(anvil.url);
    try {
      expect(await provider.getBalance(key.address)).to.be.greaterThan(parseUnits("4", 18));
      for (const asset of [deployment.token, ...Object.values(deployment.stableCoins)]) {
        const coin = new Contract(asset, ERC20, provider);
        const balance = (await coin.getFunction("balanceOf")(key.address)) as bigint;
        expect(balance, asset).to.be.greaterThan(0n);
        expect(await coin.getFunction("allowance")(key.address, deployment.swap), asset).to.equal(balance);
      }
      // Four approvals (the token, DAI, USDT, USDC), each sent by the wallet itself.
      expect(await provider.getTransactionCount(key.address, "latest")).to.equal(4);
    } finally {
      provider.destroy();
    }
    expect(run.stdout).to.include("approved the swap");
  });
});
