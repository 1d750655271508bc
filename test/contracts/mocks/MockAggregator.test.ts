import { expect } from "chai";
import { parseUnits } from "ethers";
import { network } from "hardhat";

const { ethers, networkHelpers } = await network.create();

describe("MockAggregator", function () {
  async function deployFeed() {
    return ethers.deployContract("MockAggregator", [8, "EUR / USD", parseUnits("1.08", 8)]);
  }

  it("describes itself like a Chainlink feed", async function () {
    const feed = await networkHelpers.loadFixture(deployFeed);
    expect([await feed.decimals(), await feed.description(), await feed.version()]).to.deep.equal([
      8n,
      "EUR / USD",
      4n,
    ]);
  });

  it("serves the initial answer as round 1, updated at deployment", async function () {
    const feed = await networkHelpers.loadFixture(deployFeed);
    const now = BigInt(await networkHelpers.time.latest());
    expect(await feed.latestRoundData()).to.deep.equal([1n, parseUnits("1.08", 8), now, now, 1n]);
  });

  it("posts new rounds with updateAnswer and updateRoundData, keeping history", async function () {
    const feed = await networkHelpers.loadFixture(deployFeed);
    await expect(feed.updateAnswer(parseUnits("1.10", 8))).to.emit(feed, "AnswerUpdated");
    await feed.updateRoundData(-5n, 1000n, 999n);
    expect(await feed.latestRoundData()).to.deep.equal([3n, -5n, 999n, 1000n, 3n]);
    expect((await feed.getRoundData(2n))[1]).to.equal(parseUnits("1.10", 8));
  });

  it("reverts for a round without data", async function () {
    const feed = await networkHelpers.loadFixture(deployFeed);
    await expect(feed.getRoundData(9n)).to.be.revertedWithCustomError(feed, "MockAggregatorNoData").withArgs(9n);
  });
});
