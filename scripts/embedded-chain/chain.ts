/**
 * The embedded chain of `npm start`: an in-process Hardhat (EDR) chain served as
 * JSON-RPC on 127.0.0.1, with the suite deployed on it. scripts/start.ts hands
 * `startEmbeddedChain` to the composition root, which calls it only without RPC_URL;
 * Hardhat is imported inside it, so production never loads Hardhat.
 */
import { HDNodeWallet } from "ethers";
import type { EmbeddedChain, EmbeddedChainOptions } from "../../adapters/dev-mode.js";

/** The mnemonic of Hardhat's default accounts: public test keys, never for real funds. */
export const HARDHAT_MNEMONIC = "test test test test test test test test test test test junk";

/** Hardhat account #index (m/44'/60'/0'/0/index) of the default mnemonic. */
export function hardhatAccount(index: number): HDNodeWallet {
  return HDNodeWallet.fromPhrase(HARDHAT_MNEMONIC, undefined, `m/44'/60'/0'/0/${index}`);
}

/** Account #0 deploys and owns the suite; account #1 is the exchange wallet. */
export const DEPLOYER_ACCOUNT = 0;
export const EXCHANGE_ACCOUNT = 1;

/** How often the embedded chain refreshes its mock price feeds. */
export const FEED_HEARTBEAT_MS = 60 * 60 * 1000;

/**
 * Builds the contracts when needed, starts the chain and its JSON-RPC server, and
 * deploys the suite through that server (so wallets and scripts see the same chain
 * the service trades on), funding and approving the exchange wallet.
 */
export async function startEmbeddedChain(options: EmbeddedChainOptions): Promise<EmbeddedChain> {
  const { log } = options;
  const hre = await import("hardhat");
  const { deploySuite } = await import("../deploy.js");

  await hre.tasks.getTask("build").run({ quiet: true, noTests: true });

  const server = await hre.network.createServer(undefined, "127.0.0.1", options.chainPort);
  let connection: Awaited<ReturnType<typeof hre.network.create>> | undefined;
  try {
    const { address, port } = await server.listen();
    const rpcUrl = `http://${address}:${port}`;
    connection = await hre.network.create({ network: "localhost", override: { url: rpcUrl } });
    const { ethers } = connection;
    const signers = await ethers.getSigners();
    const deployer = signers[DEPLOYER_ACCOUNT];
    const exchange = signers[EXCHANGE_ACCOUNT];
    const exchangeKey = hardhatAccount(EXCHANGE_ACCOUNT);
    if (deployer === undefined || exchange === undefined || exchange.address !== exchangeKey.address) {
      throw new Error(
        "the embedded chain does not use Hardhat's default accounts; remove custom accounts from hardhat.config.ts",
      );
    }
    const funded = options.fundedWallets;
    const { addresses, contracts } = await deploySuite(ethers, {
      exchangeWallet: exchange,
      deployer,
      ...(funded === undefined ? {} : { fundedAddresses: funded }),
    });
    // Like Chainlink's heartbeat: re-post each mock feed's answer hourly, so a long-running
    // development server never trips the swap's staleness check (25 hours by default).
    const heartbeat = setInterval(() => {
      for (const feed of Object.values(contracts.feeds)) {
        feed
          .latestRoundData()
          .then(([, answer]) => feed.connect(deployer).updateAnswer(answer))
          .catch((error: unknown) => log.warn({ err: error }, "embedded feed heartbeat failed"));
      }
    }, options.feedHeartbeatMs ?? FEED_HEARTBEAT_MS);
    heartbeat.unref();
    const chainId = Number((await ethers.provider.getNetwork()).chainId);
    if (options.blockTimeMs !== undefined) {
      // Only now, so the deployment above was mined instantly: from here on, transactions
      // wait in the mempool and a block is mined every blockTimeMs, like on a real chain.
      await connection.provider.request({ method: "evm_setAutomine", params: [false] });
      await connection.provider.request({ method: "evm_setIntervalMining", params: [options.blockTimeMs] });
    }
    log.info(
      {
        rpcUrl,
        chainId,
        swap: addresses.swap,
        exchangeWallet: funded?.[0] ?? exchange.address,
        mining: options.blockTimeMs === undefined ? "auto" : `every ${options.blockTimeMs} ms`,
      },
      "embedded chain ready",
    );

    const opened = connection;
    return {
      rpcUrl,
      chainId,
      deployer: deployer.address,
      exchangeWallet: { address: exchange.address, privateKey: exchangeKey.privateKey },
      addresses,
      async close() {
        clearInterval(heartbeat);
        await opened.close();
        await server.close();
      },
    };
  } catch (error) {
    await connection?.close().catch(() => {});
    await server.close().catch(() => {});
    throw error;
  }
}
