import { expect } from "chai";
import { Interface } from "ethers";
import { artifacts } from "hardhat";

import { AGGREGATOR_ABI, ERC20_ABI, SWAP_ABI, pickAbi } from "../../../adapters/chain/tx/index.js";
import { tokenSwapAbi } from "../../../gen/abi/index.js";
import { GENERATED_ABIS } from "../../../scripts/generate-abi.js";

/** The signature of each fragment ("sell(address,uint256,address,uint256,uint256)"), sorted. */
function signatures(abi: ConstructorParameters<typeof Interface>[0]): string[] {
  return new Interface(abi).fragments.map((fragment) => fragment.format("sighash")).sort();
}

describe("gen/abi", function () {
  it("holds the compiled artifacts' ABIs, unchanged (else: npm run generate:abi)", async function () {
    for (const entry of GENERATED_ABIS) {
      const { abi } = await artifacts.readArtifact(entry.contract);
      const module = (await import(`../../../gen/abi/${entry.file.replace(/\.ts$/, ".js")}`)) as Record<
        string,
        unknown
      >;
      expect(module[entry.name], `${entry.name} in gen/abi/${entry.file}`).to.deep.equal(abi);
    }
  });
});

describe("the ABI the chain adapter uses", function () {
  it("is made of the compiled fragments: the swap's, and the token's ERC-20 errors", async function () {
    const compiled = [
      ...(await artifacts.readArtifact("TokenSwap")).abi,
      ...(await artifacts.readArtifact("TradedToken")).abi,
      ...(await artifacts.readArtifact("AggregatorV3Interface")).abi,
    ];
    for (const item of [...SWAP_ABI, ...ERC20_ABI, ...AGGREGATOR_ABI]) {
      expect(compiled, `${item.type} ${item.name}`).to.deep.include(item);
    }
  });

  it("has the signatures the adapter's calls and error decoding were written for", function () {
    expect(signatures(SWAP_ABI)).to.deep.equal(
      [
        "sell(address,uint256,address,uint256,uint256)",
        "buy(address,uint256,address,uint256,uint256)",
        "buyAndRemit(address,uint256,address,uint256,uint256)",
        "quoteSell(address,uint256)",
        "quoteBuy(address,uint256)",
        "currentPrice()",
        "maxPriceAge()",
        "priceFeed()",
        "isStableAllowed(address)",
        "token()",
        "paused()",
        "SwapUnsupportedStable(address)",
        "SwapUnsupportedDecimals(address,uint8)",
        "SwapInvalidPrice(int256)",
        "SwapStalePrice(uint256,uint256)",
        "SwapInsufficientReserves(address,uint256,uint256)",
        "SwapZeroAmount()",
        "SwapZeroOutput()",
        "SwapInvalidDestinatary(address)",
        "SwapDeadlineExpired(uint256,uint256)",
        "SwapSlippage(uint256,uint256)",
        "EnforcedPause()",
        "ReentrancyGuardReentrantCall()",
        "SafeERC20FailedOperation(address)",
        "ERC20InsufficientBalance(address,uint256,uint256)",
        "ERC20InsufficientAllowance(address,uint256,uint256)",
      ].sort(),
    );
    expect(signatures(ERC20_ABI)).to.deep.equal(
      ["symbol()", "decimals()", "balanceOf(address)", "allowance(address,address)", "approve(address,uint256)"].sort(),
    );
    expect(signatures(AGGREGATOR_ABI)).to.deep.equal(["decimals()", "latestRoundData()"].sort());
    const currentPrice = new Interface(SWAP_ABI).getFunction("currentPrice")!;
    expect(currentPrice.outputs.map((output) => `${output.type} ${output.name}`)).to.deep.equal([
      "uint256 price",
      "uint8 decimals",
    ]);
  });

  it("cannot name what the contracts do not have: pickAbi throws", function () {
    expect(() => pickAbi(tokenSwapAbi, ["sell", "sellAll"])).to.throw("not in the ABI: sellAll");
  });
});
