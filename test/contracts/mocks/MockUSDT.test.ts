import { expect } from "chai";
import { network } from "hardhat";

import { signers } from "../../helpers/suite.js";

const { ethers, networkHelpers } = await network.create();

async function deployUsdt() {
  const [holder, spender] = await signers(ethers, 2);
  const usdt = await ethers.deployContract("MockUSDT");
  return { usdt, holder, spender };
}

describe("MockUSDT", function () {
  it("is Tether USD with 6 decimals", async function () {
    const { usdt } = await networkHelpers.loadFixture(deployUsdt);
    expect([await usdt.name(), await usdt.symbol(), await usdt.decimals()]).to.deep.equal(["Tether USD", "USDT", 6n]);
  });

  describe("the approve quirk of mainnet USDT", function () {
    it("reverts, without a reason, when changing a non-zero allowance to another non-zero value", async function () {
      const { usdt, holder, spender } = await networkHelpers.loadFixture(deployUsdt);
      await usdt.connect(holder).approve(spender, 100n);
      await expect(usdt.connect(holder).approve(spender, 200n)).to.be.revertedWithoutReason(ethers);
      expect(await usdt.allowance(holder, spender)).to.equal(100n);
    });

    it("accepts resetting to zero and then setting a new value", async function () {
      const { usdt, holder, spender } = await networkHelpers.loadFixture(deployUsdt);
      await usdt.connect(holder).approve(spender, 100n);
      await expect(usdt.connect(holder).approve(spender, 0n))
        .to.emit(usdt, "Approval")
        .withArgs(holder.address, spender.address, 0n);
      await expect(usdt.connect(holder).approve(spender, 200n))
        .to.emit(usdt, "Approval")
        .withArgs(holder.address, spender.address, 200n);
      expect(await usdt.allowance(holder, spender)).to.equal(200n);
    });

    it("still accepts a first approval once an allowance was spent to zero", async function () {
      const { usdt, holder, spender } = await networkHelpers.loadFixture(deployUsdt);
      await usdt.mint(holder, 50n);
      await usdt.connect(holder).approve(spender, 50n);
      await usdt.connect(spender).transferFrom(holder, spender, 50n);
      await expect(usdt.connect(holder).approve(spender, 10n)).not.to.revert(ethers);
    });
  });
});
