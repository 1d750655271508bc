import { expect } from "chai";
import { ZeroAddress } from "ethers";
import { network } from "hardhat";

import { signers } from "../../helpers/suite.js";

const { ethers } = await network.create();

describe("MockStableCoin", function () {
  for (const [name, symbol, decimals] of [
    ["Dai Stablecoin", "DAI", 18n],
    ["USD Coin", "USDC", 6n],
  ] as const) {
    it(`reports the real decimals of ${symbol} (${decimals})`, async function () {
      const coin = await ethers.deployContract("MockStableCoin", [name, symbol, decimals]);
      expect([await coin.name(), await coin.symbol(), await coin.decimals()]).to.deep.equal([name, symbol, decimals]);
    });
  }

  it("mints to anyone, like a faucet", async function () {
    const [, someone] = await signers(ethers, 2);
    const coin = await ethers.deployContract("MockStableCoin", ["USD Coin", "USDC", 6]);
    await expect(coin.connect(someone).mint(someone, 42n))
      .to.emit(coin, "Transfer")
      .withArgs(ZeroAddress, someone.address, 42n);
    expect(await coin.balanceOf(someone)).to.equal(42n);
  });

  it("does not emit Approval when transferFrom spends an allowance, like DAI and USDC", async function () {
    const [holder, spender] = await signers(ethers, 2);
    const coin = await ethers.deployContract("MockStableCoin", ["Dai Stablecoin", "DAI", 18]);
    await coin.mint(holder, 10n);
    await coin.approve(spender, 10n);
    const receipt = await (await coin.connect(spender).transferFrom(holder, spender, 4n)).wait();
    expect(receipt!.logs.map((log) => coin.interface.parseLog(log)!.name)).to.deep.equal(["Transfer"]);
  });
});
