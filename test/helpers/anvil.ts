/**
 * Foundry's anvil, an independent node (not Hardhat's EDR), from the npm package
 * @foundry-rs/anvil: started on a free port, with the contract suite deployed on it through
 * Hardhat's `localhost` network pointed at its URL, then mining a block every second.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";

import type { Signer } from "ethers";

import type { DeploymentAddresses, TransactionSigner } from "../../adapters/chain/index.js";
import { deploySuite } from "../../scripts/deploy.js";
import { SignerWallet } from "../../scripts/signer-wallet.js";

const require = createRequire(import.meta.url);

/** The anvil binary of this platform, from the package's optional platform dependency. */
export function anvilBinary(): string {
  const arch = ({ x64: "amd64", arm64: "arm64" } as Record<string, string>)[process.arch];
  const name = `@foundry-rs/anvil-${process.platform}-${arch ?? process.arch}`;
  let binary: string;
  try {
    binary = join(dirname(require.resolve(`${name}/package.json`)), "bin", "anvil");
  } catch {
    throw new Error(`${name} is not installed: run npm install (anvil comes from the npm package @foundry-rs/anvil)`);
  }
  if (!existsSync(binary)) throw new Error(`${binary} is missing: reinstall @foundry-rs/anvil`);
  return binary;
}

export interface Anvil {
  url: string;
  port: number;
  /** One JSON-RPC call; a JSON-RPC error rejects with its message. */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** Stops the node (SIGTERM; with `--state`, it writes its state first). */
  stop(): Promise<void>;
  /** Starts it again on the same port and arguments. */
  restart(): Promise<void>;
}

export interface AnvilOptions {
  /** anvil --block-time, in seconds; unset: a block per transaction. */
  blockTime?: number;
  /** anvil --state: loaded at start and written at exit. */
  state?: string;
  /** anvil --hardfork (e.g. "shanghai"); unset: anvil's default. */
  hardfork?: string;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => probe.once("error", reject).listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

export async function startAnvil(options: AnvilOptions = {}): Promise<Anvil> {
  const binary = anvilBinary();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const args = ["--port", String(port), "--host", "127.0.0.1", "--quiet"];
  if (options.blockTime !== undefined) args.push("--block-time", String(options.blockTime));
  if (options.state !== undefined) args.push("--state", options.state);
  if (options.hardfork !== undefined) args.push("--hardfork", options.hardfork);
  let child: ChildProcess | undefined;
  let ids = 0;

  const rpc = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++ids, method, params }),
    });
    const body = (await response.json()) as { result?: T; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result as T;
  };

  const start = async () => {
    let output = "";
    child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const until = Date.now() + 20_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`anvil exited with ${child.exitCode}: ${output}`);
      try {
        await rpc("eth_chainId");
        return;
      } catch {
        if (Date.now() > until) throw new Error(`anvil did not answer on ${url}: ${output}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };

  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGTERM");
    const timer = setTimeout(() => running.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };

  await start();
  process.once("exit", () => child?.kill("SIGKILL"));
  return { url, port, rpc, stop, restart: start };
}

/**
 * Deploys the suite on the node at `url` through Hardhat's `localhost` network (account #0
 * deploys, account #1 is the funded and approved exchange wallet; anvil unlocks the same
 * default accounts as Hardhat), mined at once, then sets `blockTime` ms interval mining.
 */
export async function deployOnAnvil(
  anvil: Anvil,
  blockTimeMs: number,
  wallets?: readonly TransactionSigner[],
): Promise<DeploymentAddresses> {
  const { network } = await import("hardhat");
  await anvil.rpc("evm_setAutomine", [true]);
  const connection = await network.create({ network: "localhost", override: { url: anvil.url } });
  try {
    const [deployer, exchange] = await connection.ethers.getSigners();
    let exchangeWallet: Signer | Signer[] = exchange!;
    if (wallets !== undefined) {
      // Wallets whose keys are in an HSM or KMS: gas from anvil, approvals signed by their signers.
      for (const wallet of wallets) await anvil.rpc("anvil_setBalance", [wallet.address, "0x56bc75e2d63100000"]);
      exchangeWallet = wallets.map((wallet) => new SignerWallet(wallet, connection.ethers.provider));
    }
    const { addresses } = await deploySuite(connection.ethers, { deployer: deployer!, exchangeWallet });
    return addresses;
  } finally {
    await connection.close();
    await anvil.rpc("evm_setIntervalMining", [blockTimeMs / 1000]);
  }
}
