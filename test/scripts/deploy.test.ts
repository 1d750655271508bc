import { expect } from "chai";
import { isAddress, parseUnits } from "ethers";
import { network } from "hardhat";

import { checkSuiteParameters, checkSuiteRoles } from "../../scripts/deploy-checks.js";
import { DEFAULT_MAX_PRICE_AGE, DEFAULT_PRICES, MINTER_ROLE, PAUSER_ROLE, deploySuite } from "../../scripts/deploy.js";
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
    expect(new Set(all).size).to.equal(9);

    const { token, swap, stableCoins } = contracts;
    expect(await token.symbol()).to.equal("FRT");
    expect(await swap.token()).to.equal(addresses.token);
    expect(await swap.MAX_STABLE_DECIMALS()).to.equal(18n);
    // The roles: the deployer is the one admin of both and may pause; only the swap mints.
    expect(await token.owner()).to.equal(owner.address);
    expect(await swap.owner()).to.equal(owner.address);
    expect(await token.hasRole(MINTER_ROLE, swap)).to.equal(true);
    expect(await token.hasRole(MINTER_ROLE, owner)).to.equal(false);
    expect(await swap.hasRole(PAUSER_ROLE, owner)).to.equal(true);
    expect([await token.defaultAdminDelay(), await swap.defaultAdminDelay()]).to.deep.equal([0n, 0n]);
    expect(await checkSuiteRoles(ethers.provider, { ...addresses, admin: owner.address })).to.deep.equal([]);
    expect(await swap.maxPriceAge()).to.equal(DEFAULT_MAX_PRICE_AGE);
    expect(await swap.currentPrice()).to.deep.equal([parseUnits("2.5", 8), 8n]);
    expect((await contracts.feeds.eurUsd.latestRoundData())[1]).to.equal(parseUnits("1.08", 8));
    expect((await contracts.feeds.chfUsd.latestRoundData())[1]).to.equal(parseUnits("1.12", 8));
    // The native coin's USD feed, for the gas in USD of quotes and of the trade history.
    expect(addresses.feeds.nativeUsd).to.equal(await contracts.feeds.nativeUsd.getAddress());
    expect(await contracts.feeds.nativeUsd.description()).to.equal("ETH / USD");
    expect(await contracts.feeds.nativeUsd.decimals()).to.equal(8n);
    expect((await contracts.feeds.nativeUsd.latestRoundData())[1]).to.equal(parseUnits(DEFAULT_PRICES.nativeUsd, 8));

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

  it("checkSuiteRoles names every role a deployment got wrong", async function () {
    const [owner, wallet, stranger] = await signers(ethers, 3);
    const { addresses, contracts } = await deploySuite(ethers, { deployer: owner, exchangeWallet: wallet });
    const { token, swap } = contracts;
    expect(await checkSuiteRoles(ethers.provider, { ...addresses, admin: stranger.address })).to.deep.equal([
      `token: its admin is ${owner.address}, not ${stranger.address}`,
      `swap: its admin is ${owner.address}, not ${stranger.address}`,
      `swap: the admin ${stranger.address} lacks PAUSER_ROLE`,
    ]);

    expect(
      await checkSuiteRoles(ethers.provider, { ...addresses, token: addresses.stableCoins.DAI, admin: owner.address }),
    ).to.deep.equal([
      `swap: trades ${addresses.token}, not the token ${addresses.stableCoins.DAI}`,
      `token: ${addresses.stableCoins.DAI} has no access control (not the TradedToken?)`,
    ]);

    // Another minter beside the swap, and an admin handover begun but not accepted.
    await token.connect(owner).grantRole(MINTER_ROLE, stranger);
    await swap.connect(owner).beginDefaultAdminTransfer(stranger);
    expect(await checkSuiteRoles(ethers.provider, { ...addresses, admin: owner.address })).to.deep.equal([
      `token: ${stranger.address} holds MINTER_ROLE; only the swap should`,
      `swap: a transfer of its admin role to ${stranger.address} is pending`,
    ]);
    await token.connect(owner).revokeRole(MINTER_ROLE, stranger);
    await swap.connect(owner).cancelDefaultAdminTransfer();
    expect(await checkSuiteRoles(ethers.provider, { ...addresses, admin: owner.address })).to.deep.equal([]);

    await token.connect(owner).revokeRole(MINTER_ROLE, swap);
    await token.connect(owner).grantRole(MINTER_ROLE, owner);
    await swap.connect(owner).renounceRole(PAUSER_ROLE, owner);
    expect(await checkSuiteRoles(ethers.provider, { ...addresses, admin: owner.address })).to.deep.equal([
      `token: the swap ${addresses.swap} lacks MINTER_ROLE, so it cannot mint or burn`,
      `token: the admin ${owner.address} holds MINTER_ROLE; only the swap should`,
      `swap: the admin ${owner.address} lacks PAUSER_ROLE`,
    ]);
  });

  it("checkSuiteParameters takes a native-coin USD feed when one is named, and checks it like the others", async function () {
    const [owner, wallet] = await signers(ethers, 2);
    const { addresses } = await deploySuite(ethers, { deployer: owner, exchangeWallet: wallet });
    const params = {
      dai: addresses.stableCoins.DAI,
      usdt: addresses.stableCoins.USDT,
      usdc: addresses.stableCoins.USDC,
      tokenUsdFeed: addresses.feeds.tokenUsd,
      eurUsdFeed: addresses.feeds.eurUsd,
      chfUsdFeed: addresses.feeds.chfUsd,
    };
    expect(await checkSuiteParameters(ethers.provider, params)).to.deep.equal([]); // optional
    expect(
      await checkSuiteParameters(ethers.provider, { ...params, nativeUsdFeed: addresses.feeds.nativeUsd! }),
    ).to.deep.equal([]);
    expect(await checkSuiteParameters(ethers.provider, { ...params, nativeUsdFeed: addresses.token })).to.deep.equal([
      `nativeUsdFeed: ${addresses.token} has 18 decimals; a USD feed must have 8`,
    ]);
  });
});
