/**
 * The token and its swap, deployed against stable coins and price feeds that already exist
 * on the network (the real DAI, USDT, USDC and Chainlink feeds, or mocks on a dev network).
 *
 *   npx hardhat ignition deploy ignition/modules/TokenSwapSuite.ts --network rpc \
 *     --parameters ignition/parameters/example.json
 *
 * `npm run deploy` (scripts/deploy-cli.ts) runs this module after checking the parameters on
 * chain (decimals: 6 or 18 for the stable coins, 8 for the feeds) and writes the deployment
 * file `npm start` reads.
 *
 * Roles (see the contracts' NatSpec): the deployer (the network's first account) becomes the
 * one admin of both contracts, as it must be to grant the swap the token's MINTER_ROLE; it
 * also gets the swap's PAUSER_ROLE. Afterwards, hand the admin role of each contract to a
 * multisig (`beginDefaultAdminTransfer(multisig)`, then `acceptDefaultAdminTransfer()` from the
 * multisig once `adminDelay` seconds have passed) and grant PAUSER_ROLE to whoever watches the
 * service. The deployer never holds MINTER_ROLE: only the swap mints.
 */
import { buildModule } from "@nomicfoundation/hardhat-ignition/modules";

/** The swap refuses feed answers older than this, in seconds (25 h: Chainlink USD feeds beat at least daily). */
export const DEFAULT_MAX_PRICE_AGE_S = 25n * 60n * 60n;
/** Seconds a new admin waits before accepting the role: none by default (a later block), as Ownable2Step. */
export const DEFAULT_ADMIN_DELAY_S = 0n;

export default buildModule("TokenSwapSuite", (m) => {
  const owner = m.getAccount(0);
  const adminDelay = m.getParameter("adminDelay", DEFAULT_ADMIN_DELAY_S);
  const token = m.contract("TradedToken", [
    m.getParameter("tokenName", "Trade Token"),
    m.getParameter("tokenSymbol", "TTK"),
    adminDelay,
    owner,
  ]);
  const swap = m.contract("TokenSwap", [
    token,
    m.getParameter<string>("tokenUsdFeed"),
    m.getParameter("maxPriceAge", DEFAULT_MAX_PRICE_AGE_S),
    [m.getParameter<string>("dai"), m.getParameter<string>("usdt"), m.getParameter<string>("usdc")],
    adminDelay,
    owner,
  ]);
  // The role identifiers are read from the contracts themselves, so they cannot drift from them.
  m.call(token, "grantRole", [m.staticCall(token, "MINTER_ROLE"), swap], { id: "GrantSwapMinterRole" });
  m.call(swap, "grantRole", [m.staticCall(swap, "PAUSER_ROLE"), owner], { id: "GrantAdminPauserRole" });
  return { token, swap };
});
