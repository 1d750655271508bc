import { expect } from "chai";
import { type FunctionFragment, Interface, MaxUint256, ZeroAddress, ZeroHash, id, parseUnits } from "ethers";
import { artifacts, network } from "hardhat";

import { DEFAULT_MAX_PRICE_AGE } from "../../scripts/deploy.js";
import { STABLES, expectedStableOut, expectedTokensOut, logNames, parseLogs, suiteFixture } from "../helpers/suite.js";

const { ethers, networkHelpers } = await network.create();
const { loadFixture, time } = networkHelpers;

const PRICE = parseUnits("1.25", 8);
const DEFAULT_ADMIN_ROLE = ZeroHash;
const PAUSER_ROLE = id("PAUSER_ROLE");
const MINTER_ROLE = id("MINTER_ROLE");
/** OpenZeppelin's ERC-7201 slot of the reentrancy guard, the same for ReentrancyGuard and ReentrancyGuardTransient. */
const REENTRANCY_GUARD_SLOT = "0x9b779b17422d0df92223018b32b4d1fa46e071723d6817e2486d003becc55f00";
const deploy = () => suiteFixture(ethers);

describe("TokenSwap", function () {
  describe("on deployment", function () {
    it("allows exactly DAI, USDT and USDC", async function () {
      const { swap, stableCoins, token } = await loadFixture(deploy);
      for (const symbol of STABLES) {
        expect(await swap.isStableAllowed(await stableCoins[symbol].getAddress())).to.equal(true);
      }
      expect(await swap.isStableAllowed(await token.getAddress())).to.equal(false);
    });

    it("prices from the token/USD feed with its 8 decimals", async function () {
      const { swap, feeds } = await loadFixture(deploy);
      expect(await swap.priceFeed()).to.equal(await feeds.tokenUsd.getAddress());
      expect(await swap.currentPrice()).to.deep.equal([PRICE, 8n]);
      expect(await swap.maxPriceAge()).to.equal(DEFAULT_MAX_PRICE_AGE);
    });

    it("has one admin (the owner), which holds PAUSER_ROLE, and the swap holds the token's MINTER_ROLE", async function () {
      const { swap, token, owner, exchange } = await loadFixture(deploy);
      expect(await swap.PAUSER_ROLE()).to.equal(PAUSER_ROLE);
      expect(await swap.defaultAdmin()).to.equal(owner.address);
      expect(await swap.owner()).to.equal(owner.address);
      expect(await swap.getRoleAdmin(PAUSER_ROLE)).to.equal(DEFAULT_ADMIN_ROLE);
      expect(await swap.hasRole(PAUSER_ROLE, owner)).to.equal(true);
      expect(await swap.hasRole(PAUSER_ROLE, exchange)).to.equal(false);
      expect(await token.hasRole(MINTER_ROLE, swap)).to.equal(true);
    });

    it("refuses a zero feed and a zero maximum price age", async function () {
      const { swap, token, feeds, owner } = await loadFixture(deploy);
      const args = [await token.getAddress(), ZeroAddress, 60, [], 0, owner.address];
      const factory = await ethers.getContractFactory("TokenSwap");
      await expect(factory.deploy(...(args as Parameters<typeof factory.deploy>)))
        .to.be.revertedWithCustomError(swap, "SwapInvalidFeed")
        .withArgs(ZeroAddress);
      args[1] = await feeds.tokenUsd.getAddress();
      args[2] = 0;
      await expect(factory.deploy(...(args as Parameters<typeof factory.deploy>)))
        .to.be.revertedWithCustomError(swap, "SwapInvalidMaxPriceAge")
        .withArgs(0);
    });
  });

  for (const symbol of STABLES) {
    describe(`when selling for ${symbol}`, function () {
      it("burns the tokens and pays the exact stable-coin value, rounded down", async function () {
        const { swap, token, stableCoins, exchange, customer } = await loadFixture(deploy);
        const stable = stableCoins[symbol];
        const decimals = Number(await stable.decimals());
        const amount = parseUnits("10.5", 18) + 1n; // an odd amount, to exercise rounding
        const out = expectedStableOut(amount, PRICE, decimals);
        expect(out).to.equal(parseUnits("13.125", decimals) + (decimals === 18 ? 1n : 0n));
        const supply = await token.totalSupply();

        const tx = swap.connect(exchange).sell(stable, amount, customer, 0, MaxUint256);
        await expect(tx).to.changeTokenBalances(ethers, token, [exchange, swap], [-amount, 0n]);
        await expect(tx).to.changeTokenBalances(ethers, stable, [swap, customer], [-out, out]);
        expect(await token.totalSupply()).to.equal(supply - amount);
      });

      it("emits exactly five logs: Approval, Transfer in, burn, stable Transfer, Sold", async function () {
        const { swap, token, stableCoins, exchange, customer } = await loadFixture(deploy);
        const stable = stableCoins[symbol];
        const amount = parseUnits("2", 18);
        const allowance = await token.allowance(exchange, swap);
        const receipt = await (await swap.connect(exchange).sell(stable, amount, customer, 0, MaxUint256)).wait();

        expect(await logNames(receipt!, { token, stable, swap })).to.deep.equal([
          "token.Approval",
          "token.Transfer",
          "token.Transfer",
          "stable.Transfer",
          "swap.Sold",
        ]);
        const out = expectedStableOut(amount, PRICE, Number(await stable.decimals()));
        const [approval, pull, burn, pay, sold] = parseLogs(receipt!, [token, stable, swap], 5);
        expect(approval.args).to.deep.equal([exchange.address, await swap.getAddress(), allowance - amount]);
        expect(pull.args).to.deep.equal([exchange.address, await swap.getAddress(), amount]);
        expect(burn.args).to.deep.equal([await swap.getAddress(), ZeroAddress, amount]);
        expect(pay.args).to.deep.equal([await swap.getAddress(), customer.address, out]);
        expect(sold.args).to.deep.equal([
          exchange.address,
          customer.address,
          await stable.getAddress(),
          amount,
          out,
          PRICE,
        ]);
      });
    });

    for (const operation of ["buy", "buyAndRemit"] as const) {
      const eventName = operation === "buy" ? "Bought" : "Remitted";

      describe(`when ${operation === "buy" ? "buying" : "remitting"} with ${symbol}`, function () {
        it("takes the USD amount and mints the exact number of tokens, rounded down", async function () {
          const { swap, token, stableCoins, feeds, exchange, customer } = await loadFixture(deploy);
          const stable = stableCoins[symbol];
          const decimals = Number(await stable.decimals());
          const price = parseUnits("3", 8); // 1/3 is not exact: the remainder must be dropped
          await feeds.tokenUsd.updateAnswer(price);
          const usd = parseUnits("1", decimals);
          const out = expectedTokensOut(usd, price, decimals);
          expect(out).to.equal(333_333_333_333_333_333n);

          const tx = swap.connect(exchange)[operation](stable, usd, customer, 0, MaxUint256);
          await expect(tx).to.changeTokenBalances(ethers, stable, [exchange, swap], [-usd, usd]);
          await expect(tx).to.changeTokenBalances(ethers, token, [customer, exchange], [out, 0n]);
        });

        it(`emits exactly three logs: stable Transfer, mint, ${eventName}`, async function () {
          const { swap, token, stableCoins, exchange, customer } = await loadFixture(deploy);
          const stable = stableCoins[symbol];
          const usd = parseUnits("100", Number(await stable.decimals()));
          const receipt = await (await swap.connect(exchange)[operation](stable, usd, customer, 0, MaxUint256)).wait();

          expect(await logNames(receipt!, { token, stable, swap })).to.deep.equal([
            "stable.Transfer",
            "token.Transfer",
            `swap.${eventName}`,
          ]);
          const tokens = expectedTokensOut(usd, PRICE, Number(await stable.decimals()));
          expect(tokens).to.equal(parseUnits("80", 18));
          const [pay, mint, event] = parseLogs(receipt!, [token, stable, swap], 3);
          expect(pay.args).to.deep.equal([exchange.address, await swap.getAddress(), usd]);
          expect(mint.args).to.deep.equal([ZeroAddress, customer.address, tokens]);
          expect(event.args).to.deep.equal([
            exchange.address,
            customer.address,
            await stable.getAddress(),
            usd,
            tokens,
            PRICE,
          ]);
        });
      });
    }
  }

  describe("gas", function () {
    it("a remittance costs a buy's gas and one selector comparison (22 gas): no function of the swap sorts between them", async function () {
      const destinatary = "0x1111111111111111111111111111111111111111"; // fresh, no zero byte
      const used: bigint[] = [];
      for (const operation of ["buy", "buyAndRemit"] as const) {
        const { swap, stableCoins, exchange } = await loadFixture(deploy); // the same state for both
        const usd = parseUnits("100", 18);
        const tx = await swap.connect(exchange)[operation](stableCoins.DAI, usd, destinatary, 0, MaxUint256);
        used.push((await tx.wait())!.gasUsed);
      }
      // The IR pipeline dispatches by comparing the selector with each of the swap's, in ascending
      // order: DUP1 PUSH4 EQ PUSH2 JUMPI, 22 gas each. Both calls carry the same calldata cost.
      const { abi } = await artifacts.readArtifact("TokenSwap");
      const selectors = new Interface(abi).fragments
        .flatMap((f) =>
          f.type === "function" ? [[(f as FunctionFragment).selector, (f as FunctionFragment).name]] : [],
        )
        .sort(([a], [b]) => (a! < b! ? -1 : 1));
      const at = (name: string) => selectors.findIndex(([, n]) => n === name);
      const between = selectors.slice(at("buy") + 1, at("buyAndRemit")).map(([, n]) => n);
      expect(used[1]! - used[0]!, `between buy and the remittance: ${between.join(", ")}`).to.equal(22n);
    });
  });

  describe("quotes", function () {
    it("quoteSell and quoteBuy give what sell and buy then pay", async function () {
      const { swap, token, stableCoins, exchange, customer } = await loadFixture(deploy);
      const { USDC } = stableCoins;
      const tokens = parseUnits("7.77", 18);
      const quotedUsd = await swap.quoteSell(USDC, tokens);
      await expect(swap.connect(exchange).sell(USDC, tokens, customer, 0, MaxUint256)).to.changeTokenBalance(
        ethers,
        USDC,
        customer,
        quotedUsd,
      );
      const usd = parseUnits("9.99", 6);
      const quotedTokens = await swap.quoteBuy(USDC, usd);
      await expect(swap.connect(exchange).buy(USDC, usd, customer, 0, MaxUint256)).to.changeTokenBalance(
        ethers,
        token,
        customer,
        quotedTokens,
      );
    });

    it("refuse an unsupported stable coin", async function () {
      const { swap, token } = await loadFixture(deploy);
      await expect(swap.quoteSell(token, 1n))
        .to.be.revertedWithCustomError(swap, "SwapUnsupportedStable")
        .withArgs(token.target);
      await expect(swap.quoteBuy(token, 1n))
        .to.be.revertedWithCustomError(swap, "SwapUnsupportedStable")
        .withArgs(token.target);
    });
  });

  describe("when a trade is invalid", function () {
    it("reverts for a stable coin that is not allowed, naming it", async function () {
      const { swap, token, exchange, customer } = await loadFixture(deploy);
      const unknown = await ethers.deployContract("MockStableCoin", ["Fake", "FAKE", 6]);
      for (const op of ["sell", "buy", "buyAndRemit"] as const) {
        await expect(swap.connect(exchange)[op](unknown, 1000n, customer, 0, MaxUint256))
          .to.be.revertedWithCustomError(swap, "SwapUnsupportedStable")
          .withArgs(unknown.target);
      }
      expect(await token.balanceOf(customer)).to.equal(0n);
    });

    it("reverts for a zero amount or zero destinatary", async function () {
      const { swap, stableCoins, exchange, customer } = await loadFixture(deploy);
      for (const op of ["sell", "buy", "buyAndRemit"] as const) {
        await expect(
          swap.connect(exchange)[op](stableCoins.DAI, 0n, customer, 0, MaxUint256),
        ).to.be.revertedWithCustomError(swap, "SwapZeroAmount");
        await expect(swap.connect(exchange)[op](stableCoins.DAI, 10n ** 18n, ZeroAddress, 0, MaxUint256))
          .to.be.revertedWithCustomError(swap, "SwapInvalidDestinatary")
          .withArgs(ZeroAddress);
      }
    });

    it("reverts when the amount is worth less than one base unit of the output", async function () {
      const { swap, stableCoins, exchange, customer } = await loadFixture(deploy);
      // 1e12 token base units at $1.25 are worth 1.25e-6 USDT: one base unit, rounded down.
      await expect(
        swap.connect(exchange).sell(stableCoins.USDT, 10n ** 12n, customer, 0, MaxUint256),
      ).to.changeTokenBalance(ethers, stableCoins.USDT, customer, 1n);
      await expect(
        swap.connect(exchange).sell(stableCoins.USDT, 10n ** 12n - 10n ** 11n * 3n, customer, 0, MaxUint256),
      ).to.be.revertedWithCustomError(swap, "SwapZeroOutput");
    });

    it("reverts after the deadline and below the minimum out", async function () {
      const { swap, stableCoins, exchange, customer } = await loadFixture(deploy);
      const now = BigInt(await time.latest());
      await expect(swap.connect(exchange).sell(stableCoins.DAI, 10n ** 18n, customer, 0, now - 1n))
        .to.be.revertedWithCustomError(swap, "SwapDeadlineExpired")
        // The block's time: `now` or later (blocks of one second may share a timestamp).
        .withArgs(now - 1n, (timestamp: bigint) => timestamp >= now);
      const out = parseUnits("1.25", 18);
      await expect(swap.connect(exchange).sell(stableCoins.DAI, 10n ** 18n, customer, out + 1n, MaxUint256))
        .to.be.revertedWithCustomError(swap, "SwapSlippage")
        .withArgs(out, out + 1n);
      const tokens = parseUnits("0.8", 18);
      await expect(swap.connect(exchange).buy(stableCoins.DAI, 10n ** 18n, customer, tokens + 1n, MaxUint256))
        .to.be.revertedWithCustomError(swap, "SwapSlippage")
        .withArgs(tokens, tokens + 1n);
      await expect(swap.connect(exchange).sell(stableCoins.DAI, 10n ** 18n, customer, out, now + 100n)).not.to.revert(
        ethers,
      );
    });

    it("reverts without enough tokens or allowance, with the token's own error", async function () {
      const { swap, token, stableCoins, exchange, customer, other } = await loadFixture(deploy);
      await expect(swap.connect(other).sell(stableCoins.DAI, 10n ** 18n, customer, 0, MaxUint256))
        .to.be.revertedWithCustomError(token, "ERC20InsufficientAllowance")
        .withArgs(swap.target, 0n, 10n ** 18n);
      await expect(swap.connect(other).buy(stableCoins.USDC, 10n ** 6n, customer, 0, MaxUint256))
        .to.be.revertedWithCustomError(stableCoins.USDC, "ERC20InsufficientAllowance")
        .withArgs(swap.target, 0n, 10n ** 6n);
      const one = 10n ** 18n;
      await token.connect(exchange).transfer(other, (await token.balanceOf(exchange)) - one);
      await expect(swap.connect(exchange).sell(stableCoins.DAI, 2n * one, customer, 0, MaxUint256))
        .to.be.revertedWithCustomError(token, "ERC20InsufficientBalance")
        .withArgs(exchange.address, one, 2n * one);
    });
  });

  describe("when reserves run out", function () {
    it("reverts with the available and required amounts, and pays nothing", async function () {
      const { swap, token, stableCoins, owner, exchange, customer } = await loadFixture(deploy);
      const { USDT } = stableCoins;
      const reserves = await USDT.balanceOf(swap);
      await swap.connect(owner).withdrawReserves(USDT, owner, reserves - parseUnits("1", 6));
      const amount = parseUnits("1", 18); // worth 1.25 USDT, more than the 1 USDT left
      await expect(swap.connect(exchange).sell(USDT, amount, customer, 0, MaxUint256))
        .to.be.revertedWithCustomError(swap, "SwapInsufficientReserves")
        .withArgs(USDT.target, parseUnits("1", 6), parseUnits("1.25", 6));
      expect(await token.balanceOf(swap)).to.equal(0n);
      expect(await USDT.balanceOf(customer)).to.equal(0n);
    });
  });

  describe("when the price is bad", function () {
    it("rejects a zero or negative answer", async function () {
      const { swap, feeds, stableCoins, exchange, customer } = await loadFixture(deploy);
      for (const answer of [0n, -1n, -PRICE]) {
        await feeds.tokenUsd.updateAnswer(answer);
        for (const op of ["sell", "buy", "buyAndRemit"] as const) {
          await expect(swap.connect(exchange)[op](stableCoins.DAI, 10n ** 18n, customer, 0, MaxUint256))
            .to.be.revertedWithCustomError(swap, "SwapInvalidPrice")
            .withArgs(answer);
        }
        await expect(swap.currentPrice()).to.be.revertedWithCustomError(swap, "SwapInvalidPrice").withArgs(answer);
      }
    });

    it("rejects an answer older than the maximum age, and accepts it again once refreshed", async function () {
      const { swap, feeds, stableCoins, exchange, customer } = await loadFixture(deploy);
      const [, , , updatedAt] = await feeds.tokenUsd.latestRoundData();
      await time.increase(DEFAULT_MAX_PRICE_AGE + 1n);
      for (const op of ["sell", "buy", "buyAndRemit"] as const) {
        await expect(swap.connect(exchange)[op](stableCoins.USDC, 10n ** 6n, customer, 0, MaxUint256))
          .to.be.revertedWithCustomError(swap, "SwapStalePrice")
          .withArgs(updatedAt, DEFAULT_MAX_PRICE_AGE);
      }
      await feeds.tokenUsd.updateAnswer(PRICE);
      await expect(swap.connect(exchange).buy(stableCoins.USDC, 10n ** 6n, customer, 0, MaxUint256)).not.to.revert(
        ethers,
      );
    });

    it("rejects an answer from the future", async function () {
      const { swap, feeds } = await loadFixture(deploy);
      const future = BigInt(await time.latest()) + 3600n;
      await feeds.tokenUsd.updateRoundData(PRICE, future, future);
      await expect(swap.currentPrice())
        .to.be.revertedWithCustomError(swap, "SwapStalePrice")
        .withArgs(future, DEFAULT_MAX_PRICE_AGE);
    });
  });

  describe("when paused", function () {
    it("refuses every trade until unpaused", async function () {
      const { swap, stableCoins, owner, exchange, customer } = await loadFixture(deploy);
      await expect(swap.connect(owner).pause()).to.emit(swap, "Paused").withArgs(owner.address);
      for (const op of ["sell", "buy", "buyAndRemit"] as const) {
        await expect(
          swap.connect(exchange)[op](stableCoins.DAI, 10n ** 18n, customer, 0, MaxUint256),
        ).to.be.revertedWithCustomError(swap, "EnforcedPause");
      }
      await expect(swap.connect(owner).unpause()).to.emit(swap, "Unpaused").withArgs(owner.address);
      await expect(swap.connect(exchange).sell(stableCoins.DAI, 10n ** 18n, customer, 0, MaxUint256)).not.to.revert(
        ethers,
      );
    });

    it("takes PAUSER_ROLE to pause, which the admin grants and need not hold itself; only the admin unpauses", async function () {
      const { swap, owner, exchange, other } = await loadFixture(deploy);
      await expect(swap.connect(exchange).pause())
        .to.be.revertedWithCustomError(swap, "AccessControlUnauthorizedAccount")
        .withArgs(exchange.address, PAUSER_ROLE);
      await expect(swap.connect(owner).grantRole(PAUSER_ROLE, other))
        .to.emit(swap, "RoleGranted")
        .withArgs(PAUSER_ROLE, other.address, owner.address);
      await swap.connect(owner).renounceRole(PAUSER_ROLE, owner);
      await expect(swap.connect(owner).pause())
        .to.be.revertedWithCustomError(swap, "AccessControlUnauthorizedAccount")
        .withArgs(owner.address, PAUSER_ROLE);
      await expect(swap.connect(other).pause()).to.emit(swap, "Paused").withArgs(other.address);
      // Stopping is fast, resuming deliberate: a pauser's key cannot undo the admin's decision to stop.
      await expect(swap.connect(other).unpause())
        .to.be.revertedWithCustomError(swap, "AccessControlUnauthorizedAccount")
        .withArgs(other.address, DEFAULT_ADMIN_ROLE);
      await expect(swap.connect(owner).unpause()).to.emit(swap, "Unpaused").withArgs(owner.address);
      await expect(swap.connect(other).setMaxPriceAge(1))
        .to.be.revertedWithCustomError(swap, "AccessControlUnauthorizedAccount")
        .withArgs(other.address, DEFAULT_ADMIN_ROLE);
    });
  });

  describe("administration", function () {
    it("lets the owner change the allow-list, feed, maximum age and reserves", async function () {
      const { swap, stableCoins, owner, exchange, customer } = await loadFixture(deploy);
      await expect(swap.connect(owner).setStableAllowed(stableCoins.DAI, false))
        .to.emit(swap, "StableCoinAllowListUpdated")
        .withArgs(stableCoins.DAI.target, false);
      await expect(swap.connect(exchange).buy(stableCoins.DAI, 10n ** 18n, customer, 0, MaxUint256))
        .to.be.revertedWithCustomError(swap, "SwapUnsupportedStable")
        .withArgs(stableCoins.DAI.target);

      const feed = await ethers.deployContract("MockAggregator", [8, "TTK / USD", parseUnits("2", 8)]);
      await expect(swap.connect(owner).setPriceFeed(feed))
        .to.emit(swap, "PriceFeedUpdated")
        .withArgs(await swap.priceFeed(), feed.target);
      expect(await swap.currentPrice()).to.deep.equal([parseUnits("2", 8), 8n]);
      await expect(swap.connect(owner).setPriceFeed(ZeroAddress)).to.be.revertedWithCustomError(
        swap,
        "SwapInvalidFeed",
      );

      await expect(swap.connect(owner).setMaxPriceAge(60))
        .to.emit(swap, "MaxPriceAgeUpdated")
        .withArgs(DEFAULT_MAX_PRICE_AGE, 60);
      await expect(swap.connect(owner).setMaxPriceAge(0))
        .to.be.revertedWithCustomError(swap, "SwapInvalidMaxPriceAge")
        .withArgs(0);

      await expect(swap.connect(owner).withdrawReserves(stableCoins.USDC, owner, 5n))
        .to.emit(swap, "ReservesWithdrawn")
        .withArgs(stableCoins.USDC.target, owner.address, 5n);
    });

    it("refuses a stable coin with more than 18 decimals", async function () {
      const { swap, owner } = await loadFixture(deploy);
      const odd = await ethers.deployContract("MockStableCoin", ["Odd", "ODD", 24]);
      await expect(swap.connect(owner).setStableAllowed(odd, true))
        .to.be.revertedWithCustomError(swap, "SwapUnsupportedDecimals")
        .withArgs(odd.target, 24);
    });

    it("refuses every administrative call from anyone but the admin", async function () {
      const { swap, stableCoins, feeds, exchange } = await loadFixture(deploy);
      const calls = [
        () => swap.connect(exchange).setStableAllowed(stableCoins.DAI, false),
        () => swap.connect(exchange).setPriceFeed(feeds.eurUsd),
        () => swap.connect(exchange).setMaxPriceAge(1),
        () => swap.connect(exchange).withdrawReserves(stableCoins.DAI, exchange, 1n),
      ];
      for (const call of calls) {
        await expect(call())
          .to.be.revertedWithCustomError(swap, "AccessControlUnauthorizedAccount")
          .withArgs(exchange.address, DEFAULT_ADMIN_ROLE);
      }
    });

    it("hands the administration over in two steps: nothing changes until the new admin accepts", async function () {
      const { swap, owner, other } = await loadFixture(deploy);
      await swap.connect(owner).beginDefaultAdminTransfer(other);
      expect(await swap.owner()).to.equal(owner.address);
      await expect(swap.connect(other).setMaxPriceAge(60))
        .to.be.revertedWithCustomError(swap, "AccessControlUnauthorizedAccount")
        .withArgs(other.address, DEFAULT_ADMIN_ROLE);
      await time.increase(1); // the deployment's admin delay is zero: any later block accepts
      await expect(swap.connect(other).acceptDefaultAdminTransfer())
        .to.emit(swap, "RoleGranted")
        .withArgs(DEFAULT_ADMIN_ROLE, other.address, other.address);
      expect(await swap.owner()).to.equal(other.address);
      await expect(swap.connect(other).setMaxPriceAge(60)).to.emit(swap, "MaxPriceAgeUpdated");
      await expect(swap.connect(owner).setMaxPriceAge(61))
        .to.be.revertedWithCustomError(swap, "AccessControlUnauthorizedAccount")
        .withArgs(owner.address, DEFAULT_ADMIN_ROLE);
    });
  });

  describe("when a stable coin re-enters", function () {
    it("the reentrancy guard reverts the whole trade", async function () {
      const { swap, owner, exchange, customer } = await loadFixture(deploy);
      const hostile = await ethers.deployContract("ReentrantStableCoin");
      await swap.connect(owner).setStableAllowed(hostile, true);
      await hostile.mint(exchange, 10n ** 20n);
      await hostile.connect(exchange).approve(swap, 10n ** 20n);
      await hostile.arm(
        swap,
        swap.interface.encodeFunctionData("buy", [hostile.target, 10n ** 18n, customer.address, 0n, MaxUint256]),
      );
      await expect(
        swap.connect(exchange).buy(hostile, 10n ** 18n, customer, 0, MaxUint256),
      ).to.be.revertedWithCustomError(swap, "ReentrancyGuardReentrantCall");
    });

    it("keeps the guard in transient storage: a trade leaves no guard word in the swap's storage", async function () {
      const { swap, stableCoins, exchange, customer } = await loadFixture(deploy);
      await swap.connect(exchange).buy(stableCoins.DAI, 10n ** 18n, customer, 0, MaxUint256);
      await swap.connect(exchange).sell(stableCoins.DAI, 10n ** 18n, customer, 0, MaxUint256);
      expect(await ethers.provider.getStorage(swap, REENTRANCY_GUARD_SLOT)).to.equal(ZeroHash);
    });
  });

  describe("its interface, ITokenSwap", function () {
    it("declares every function, event and error of TokenSwap but those of OpenZeppelin's access control and pausing", async function () {
      const declared = new Interface((await artifacts.readArtifact("ITokenSwap")).abi);
      const compiled = new Interface((await artifacts.readArtifact("TokenSwap")).abi);
      const key = (f: { type: string; format(): string }) => `${f.type} ${f.format()}`;
      const inInterface = new Set(declared.fragments.map(key));
      const rest = compiled.fragments.filter((f) => f.type !== "constructor" && !inInterface.has(key(f)));
      expect(rest.map((f) => f.format()).sort()).to.deep.equal(
        [
          // AccessControlDefaultAdminRules (IAccessControl, IAccessControlDefaultAdminRules, IERC5313, IERC165)
          "AccessControlBadConfirmation()",
          "AccessControlEnforcedDefaultAdminDelay(uint48)",
          "AccessControlEnforcedDefaultAdminRules()",
          "AccessControlInvalidDefaultAdmin(address)",
          "AccessControlUnauthorizedAccount(address,bytes32)",
          "DEFAULT_ADMIN_ROLE()",
          "DefaultAdminDelayChangeCanceled()",
          "DefaultAdminDelayChangeScheduled(uint48,uint48)",
          "DefaultAdminTransferCanceled()",
          "DefaultAdminTransferScheduled(address,uint48)",
          "RoleAdminChanged(bytes32,bytes32,bytes32)",
          "RoleGranted(bytes32,address,address)",
          "RoleRevoked(bytes32,address,address)",
          "SafeCastOverflowedUintDowncast(uint8,uint256)",
          "acceptDefaultAdminTransfer()",
          "beginDefaultAdminTransfer(address)",
          "cancelDefaultAdminTransfer()",
          "changeDefaultAdminDelay(uint48)",
          "defaultAdmin()",
          "defaultAdminDelay()",
          "defaultAdminDelayIncreaseWait()",
          "getRoleAdmin(bytes32)",
          "grantRole(bytes32,address)",
          "hasRole(bytes32,address)",
          "owner()",
          "pendingDefaultAdmin()",
          "pendingDefaultAdminDelay()",
          "renounceRole(bytes32,address)",
          "revokeRole(bytes32,address)",
          "rollbackDefaultAdminDelay()",
          "supportsInterface(bytes4)",
          // Pausable
          "EnforcedPause()",
          "ExpectedPause()",
          "Paused(address)",
          "Unpaused(address)",
          "paused()",
          // Constants stay in the contract, as OpenZeppelin keeps role identifiers out of its interfaces
          "MAX_STABLE_DECIMALS()",
          "PAUSER_ROLE()",
          // ReentrancyGuardTransient, SafeERC20
          "ReentrancyGuardReentrantCall()",
          "SafeERC20FailedOperation(address)",
        ].sort(),
      );
    });
  });
});
