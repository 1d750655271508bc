import { expect } from "chai";
import { Interface } from "ethers";
import { artifacts } from "hardhat";

import { AGGREGATOR_ABI, ERC20_ABI, SWAP_ABI } from "../../../adapters/chain/index.js";

/** Every fragment the service uses must exist, with the same selector and outputs, in the compiled ABI. */
async function expectSubset(fragments: readonly string[], contracts: string[]) {
  const compiled = await Promise.all(
    contracts.map(async (name) => new Interface((await artifacts.readArtifact(name)).abi)),
  );
  for (const fragment of new Interface(fragments).fragments) {
    const text = fragment.format("full");
    const found = compiled.some((iface) =>
      iface.fragments.some(
        (candidate) =>
          candidate.type === fragment.type &&
          candidate.format("full").replace(/ [a-zA-Z_]+(?=[,)])/g, "") === text.replace(/ [a-zA-Z_]+(?=[,)])/g, ""),
      ),
    );
    expect(found, `${text} is not in ${contracts.join(" or ")}`).to.equal(true);
  }
}

describe("the ABI fragments the chain adapter uses", function () {
  it("match the compiled TokenSwap (errors of the tokens it moves included)", async function () {
    await expectSubset(SWAP_ABI, ["TokenSwap", "TradedToken", "MockStableCoin"]);
  });

  it("match the compiled ERC-20s and the aggregator", async function () {
    await expectSubset(ERC20_ABI, ["TradedToken"]);
    await expectSubset(AGGREGATOR_ABI, ["MockAggregator"]);
  });

  it("would catch a fragment the contracts do not have", async function () {
    let failed = false;
    try {
      await expectSubset(["function sell(address stable, uint256 amount) returns (uint256)"], ["TokenSwap"]);
    } catch {
      failed = true;
    }
    expect(failed).to.equal(true);
  });
});
