import { expect } from "chai";
import { BrowserProvider, HDNodeWallet, parseUnits } from "ethers";
import { network } from "hardhat";

import { MemoryJournal } from "../../../adapters/journal/index.js";
import { createChainAdapter } from "../../../adapters/chain/index.js";
import { InvalidArgumentError, createUseCases } from "../../../core/index.js";
import { suiteFixture } from "../../helpers/suite.js";

const connection = await network.create();
const { ethers } = connection;

describe("the core driving the chain adapter", function () {
  it("sells, buys, remits and quotes from raw client requests", async function () {
    const suite = await suiteFixture(ethers);
    const chain = await createChainAdapter({
      provider: new BrowserProvider(connection.provider, undefined, { cacheTimeout: -1 }),
      privateKeys: [
        HDNodeWallet.fromPhrase(
          "test test test test test test test test test test test junk",
          undefined,
          "m/44'/60'/0'/0/1",
        ).privateKey,
      ],
      addresses: suite.addresses,
      journal: new MemoryJournal(),
    });
    const useCases = createUseCases({
      trade: chain.trade,
      price: chain.price,
      config: { stableCoins: chain.stableCoins, limits: { maxSellTokens: parseUnits("100000", 18), maxUsd: "100000" } },
    });
    const request = (amount: string, usdAddress: string) => ({
      userAddress: suite.exchange.address.toLowerCase(),
      destinatary: suite.customer.address,
      amount,
      usdAddress,
    });

    const sold = await useCases.sell(request("12.5", suite.addresses.stableCoins.USDC));
    expect(Object.keys(sold.events)).to.have.length(5);
    expect(await suite.stableCoins.USDC.balanceOf(suite.customer)).to.equal(parseUnits("15.625", 6));

    const bought = await useCases.buy(request("10", suite.addresses.stableCoins.DAI));
    expect(Object.keys(bought.events)).to.have.length(3);
    const remitted = await useCases.remittance(request("2.5", suite.addresses.stableCoins.USDT));
    expect(Object.keys(remitted.events)).to.have.length(3);
    expect(await suite.token.balanceOf(suite.customer)).to.equal(parseUnits("10", 18));

    expect(await useCases.price()).to.deep.equal({
      cryptoCurrency: "TTK",
      rateForCashCurrency: { CHF: 1.11607142, EUR: 1.1574074, USD: 1.25 },
      rateWithDiscountForCashCurrency: {},
    });

    const nonce = await ethers.provider.getTransactionCount(suite.exchange.address, "pending");
    let refused: unknown;
    try {
      await useCases.buy(request("0.0000001", suite.addresses.stableCoins.USDT));
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(InvalidArgumentError);
    expect((refused as Error).message).to.match(/^amount: .*6 decimal places/);
    expect(await ethers.provider.getTransactionCount(suite.exchange.address, "pending")).to.equal(nonce);
  });
});
