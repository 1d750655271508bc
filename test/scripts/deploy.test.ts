import { expect } from "chai";
import { isAddress, parseUnits } from "ethers";
import { network } from "hardhat";

import { DEFAULT_MAX_PRICE_AGE, deploySuite } from "../../scripts/deploy.js";
import { signers } from "../helpers/suite.js";

const { ethers } = await network.create();

describe("deploySuite", function () {
  it("deploys the suite, seeds reserves, and funds and approves every exchange wallet", async function () {
    const [owner, walletA, walletB] = await signers(ethers, 3);
    const { addresses, contracts } = await deploySuite(ethers, {
      deployer: owner,
      exchangeWallet: [walletA, walletB],
      token: { name: "Franc Token", symbol: "FRT" },
      prices: { tokenUsd: "2.5" },
      reservesPerStable: "500",
      walletFunding: "40",
    });
    const all = [
      addresses.token,
      addresses.swap,
      ...Object.values(addresses.stableCoins),
      ...Object.values(addresses.feeds),
    ];
    expect(all.every((a) => isAddress(a))).to.equal(true);
    expect(new Set(all).size).to.equal(8);

    const { token, swap, stableCoins } = contracts;
    expect(await token.symbol()).to.equal("FRT");
    expect(await token.minter()).to.equal(addresses.swap);
    expect(await swap.token()).to.equal(addresses.token);
    expect(await swap.MAX_STABLE_DECIMALS()).to.equal(18n);
    expect(await token.owner()).to.equal(owner.address);
    expect(await swap.owner()).to.equal(owner.address);
    expect(await swap.maxPriceAge()).to.equal(DEFAULT_MAX_PRICE_AGE);
    expect(await swap.currentPrice()).to.deep.equal([parseUnits("2.5", 8), 8n]);
    expect((await contracts.feeds.eurUsd.latestRoundData())[1]).to.equal(parseUnits("1.08", 8));
    expect((await contracts.feeds.chfUsd.latestRoundData())[1]).to.equal(parseUnits("1.12", 8));

    for (const [symbol, decimals] of [
      ["DAI", 18],
      ["USDT", 6],
      ["USDC", 6],
    ] as const) {
      const coin = stableCoins[symbol];
      expect(await coin.decimals()).to.equal(BigInt(decimals));
      expect(await coin.balanceOf(swap)).to.equal(parseUnits("500", decimals));
      for (const wallet of [walletA, walletB]) {
        expect(await coin.balanceOf(wallet)).to.equal(parseUnits("40", decimals));
        expect(await coin.allowance(wallet, swap)).to.equal(parseUnits("40", decimals));
      }
    }
    for (const wallet of [walletA, walletB]) {
      expect(await token.balanceOf(wallet)).to.equal(parseUnits("40", 18));
      expect(await token.allowance(wallet, swap)).to.equal(parseUnits("40", 18));
    }
  });
});
