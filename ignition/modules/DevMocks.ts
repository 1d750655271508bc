/**
 * Stand-ins for the real stable coins and Chainlink feeds, for dev and test networks only
 * (`DEPLOY_MOCKS=true npm run deploy`): anyone can mint the coins and set the feeds.
 * Never deploy this where value matters.
 */
import { buildModule } from "@nomicfoundation/hardhat-ignition/modules";

export default buildModule("DevMocks", (m) => {
  const dai = m.contract("MockStableCoin", ["Dai Stablecoin", "DAI", 18], { id: "DAI" });
  const usdt = m.contract("MockUSDT", [], { id: "USDT" });
  const usdc = m.contract("MockStableCoin", ["USD Coin", "USDC", 6], { id: "USDC" });
  // 8 decimals, as Chainlink's USD feeds.
  const tokenUsdFeed = m.contract("MockAggregator", [8, "TTK / USD", m.getParameter("tokenUsd", 125_000_000n)], {
    id: "TokenUsdFeed",
  });
  const eurUsdFeed = m.contract("MockAggregator", [8, "EUR / USD", m.getParameter("eurUsd", 108_000_000n)], {
    id: "EurUsdFeed",
  });
  const chfUsdFeed = m.contract("MockAggregator", [8, "CHF / USD", m.getParameter("chfUsd", 112_000_000n)], {
    id: "ChfUsdFeed",
  });
  // The native coin's USD price (the gas in USD of quotes and the trade history).
  const nativeUsdFeed = m.contract("MockAggregator", [8, "ETH / USD", m.getParameter("nativeUsd", 250_000_000_000n)], {
    id: "NativeUsdFeed",
  });
  return { dai, usdt, usdc, tokenUsdFeed, eurUsdFeed, chfUsdFeed, nativeUsdFeed };
});
