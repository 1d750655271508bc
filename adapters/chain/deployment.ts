/**
 * What the chain adapter reads of its deployment once, at start (create-chain-adapter.ts): the
 * chain id, the token's symbol, the stable coins' decimals; and the feeds, whose optional ones
 * (the native coin's USD price, the L2 sequencer's uptime) are refused at start when unreadable.
 */
import { Contract, type JsonRpcApiProvider } from "ethers";

import { ChainUnavailableError, type StableCoin } from "../../core/index.js";
import { FeedGuard, SEQUENCER_SETTINGS, type FeedPolicy } from "./price/index.js";
import { isChainUnreachable } from "./rpc/index.js";
import { ERC20_ABI } from "./tx/index.js";

/** Where the suite lives (written by scripts/deploy.ts, read from a deployment file in production). */
export interface DeploymentAddresses {
  token: string;
  swap: string;
  stableCoins: { DAI: string; USDT: string; USDC: string };
  /**
   * `nativeUsd`: the chain's native coin in USD (e.g. Chainlink's ETH / USD), for the gas in USD
   * of quotes and of the trade history; optional (older deployments have none: those stay null).
   */
  feeds: { tokenUsd: string; eurUsd: string; chfUsd: string; nativeUsd?: string };
}

/** Where the operator names the native coin's USD feed: errors name both. */
export const NATIVE_USD_FEED_SETTING = "NATIVE_USD_FEED (or the deployment file's feeds.nativeUsd)";

/** The chain id, the token's symbol and the stable coins, read from the node; ChainUnavailableError if it does not answer. */
export async function readDeployment(
  provider: JsonRpcApiProvider,
  addresses: DeploymentAddresses,
): Promise<{ chainId: bigint; tokenSymbol: string; stableCoins: StableCoin[] }> {
  let chainId: bigint;
  let tokenSymbol: string;
  let stableCoins: StableCoin[];
  try {
    chainId = (await provider.getNetwork()).chainId;
    const token = new Contract(addresses.token, ERC20_ABI, provider);
    tokenSymbol = (await token.getFunction("symbol")()) as string;
    stableCoins = await Promise.all(
      (["DAI", "USDT", "USDC"] as const).map(async (symbol) => {
        const coin = new Contract(addresses.stableCoins[symbol], ERC20_ABI, provider);
        const decimals = Number(await coin.getFunction("decimals")());
        return { symbol, address: addresses.stableCoins[symbol] as `0x${string}`, decimals };
      }),
    );
  } catch (error) {
    if (isChainUnreachable(error)) throw new ChainUnavailableError("the JSON-RPC node did not answer at start-up");
    throw new Error(`the deployment at ${addresses.swap} could not be read: ${(error as Error).message}`);
  }
  return { chainId, tokenSymbol, stableCoins };
}

/** The feed policy's guard on the deployment's feeds, each optional feed read once to refuse a wrong address at start. */
export async function guardFeeds(
  provider: JsonRpcApiProvider,
  addresses: DeploymentAddresses,
  policy: FeedPolicy,
): Promise<FeedGuard> {
  const feeds = new FeedGuard({
    provider,
    swap: addresses.swap,
    policy,
    ...(addresses.feeds.nativeUsd === undefined ? {} : { nativeUsd: addresses.feeds.nativeUsd }),
  });
  if (addresses.feeds.nativeUsd !== undefined) {
    // A wrong address would leave every USD figure of gas null, silently: refuse it at start.
    try {
      await feeds.readNativeUsd();
    } catch (error) {
      if (isChainUnreachable(error)) throw new ChainUnavailableError("the JSON-RPC node did not answer at start-up");
      throw new Error(
        `${NATIVE_USD_FEED_SETTING}: ${addresses.feeds.nativeUsd} is not a readable price feed (${(error as { shortMessage?: string }).shortMessage ?? (error as Error).message})`,
      );
    }
  }
  if (feeds.policy.sequencer !== undefined) {
    // A wrong address would make every price and trade unavailable: refuse it at start instead.
    try {
      await feeds.readSequencer();
    } catch (error) {
      if (isChainUnreachable(error)) throw new ChainUnavailableError("the JSON-RPC node did not answer at start-up");
      throw new Error(
        `${SEQUENCER_SETTINGS.feed}: ${feeds.policy.sequencer.address} is not a readable uptime feed (${(error as { shortMessage?: string }).shortMessage ?? (error as Error).message})`,
      );
    }
  }
  return feeds;
}
