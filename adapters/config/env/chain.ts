/**
 * Which chain the service trades on: without RPC_URL the embedded Hardhat chain of `npm start`;
 * with it an existing chain, whose suite (DEPLOYMENT_FILE), wallets (EXCHANGE_KEYSTORE or
 * EXCHANGE_PRIVATE_KEYS) and api keys must then be given.
 */
import type { AppConfig, EmbeddedChainConfig, RpcChainConfig } from "./config.js";
import { readFile } from "./files.js";
import type { Env } from "./schema.js";
import { signerConfig } from "./signer.js";

const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;

/** The variables that only an existing chain reads: set without RPC_URL, they are a mistake worth naming. */
const RPC_ONLY = [
  "DEPLOYMENT_FILE",
  "NATIVE_USD_FEED",
  "EXCHANGE_PRIVATE_KEYS",
  "EXCHANGE_KEYSTORE",
  "EXCHANGE_KEYSTORE_PASSWORD_FILE",
] as const;

/** @param keys - the api keys already read: an existing chain needs at least one */
export function chainConfig(e: Env, keys: readonly string[], problems: string[]): AppConfig["chain"] {
  const signer = signerConfig(e, problems);
  const chain = e.RPC_URL === undefined ? embeddedChain(e, problems) : rpcChain(e, e.RPC_URL, keys, problems);
  return signer === undefined ? chain : { ...chain, signer };
}

function embeddedChain(e: Env, problems: string[]): EmbeddedChainConfig {
  for (const name of RPC_ONLY) {
    if (e[name] !== undefined)
      problems.push(`${name}: is only used with RPC_URL; set RPC_URL to use an existing chain, or unset ${name}`);
  }
  return {
    mode: "embedded",
    chainPort: e.CHAIN_PORT,
    ...(e.CHAIN_BLOCK_TIME_MS !== undefined ? { blockTimeMs: e.CHAIN_BLOCK_TIME_MS } : {}),
  };
}

function rpcChain(e: Env, rpcUrl: string, keys: readonly string[], problems: string[]): RpcChainConfig {
  if (e.CHAIN_BLOCK_TIME_MS !== undefined)
    problems.push(
      "CHAIN_BLOCK_TIME_MS: is only used by the embedded chain; unset it with RPC_URL (the chain sets its own block time)",
    );
  if (e.DEPLOYMENT_FILE === undefined)
    problems.push("DEPLOYMENT_FILE: is required when RPC_URL is set (the suite's addresses, see .env.example)");
  const privateKeys = (e.EXCHANGE_PRIVATE_KEYS ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter((k) => k !== "");
  // SIGNER=pkcs11 or aws-kms: the keys are in the signer (signer.ts refuses the others beside it).
  const keystore = e.SIGNER === "key" ? walletKeys(e, privateKeys, problems) : undefined;
  if (keys.length === 0 && e.ACCESS_FILE === undefined && !problems.some((p) => p.startsWith("API_KEYS"))) {
    problems.push("API_KEYS: is required when RPC_URL is set (or API_KEYS_FILE, or ACCESS_FILE)");
  }
  const rpcUrls = rpcUrl.split(",").map((url) => url.trim());
  if (new Set(rpcUrls).size !== rpcUrls.length) problems.push("RPC_URL: lists the same URL twice");
  return {
    mode: "rpc",
    rpcUrl: rpcUrls[0]!,
    rpcUrls,
    rpcTimeoutMs: e.RPC_TIMEOUT_MS,
    rpcBatchSize: e.RPC_BATCH_SIZE,
    deploymentFile: e.DEPLOYMENT_FILE ?? "",
    ...(e.NATIVE_USD_FEED === undefined ? {} : { nativeUsdFeed: e.NATIVE_USD_FEED }),
    privateKeys,
    ...(keystore === undefined ? {} : { keystore }),
  };
}

/** The wallets' keys: a keystore (read here) or EXCHANGE_PRIVATE_KEYS (checked here), exactly one of them. */
function walletKeys(e: Env, privateKeys: readonly string[], problems: string[]): RpcChainConfig["keystore"] {
  let keystore: RpcChainConfig["keystore"];
  if (e.EXCHANGE_KEYSTORE !== undefined && e.EXCHANGE_PRIVATE_KEYS !== undefined) {
    problems.push("EXCHANGE_KEYSTORE: set either EXCHANGE_KEYSTORE or EXCHANGE_PRIVATE_KEYS, not both");
  } else if (e.EXCHANGE_KEYSTORE !== undefined) {
    keystore = readKeystores(e.EXCHANGE_KEYSTORE, e.EXCHANGE_KEYSTORE_PASSWORD_FILE, problems);
  } else if (e.EXCHANGE_PRIVATE_KEYS === undefined || privateKeys.length === 0) {
    problems.push(
      "EXCHANGE_KEYSTORE: is required when RPC_URL is set (or EXCHANGE_PRIVATE_KEYS, comma-separated 0x-prefixed keys)",
    );
  } else if (!privateKeys.every((k) => PRIVATE_KEY.test(k))) {
    problems.push("EXCHANGE_PRIVATE_KEYS: every key must be 0x followed by 64 hex digits");
  }
  if (e.EXCHANGE_KEYSTORE_PASSWORD_FILE !== undefined && e.EXCHANGE_KEYSTORE === undefined) {
    problems.push("EXCHANGE_KEYSTORE_PASSWORD_FILE: is only used with EXCHANGE_KEYSTORE");
  }
  return keystore;
}

/** The keystore files (comma-separated paths) and their password, read now so that a missing file stops the start. */
function readKeystores(
  paths: string,
  passwordFile: string | undefined,
  problems: string[],
): RpcChainConfig["keystore"] {
  const files: Array<{ path: string; json: string }> = [];
  for (const path of paths
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "")) {
    const json = readFile("EXCHANGE_KEYSTORE", path, problems);
    if (json !== undefined) files.push({ path, json });
  }
  if (files.length === 0 && !problems.some((p) => p.startsWith("EXCHANGE_KEYSTORE:")))
    problems.push("EXCHANGE_KEYSTORE: names no file");
  if (passwordFile === undefined) {
    problems.push(
      "EXCHANGE_KEYSTORE_PASSWORD_FILE: is required with EXCHANGE_KEYSTORE (a file holding the keystore's password)",
    );
    return undefined;
  }
  const text = readFile("EXCHANGE_KEYSTORE_PASSWORD_FILE", passwordFile, problems);
  if (text === undefined) return undefined;
  // The file's last line break is not part of the password (echo and editors add one).
  const password = text.replace(/\r?\n$/, "");
  if (password === "") problems.push("EXCHANGE_KEYSTORE_PASSWORD_FILE: is empty");
  return { files, password };
}
