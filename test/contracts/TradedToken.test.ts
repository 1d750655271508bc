import { expect } from "chai";
import { MaxUint256, ZeroAddress } from "ethers";
import { network } from "hardhat";

import { signers } from "../helpers/suite.js";

const { ethers, networkHelpers } = await network.create();

async function deployToken() {
  const [owner, minter, holder, spender] = await signers(ethers, 4);
  const token = await ethers.deployContract("TradedToken", ["Trade Token", "TTK", owner.address]);
  await token.setMinter(minter);
  return { token, owner, minter, holder, spender };
}

describe("TradedToken", function () {
  it("has the name, symbol and 18 decimals chosen at deployment", async function () {
    const { token } = await networkHelpers.loadFixture(deployToken);
    expect([await token.name(), await token.symbol(), await token.decimals()]).to.deep.equal([
      "Trade Token",
      "TTK",
      18n,
    ]);
  });

  describe("minting and burning", function () {
    it("is allowed to the minter and to the owner", async function () {
      const { token, owner, minter, holder } = await networkHelpers.loadFixture(deployToken);
      await expect(token.connect(minter).mint(holder, 5n))
        .to.emit(token, "Transfer")
        .withArgs(ZeroAddress, holder.address, 5n);
      await expect(token.connect(owner).mint(minter, 7n)).to.changeTokenBalance(ethers, token, minter, 7n);
      await expect(token.connect(minter).burn(3n)).to.emit(token, "Transfer").withArgs(minter.address, ZeroAddress, 3n);
      await token.connect(owner).mint(owner, 2n);
      await expect(token.connect(owner).burn(2n)).to.changeTokenBalance(ethers, token, owner, -2n);
      expect(await token.totalSupply()).to.equal(9n);
    });

    it("is refused to anyone else, naming the caller", async function () {
      const { token, holder } = await networkHelpers.loadFixture(deployToken);
      await expect(token.connect(holder).mint(holder, 1n))
        .to.be.revertedWithCustomError(token, "TokenUnauthorizedMinter")
        .withArgs(holder.address);
      await expect(token.connect(holder).burn(0n))
        .to.be.revertedWithCustomError(token, "TokenUnauthorizedMinter")
        .withArgs(holder.address);
    });
  });

  describe("the minter", function () {
    it("is set by the owner only, with an event", async function () {
      const { token, minter, holder } = await networkHelpers.loadFixture(deployToken);
      expect(await token.minter()).to.equal(minter.address);
      await expect(token.setMinter(holder)).to.emit(token, "MinterUpdated").withArgs(minter.address, holder.address);
      await expect(token.connect(minter).mint(holder, 1n)).to.be.revertedWithCustomError(
        token,
        "TokenUnauthorizedMinter",
      );
      await expect(token.connect(holder).setMinter(holder))
        .to.be.revertedWithCustomError(token, "OwnableUnauthorizedAccount")
        .withArgs(holder.address);
    });
  });

  describe("when transferFrom spends an allowance", function () {
    it("emits Approval with the remaining allowance before the Transfer", async function () {
      const { token, minter, holder, spender } = await networkHelpers.loadFixture(deployToken);
      await token.connect(minter).mint(holder, 100n);
      await token.connect(holder).approve(spender, 60n);
      const receipt = await (await token.connect(spender).transferFrom(holder, spender, 25n)).wait();
      const events = receipt!.logs.map((log) => token.interface.parseLog(log)!);
      expect(events.map((e) => e.name)).to.deep.equal(["Approval", "Transfer"]);
      expect(events[0]!.args).to.deep.equal([holder.address, spender.address, 35n]);
      expect(await token.allowance(holder, spender)).to.equal(35n);
    });

    it("leaves an infinite allowance untouched and emits no Approval", async function () {
      const { token, minter, holder, spender } = await networkHelpers.loadFixture(deployToken);
      await token.connect(minter).mint(holder, 100n);
      await token.connect(holder).approve(spender, MaxUint256);
      const receipt = await (await token.connect(spender).transferFrom(holder, spender, 25n)).wait();
      expect(receipt!.logs.map((log) => token.interface.parseLog(log)!.name)).to.deep.equal(["Transfer"]);
      expect(await token.allowance(holder, spender)).to.equal(MaxUint256);
    });
  });
});
