/**
 * Dev mode: what `npm start` needs when no RPC_URL is set, and production never does. The
 * embedded chain (started through an injected function, so adapters/ never imports Hardhat or
 * scripts/), a journal that lives as long as that chain, an api key when none was given, and
 * .dev/deployment.json for the developer's own scripts and wallets. The composition root
 * (main.ts, and its steps in startup/) calls these only in embedded mode.
 */
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

import type { Logger } from "pino";

import type { DeploymentAddresses } from "./chain/index.js";
import type { EmbeddedChainConfig } from "./config/env.js";

/** Where `npm start` writes what a developer needs to talk to the embedded chain and the API. */
export const DEV_DEPLOYMENT_FILE = ".dev/deployment.json";

/** The content of .dev/deployment.json (also a valid DEPLOYMENT_FILE for production mode). */
export interface DevDeployment extends DeploymentAddresses {
  chainId: number;
  rpcUrl: string;
  apiUrl: string;
  exchangeWallet: string;
}

/** A chain brought up by the service itself (npm start without RPC_URL), with the suite deployed. */
export interface EmbeddedChain {
  rpcUrl: string;
  chainId: number;
  deployer: string;
  /** The exchange wallet; its key is a public Hardhat test key (unused when the wallets are `fundedWallets`). */
  exchangeWallet: { address: string; privateKey: string };
  addresses: DeploymentAddresses;
  /** The chain's own process, when it runs in one (npm start's does). */
  pid?: number;
  close(): Promise<void>;
}

export interface EmbeddedChainOptions {
  /** Port of the JSON-RPC server on 127.0.0.1; 0 picks a free one. */
  chainPort: number;
  log: Logger;
  /** How often the mock price feeds are re-posted (default hourly), so they never go stale. */
  feedHeartbeatMs?: number;
  /** Mine a block every this many ms once deployed (CHAIN_BLOCK_TIME_MS); unset = a block per transaction. */
  blockTimeMs?: number;
  /**
   * The exchange wallets, when their keys are in a signer (SIGNER=pkcs11 or aws-kms): funded with
   * gas, tokens and stable coins, not approved (the service approves the swap at the first trade).
   * Unset: Hardhat account #1, funded and approved.
   */
  fundedWallets?: string[];
}

/** Starts an embedded chain. Injected (scripts/embedded-chain/chain.ts) so adapters/ never imports Hardhat or scripts/. */
export type StartEmbeddedChain = (options: EmbeddedChainOptions) => Promise<EmbeddedChain>;

/**
 * Starts the embedded chain (EMBEDDED mode: no RPC_URL).
 * @throws Error when the entry point brought no embedded chain (production's does not)
 */
export async function startDevChain(
  config: EmbeddedChainConfig,
  embeddedChain: (() => Promise<StartEmbeddedChain>) | undefined,
  log: Logger,
  fundedWallets?: string[],
): Promise<EmbeddedChain> {
  log.info({ chainPort: config.chainPort }, "starting the embedded Hardhat chain (no RPC_URL set)");
  if (embeddedChain === undefined) throw new Error("RPC_URL: is not set, and this entry point has no embedded chain");
  const startEmbeddedChain = await embeddedChain();
  return startEmbeddedChain({
    chainPort: config.chainPort,
    log,
    ...(config.blockTimeMs !== undefined ? { blockTimeMs: config.blockTimeMs } : {}),
    ...(fundedWallets !== undefined ? { fundedWallets } : {}),
  });
}

/**
 * The embedded chain is new at each start, so its journal is too: a fresh directory, removed
 * at shutdown, which also lets several embedded services run side by side.
 */
export async function temporaryJournalDir(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "token-service-journal-"));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** An api key for a service started without API_KEYS (embedded mode): 24 random bytes, base64url. */
export function generateApiKey(): string {
  return randomBytes(24).toString("base64url");
}

/** Writes .dev/deployment.json under `rootDir`; returns its path. */
export async function writeDevDeployment(rootDir: string, deployment: DevDeployment): Promise<string> {
  const file = resolve(rootDir, DEV_DEPLOYMENT_FILE);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(deployment, null, 2)}\n`);
  return file;
}
