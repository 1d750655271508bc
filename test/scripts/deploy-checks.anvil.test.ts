/** The deployment's check that the network runs the suite: transient storage (EIP-1153, Cancun). */
import { expect } from "chai";
import { JsonRpcProvider } from "ethers";
import { network } from "hardhat";

import { checkNetworkSupportsSuite } from "../../scripts/deploy-checks.js";
import { type Anvil, startAnvil } from "../helpers/anvil.js";

describe("checkNetworkSupportsSuite (before npm run deploy sends anything)", function () {
  this.timeout(60_000);
  const started: Anvil[] = [];
  after(async function () {
    await Promise.all(started.map((anvil) => anvil.stop()));
  });

  async function on(hardfork?: string): Promise<string[]> {
    const anvil = await startAnvil(hardfork === undefined ? {} : { hardfork });
    started.push(anvil);
    const provider = new JsonRpcProvider(anvil.url, undefined, { staticNetwork: true });
    try {
      return await checkNetworkSupportsSuite(provider);
    } finally {
      provider.destroy();
    }
  }

  it("passes Hardhat's chain (Cancun) and anvil's default", async function () {
    const { ethers } = await network.create();
    expect(await checkNetworkSupportsSuite(ethers.provider)).to.deep.equal([]);
    expect(await on()).to.deep.equal([]);
  });

  it("refuses a network before Cancun, naming the network and TSTORE", async function () {
    const problems = await on("shanghai");
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/^network: does not run TSTORE \(EIP-1153, the Cancun upgrade\)/);
  });
});
