/**
 * An operator's whole path on an independent node (Foundry's anvil, a block a second):
 * stable coins and feeds already on the network (deployed first, as if they were the real
 * ones), `npm run deploy` against them, then the service started from its production build
 * with the exchange wallet in an encrypted keystore and two RPC endpoints, one of them a
 * proxy that is killed and restarted while trades go through. No trade may fail because one
 * endpoint went down.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import { Contract, Wallet, encryptKeystoreJson, id, parseUnits } from "ethers";

import { hardhatAccount } from "../../scripts/embedded-chain/chain.js";
import { startAnvil, type Anvil } from "../helpers/anvil.js";
import { productionApp, productionEntry } from "../helpers/production-build.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const HARDHAT = join(ROOT, "node_modules", ".bin", "hardhat");
const API_KEY = "real-network-test-key-0123456789";
const PASSWORD = "keystore password for the test";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const DEPLOYER = hardhatAccount(0);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** A TCP proxy in front of the node, on a fixed port, that can be killed (every connection cut) and restarted. */
class KillableProxy {
  #server: net.Server | undefined;
  readonly #sockets = new Set<net.Socket>();
  constructor(
    readonly port: number,
    private readonly target: number,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target, "127.0.0.1");
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("error", () => {});
      }
      client.pipe(upstream).pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(this.port, "127.0.0.1", resolve));
    this.#server = server;
  }

  async kill(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** `npm run deploy` as an operator runs it: the Hardhat CLI on the `rpc` network, configured by the environment. */
function deploy(env: Record<string, string>) {
  return spawnSync(HARDHAT, ["run", "scripts/deploy-cli.ts", "--network", "rpc"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    encoding: "utf8",
    timeout: 120_000,
  });
}

describe("on a real network: deploy with the CLI, start the production build with a keystore, trade over two endpoints", function () {
  this.timeout(300_000);

  let anvil: Anvil;
  let proxy: KillableProxy;
  let dir: string;
  let service: ChildProcess | undefined;
  let out = "";
  let existing: {
    dai: string;
    usdt: string;
    usdc: string;
    tokenUsdFeed: string;
    eurUsdFeed: string;
    chfUsdFeed: string;
  };

  before(async function () {
    anvil = await startAnvil({ blockTime: 1 });
    proxy = new KillableProxy(await freePort(), anvil.port);
    await proxy.start();
    dir = mkdtempSync(join(tmpdir(), "real-network-"));

    // The network's "real" stable coins and feeds: deployed by someone else, before us.
    const { network } = await import("hardhat");
    await anvil.rpc("evm_setAutomine", [true]);
    const connection = await network.create({ network: "localhost", override: { url: anvil.url } });
    const issuer = (await connection.ethers.getSigners())[5]!;
    const deployed = async (name: string, args: unknown[]) =>
      (await connection.ethers.deployContract(name, args, issuer)).getAddress();
    existing = {
      dai: await deployed("MockStableCoin", ["Dai Stablecoin", "DAI", 18]),
      usdt: await deployed("MockUSDT", []),
      usdc: await deployed("MockStableCoin", ["USD Coin", "USDC", 6]),
      tokenUsdFeed: await deployed("MockAggregator", [8, "TTK / USD", parseUnits("1.25", 8)]),
      eurUsdFeed: await deployed("MockAggregator", [8, "EUR / USD", parseUnits("1.08", 8)]),
      chfUsdFeed: await deployed("MockAggregator", [8, "CHF / USD", parseUnits("1.12", 8)]),
    };
    await connection.close();
    await anvil.rpc("evm_setIntervalMining", [1]);
  });

  after(async function () {
    if (service && service.exitCode === null) service.kill("SIGKILL");
    await proxy?.kill();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    rmSync(join(ROOT, "ignition", "deployments", `test-${process.pid}`), { recursive: true, force: true });
    rmSync(join(ROOT, "ignition", "deployments", `test-bad-${process.pid}`), { recursive: true, force: true });
  });

  const deployEnv = (parameters: object, id: string) => {
    const file = join(dir, `${id}.parameters.json`);
    writeFileSync(file, JSON.stringify({ TokenSwapSuite: parameters }));
    return {
      DEPLOY_RPC_URL: anvil.url,
      DEPLOYER_PRIVATE_KEY: DEPLOYER.privateKey,
      DEPLOY_PARAMETERS: file,
      DEPLOYMENT_ID: id,
      DEPLOYMENT_FILE: join(dir, `${id}.deployment.json`),
    };
  };

  it("refuses parameters whose decimals are wrong, naming them, before sending anything", async function () {
    const nonce = await anvil.rpc<string>("eth_getTransactionCount", [DEPLOYER.address, "latest"]);
    const run = deploy(
      deployEnv({ ...existing, dai: existing.eurUsdFeed, usdc: DEPLOYER.address }, `test-bad-${process.pid}`),
    );
    expect(run.status, run.stdout + run.stderr).to.equal(1);
    expect(run.stderr).to.include(`dai: ${existing.eurUsdFeed} has 8 decimals; a stable coin must have 6 or 18`);
    expect(run.stderr).to.include(`usdc: no contract at ${DEPLOYER.address}`);
    expect(run.stderr).to.include("nothing was deployed");
    expect(await anvil.rpc<string>("eth_getTransactionCount", [DEPLOYER.address, "latest"])).to.equal(nonce);
  });

  it("deploys against the existing coins and feeds and writes the deployment file, then trades through a killed and restarted endpoint", async function () {
    const env = deployEnv({ ...existing, tokenSymbol: "RNT" }, `test-${process.pid}`);
    const run = deploy(env);
    expect(run.status, run.stdout + run.stderr).to.equal(0);
    const deployment = JSON.parse(readFileSync(env.DEPLOYMENT_FILE, "utf8")) as {
      chainId: number;
      token: string;
      swap: string;
      stableCoins: Record<"DAI" | "USDT" | "USDC", string>;
      feeds: Record<string, string>;
    };
    expect(deployment.chainId).to.equal(31337);
    expect(deployment.stableCoins).to.deep.equal({ DAI: existing.dai, USDT: existing.usdt, USDC: existing.usdc });
    expect(deployment.feeds).to.deep.equal({
      tokenUsd: existing.tokenUsdFeed,
      eurUsd: existing.eurUsdFeed,
      chfUsd: existing.chfUsdFeed,
    });
    expect(run.stdout + run.stderr).to.not.include(DEPLOYER.privateKey.slice(2));

    // The operator funds the hot wallet: gas, tokens to sell; the swap holds USDC to pay out.
    const wallet = Wallet.createRandom();
    await anvil.rpc("anvil_setBalance", [wallet.address, "0x8ac7230489e80000"]); // 10 ETH
    const { network } = await import("hardhat");
    const connection = await network.create({ network: "localhost", override: { url: anvil.url } });
    const signers = await connection.ethers.getSigners();
    const token = new Contract(
      deployment.token,
      [
        "function mint(address,uint256)",
        "function symbol() view returns (string)",
        "function grantRole(bytes32,address)",
        "function renounceRole(bytes32,address)",
      ],
      signers[0]!,
    );
    // Only the swap mints after the deployment: the admin grants itself MINTER_ROLE to mint, then gives it up.
    const minterRole = id("MINTER_ROLE");
    await (await token.getFunction("grantRole")(minterRole, signers[0]!.address)).wait();
    await (await token.getFunction("mint")(wallet.address, parseUnits("1000", 18))).wait();
    await (await token.getFunction("renounceRole")(minterRole, signers[0]!.address)).wait();
    const usdc = new Contract(
      existing.usdc,
      ["function mint(address,uint256)", "function balanceOf(address) view returns (uint256)"],
      signers[5]!,
    );
    await (await usdc.getFunction("mint")(deployment.swap, parseUnits("100000", 6))).wait();
    await connection.close();

    // The key only in an encrypted keystore, its password in a file.
    writeFileSync(
      join(dir, "wallet.json"),
      await encryptKeystoreJson({ address: wallet.address, privateKey: wallet.privateKey }, PASSWORD),
    );
    writeFileSync(join(dir, "password"), `${PASSWORD}\n`);

    const port = await freePort();
    const api = `http://127.0.0.1:${port}`;
    const [command, ...args] = productionEntry();
    service = spawn(command!, args, {
      cwd: productionApp(),
      env: {
        PATH: process.env.PATH ?? "",
        RPC_URL: `${proxy.url},${anvil.url}`,
        RPC_TIMEOUT_MS: "2000",
        DEPLOYMENT_FILE: env.DEPLOYMENT_FILE,
        EXCHANGE_KEYSTORE: join(dir, "wallet.json"),
        EXCHANGE_KEYSTORE_PASSWORD_FILE: join(dir, "password"),
        API_KEYS: API_KEY,
        PORT: String(port),
        DATA_DIR: join(dir, "data"),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    service.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    service.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    await waitFor("the service to be ready", async () => {
      if (service!.exitCode !== null) throw new Error(`the service exited: ${out}`);
      return fetch(`${api}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
    });
    // Log lines are written within 200 ms (buffered): waited for, not expected at once.
    await waitFor("the keystore's log line", () => out.includes("keystores decrypted"), 5_000);

    const sell = () =>
      fetch(`${api}/api/v1/token/sell`, {
        method: "POST",
        headers: { api_key: API_KEY, "content-type": "application/json" },
        body: JSON.stringify({
          userAddress: wallet.address,
          destinatary: CUSTOMER,
          amount: "1",
          usdAddress: existing.usdc,
        }),
      }).then(async (response) => ({
        status: response.status,
        body: (await response.json()) as { status?: boolean; transactionHash?: string; message?: string },
      }));

    // Trades go on, two at a time, while the preferred endpoint dies and comes back.
    const answers: Array<{ status: number; body: { status?: boolean; transactionHash?: string; message?: string } }> =
      [];
    let readyWhileDown = "";
    for (let round = 0; round < 12; round++) {
      if (round === 3) await proxy.kill();
      if (round === 6) readyWhileDown = await fetch(`${api}/readyz`).then((r) => r.text());
      if (round === 8) await proxy.start();
      answers.push(...(await Promise.all([sell(), sell()])));
    }
    for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(answers.every((a) => a.body.status === true)).to.equal(true);
    expect(new Set(answers.map((a) => a.body.transactionHash)).size).to.equal(24);
    expect(Number(await anvil.rpc<string>("eth_getTransactionCount", [wallet.address, "latest"]))).to.equal(24 + 1); // + the swap approval
    expect(readyWhileDown).to.match(/endpoints: 1\/2 up, http:\/\/127\.0\.0\.1:\d+ down/);
    await waitFor(
      "the endpoint's failure in the log",
      () => out.includes("JSON-RPC endpoint failed; resting it and using the others"),
      5_000,
    );
    await waitFor("the endpoint to come back", () => out.includes("JSON-RPC endpoint is back up"), 90_000);

    // Nothing secret reached the logs.
    expect(out).to.not.include(wallet.privateKey.slice(2));
    expect(out).to.not.include(PASSWORD);
    expect(out).to.not.include(API_KEY);

    service.kill("SIGTERM");
    expect(await new Promise((resolve) => service!.once("exit", resolve))).to.equal(0);
  });
});
