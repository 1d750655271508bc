/**
 * The token and its swap, deployed against stable coins and price feeds that already exist
 * on the network (the real DAI, USDT, USDC and Chainlink feeds, or mocks on a dev network).
 *
 *   npx hardhat ignition deploy ignition/modules/TokenSwapSuite.ts --network rpc \
 *     --parameters ignition/parameters/example.json
 *
 * `npm run deploy` (scripts/deploy-cli.ts) runs this module after checking the parameters on
 * chain (decimals: 6 or 18 for the stable coins, 8 for the feeds) and writes the deployment
 * file `npm start` reads. The deployer (the network's first account) owns both contracts:
 * it must be, to make the swap the token's minter; hand ownership to a multisig afterwards.
 */
import { buildModule } from "@nomicfoundation/hardhat-ignition/modules";

/** The swap refuses feed answers older than this, in seconds (25 h: Chainlink USD feeds beat at least daily). */
export const DEFAULT_MAX_PRICE_AGE_S = 25n * 60n * 60n;

export default buildModule("TokenSwapSuite", (m) => {
  const owner = m.getAccount(0);
  const token = m.contract("TradedToken", [
    m.getParameter("tokenName", "Trade Token"),
    m.getParameter("tokenSymbol", "TTK"),
    owner,
  ]);
  const swap = m.contract("TokenSwap", [
    token,
    m.getParameter<string>("tokenUsdFeed"),
    m.getParameter("maxPriceAge", DEFAULT_MAX_PRICE_AGE_S),
    [m.getParameter<string>("dai"), m.getParameter<string>("usdt"), m.getParameter<string>("usdc")],
    owner,
  ]);
  m.call(token, "setMinter", [swap]);
  return { token, swap };
});
