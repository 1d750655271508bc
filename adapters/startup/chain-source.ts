/**
 * The signers-and-chain step of the composition root: where the chain is (the embedded chain of
 * dev mode, or RPC_URL's endpoints), the suite's addresses on it, and the exchange wallets'
 * signers (raw keys, or keystores decrypted once).
 */
import type { Logger } from "pino";

import {
  keystoreSigner,
  KeystoreError,
  openKmsSigners,
  openPkcs11Signers,
  rawKeySigner,
  redactUrl,
  SignerStartError,
  type DeploymentAddresses,
  type OpenedSigners,
  type TransactionSigner,
} from "../chain/index.js";
import { readDeploymentFile } from "../config/deployment-file.js";
import { ConfigError, type AppConfig, type RemoteSignerConfig, type RpcChainConfig } from "../config/env.js";
import { startDevChain, type StartEmbeddedChain } from "../dev-mode.js";
import type { Shutdown } from "./shutdown.js";

export interface ChainSource {
  rpcUrl: string;
  rpcUrls: string[];
  addresses: DeploymentAddresses;
  signers: TransactionSigner[];
  /** Embedded mode: the chain id the embedded chain runs (no probe needed). */
  embeddedChainId?: number;
  /** The chain the deployment file says the suite is on (when it says). */
  deployedChainId?: number;
  /** Embedded mode: the chain's process id, when it runs in its own process. */
  chainPid?: number;
}

/** The chain the service trades on, and its wallets' signers. */
export async function connectChain(
  config: AppConfig,
  embeddedChain: (() => Promise<StartEmbeddedChain>) | undefined,
  log: Logger,
  shutdown: Shutdown,
): Promise<ChainSource> {
  const remote = config.chain.signer === undefined ? undefined : await openSigners(config.chain.signer, log);
  if (remote !== undefined) shutdown.push(async () => remote.close());
  if (config.chain.mode === "embedded") {
    const funded = remote?.signers.map((signer) => signer.address);
    const chain = await startDevChain(config.chain, embeddedChain, log, funded);
    shutdown.push(() => chain.close());
    return {
      rpcUrl: chain.rpcUrl,
      rpcUrls: [chain.rpcUrl],
      addresses: chain.addresses,
      signers: remote?.signers ?? [rawKeySigner(chain.exchangeWallet.privateKey)],
      embeddedChainId: chain.chainId,
      ...(chain.pid === undefined ? {} : { chainPid: chain.pid }),
    };
  }
  const { rpcUrl, rpcUrls } = config.chain;
  const { chainId: deployedChainId, ...fileAddresses } = readDeploymentFile(config.chain.deploymentFile);
  // NATIVE_USD_FEED names the native coin's USD feed where the deployment file does not (or overrides it).
  const nativeUsd = config.chain.nativeUsdFeed ?? fileAddresses.feeds.nativeUsd;
  const addresses: DeploymentAddresses = {
    ...fileAddresses,
    feeds: {
      tokenUsd: fileAddresses.feeds.tokenUsd,
      eurUsd: fileAddresses.feeds.eurUsd,
      chfUsd: fileAddresses.feeds.chfUsd,
      ...(nativeUsd === undefined ? {} : { nativeUsd }),
    },
  };
  const signers = remote?.signers ?? (await loadSigners(config.chain, log));
  log.info({ rpcUrls: rpcUrls.map(redactUrl), swap: addresses.swap }, "using an existing chain");
  return { rpcUrl, rpcUrls, addresses, signers, ...(deployedChainId === undefined ? {} : { deployedChainId }) };
}

/** The exchange wallets' signers: decrypted from EXCHANGE_KEYSTORE once, or the raw EXCHANGE_PRIVATE_KEYS. */
async function loadSigners(chain: RpcChainConfig, log: Logger): Promise<TransactionSigner[]> {
  if (chain.keystore === undefined) return chain.privateKeys.map(rawKeySigner);
  const started = Date.now();
  const signers: TransactionSigner[] = [];
  for (const { path, json } of chain.keystore.files) {
    try {
      signers.push(await keystoreSigner(json, chain.keystore.password, path));
    } catch (error) {
      if (error instanceof KeystoreError) throw new ConfigError([`EXCHANGE_KEYSTORE: ${error.message}`]);
      throw error;
    }
  }
  log.info({ wallets: signers.map((s) => s.address), ms: Date.now() - started }, "exchange wallet keystores decrypted");
  return signers;
}

/**
 * The wallets' signers in an HSM (SIGNER=pkcs11) or AWS KMS (SIGNER=aws-kms), each key checked
 * against the wallet address named for it before any trade.
 * @throws ConfigError naming the variable (never the PIN) when a key cannot be used as configured
 */
async function openSigners(signer: RemoteSignerConfig, log: Logger): Promise<OpenedSigners> {
  const started = Date.now();
  let opened: OpenedSigners;
  try {
    // A refused signature's detail (the token, the KMS key, why) goes to the log; the client is told the wallet.
    opened =
      signer.kind === "pkcs11" ? await openPkcs11Signers({ ...signer, log }) : await openKmsSigners({ ...signer, log });
  } catch (error) {
    if (error instanceof SignerStartError) throw new ConfigError([error.message]);
    throw error;
  }
  log.info(
    { signer: signer.kind, wallets: opened.signers.map((s) => s.address), ms: Date.now() - started },
    "exchange wallet keys found in the signer, each its wallet's",
  );
  return opened;
}
