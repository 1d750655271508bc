import { expect } from "chai";
import { MaxUint256, ZeroAddress, ZeroHash, id } from "ethers";
import { network } from "hardhat";

import { signers } from "../helpers/suite.js";

const { ethers, networkHelpers } = await network.create();
const { loadFixture, time } = networkHelpers;

const DEFAULT_ADMIN_ROLE = ZeroHash;
const MINTER_ROLE = id("MINTER_ROLE");
const ADMIN_DELAY = 3600n;

async function deployToken() {
  const [admin, minter, holder, spender] = await signers(ethers, 4);
  const token = await ethers.deployContract("TradedToken", ["Trade Token", "TTK", ADMIN_DELAY, admin.address]);
  await token.connect(admin).grantRole(MINTER_ROLE, minter);
  return { token, admin, minter, holder, spender };
}

describe("TradedToken", function () {
  it("has the name, symbol and 18 decimals chosen at deployment", async function () {
    const { token } = await loadFixture(deployToken);
    expect([await token.name(), await token.symbol(), await token.decimals()]).to.deep.equal([
      "Trade Token",
      "TTK",
      18n,
    ]);
  });

  describe("roles", function () {
    it("has one admin, chosen at deployment, which owner() names and which administers MINTER_ROLE", async function () {
      const { token, admin, minter } = await loadFixture(deployToken);
      expect(await token.MINTER_ROLE()).to.equal(MINTER_ROLE);
      expect(await token.DEFAULT_ADMIN_ROLE()).to.equal(DEFAULT_ADMIN_ROLE);
      expect(await token.defaultAdmin()).to.equal(admin.address);
      expect(await token.owner()).to.equal(admin.address);
      expect(await token.defaultAdminDelay()).to.equal(ADMIN_DELAY);
      expect(await token.getRoleAdmin(MINTER_ROLE)).to.equal(DEFAULT_ADMIN_ROLE);
      expect(await token.hasRole(MINTER_ROLE, minter)).to.equal(true);
      expect(await token.hasRole(MINTER_ROLE, admin)).to.equal(false);
    });

    it("lets only the admin grant and revoke MINTER_ROLE, with RoleGranted and RoleRevoked", async function () {
      const { token, admin, minter, holder } = await loadFixture(deployToken);
      await expect(token.connect(admin).grantRole(MINTER_ROLE, holder))
        .to.emit(token, "RoleGranted")
        .withArgs(MINTER_ROLE, holder.address, admin.address);
      await expect(token.connect(admin).revokeRole(MINTER_ROLE, minter))
        .to.emit(token, "RoleRevoked")
        .withArgs(MINTER_ROLE, minter.address, admin.address);
      for (const call of [
        () => token.connect(holder).grantRole(MINTER_ROLE, minter),
        () => token.connect(holder).revokeRole(MINTER_ROLE, holder),
      ]) {
        await expect(call())
          .to.be.revertedWithCustomError(token, "AccessControlUnauthorizedAccount")
          .withArgs(holder.address, DEFAULT_ADMIN_ROLE);
      }
    });

    it("hands the admin over in two steps: the new admin accepts, once the delay has passed", async function () {
      const { token, admin, holder, spender } = await loadFixture(deployToken);
      await expect(token.connect(holder).beginDefaultAdminTransfer(holder))
        .to.be.revertedWithCustomError(token, "AccessControlUnauthorizedAccount")
        .withArgs(holder.address, DEFAULT_ADMIN_ROLE);
      await token.connect(admin).beginDefaultAdminTransfer(holder);
      const [pending, schedule] = await token.pendingDefaultAdmin();
      expect(pending).to.equal(holder.address);
      expect(await token.owner()).to.equal(admin.address);

      await expect(token.connect(holder).acceptDefaultAdminTransfer())
        .to.be.revertedWithCustomError(token, "AccessControlEnforcedDefaultAdminDelay")
        .withArgs(schedule);
      await time.increaseTo(schedule + 1n);
      await expect(token.connect(spender).acceptDefaultAdminTransfer())
        .to.be.revertedWithCustomError(token, "AccessControlInvalidDefaultAdmin")
        .withArgs(spender.address);
      await token.connect(holder).acceptDefaultAdminTransfer();
      expect(await token.owner()).to.equal(holder.address);
      expect(await token.hasRole(DEFAULT_ADMIN_ROLE, admin)).to.equal(false);
      await expect(token.connect(admin).grantRole(MINTER_ROLE, admin)).to.be.revertedWithCustomError(
        token,
        "AccessControlUnauthorizedAccount",
      );
    });

    it("refuses to grant the admin role directly", async function () {
      const { token, admin, holder } = await loadFixture(deployToken);
      await expect(token.connect(admin).grantRole(DEFAULT_ADMIN_ROLE, holder)).to.be.revertedWithCustomError(
        token,
        "AccessControlEnforcedDefaultAdminRules",
      );
    });
  });

  describe("minting and burning", function () {
    it("is allowed to MINTER_ROLE, with one Transfer log each and no other", async function () {
      const { token, minter, holder } = await loadFixture(deployToken);
      const mint = await (await token.connect(minter).mint(holder, 5n)).wait();
      expect(mint!.logs.map((log) => token.interface.parseLog(log)!.name)).to.deep.equal(["Transfer"]);
      await expect(token.connect(minter).mint(holder, 5n))
        .to.emit(token, "Transfer")
        .withArgs(ZeroAddress, holder.address, 5n);
      await token.connect(minter).mint(minter, 7n);
      const burn = await (await token.connect(minter).burn(3n)).wait();
      expect(burn!.logs.map((log) => token.interface.parseLog(log)!.args)).to.deep.equal([
        [minter.address, ZeroAddress, 3n],
      ]);
      expect(await token.totalSupply()).to.equal(14n);
    });

    it("is refused to any account without MINTER_ROLE, the admin's included, naming it and the role", async function () {
      const { token, admin, holder } = await loadFixture(deployToken);
      for (const account of [holder, admin]) {
        await expect(token.connect(account).mint(account, 1n))
          .to.be.revertedWithCustomError(token, "AccessControlUnauthorizedAccount")
          .withArgs(account.address, MINTER_ROLE);
        await expect(token.connect(account).burn(0n))
          .to.be.revertedWithCustomError(token, "AccessControlUnauthorizedAccount")
          .withArgs(account.address, MINTER_ROLE);
      }
    });

    it("stops for a minter whose role was revoked", async function () {
      const { token, admin, minter, holder } = await loadFixture(deployToken);
      await token.connect(admin).revokeRole(MINTER_ROLE, minter);
      await expect(token.connect(minter).mint(holder, 1n))
        .to.be.revertedWithCustomError(token, "AccessControlUnauthorizedAccount")
        .withArgs(minter.address, MINTER_ROLE);
    });
  });

  describe("when transferFrom spends an allowance", function () {
    it("emits Approval with the remaining allowance before the Transfer", async function () {
      const { token, minter, holder, spender } = await loadFixture(deployToken);
      await token.connect(minter).mint(holder, 100n);
      await token.connect(holder).approve(spender, 60n);
      const receipt = await (await token.connect(spender).transferFrom(holder, spender, 25n)).wait();
      const events = receipt!.logs.map((log) => token.interface.parseLog(log)!);
      expect(events.map((e) => e.name)).to.deep.equal(["Approval", "Transfer"]);
      expect(events[0]!.args).to.deep.equal([holder.address, spender.address, 35n]);
      expect(await token.allowance(holder, spender)).to.equal(35n);
    });

    it("leaves an infinite allowance untouched and emits no Approval", async function () {
      const { token, minter, holder, spender } = await loadFixture(deployToken);
      await token.connect(minter).mint(holder, 100n);
      await token.connect(holder).approve(spender, MaxUint256);
      const receipt = await (await token.connect(spender).transferFrom(holder, spender, 25n)).wait();
      expect(receipt!.logs.map((log) => token.interface.parseLog(log)!.name)).to.deep.equal(["Transfer"]);
      expect(await token.allowance(holder, spender)).to.equal(MaxUint256);
    });
  });
});
