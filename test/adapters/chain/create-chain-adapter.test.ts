import { expect } from "chai";
import { BrowserProvider, HDNodeWallet, Wallet, getAddress, keccak256, parseUnits, toUtf8Bytes } from "ethers";
import { network } from "hardhat";

import { createChainAdapter, createRpcProvider } from "../../../adapters/chain/index.js";
import type { RpcLog, RpcReceipt } from "../../../adapters/chain/blocks/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import {
  ChainUnavailableError,
  InsufficientFundsError,
  InvalidArgumentError,
  PriceUnavailableError,
  TradeRevertedError,
  UnknownWalletError,
  type StableCoin,
  type TradeKind,
  type TradeOrder,
  type TransactionReceipt,
} from "../../../core/index.js";
import { callsCarried } from "../../helpers/eth-calls.js";
import { STABLES, expectedStableOut, expectedTokensOut, suiteFixture } from "../../helpers/suite.js";
import { LOG_KEYS, RECEIPT_KEYS } from "../../helpers/web3-receipt-shape.js";

const connection = await network.create();
const { ethers, networkHelpers } = connection;
const MNEMONIC = "test test test test test test test test test test test junk";
const keyOf = (index: number) => HDNodeWallet.fromPhrase(MNEMONIC, undefined, `m/44'/60'/0'/0/${index}`).privateKey;
const PRICE = parseUnits("1.25", 8);
const deploySuiteOnly = () => suiteFixture(ethers);

async function deployed() {
  const suite = await networkHelpers.loadFixture(deploySuiteOnly);
  // A new adapter per test: a restored snapshot rewinds the chain but not an adapter's nonce cache.
  // It talks to the chain through a plain ethers provider over the EIP-1193 connection.
  const provider = new BrowserProvider(connection.provider, undefined, { cacheTimeout: -1 });
  const adapter = await createChainAdapter({
    provider,
    privateKeys: [keyOf(1)],
    addresses: suite.addresses,
    journal: new MemoryJournal(),
  });
  const coin = (symbol: string) => adapter.stableCoins.find((c) => c.symbol === symbol)!;
  const order = (
    kind: TradeKind,
    stable: StableCoin,
    amount: bigint,
    destinatary = suite.customer.address,
  ): TradeOrder => ({
    kind,
    wallet: suite.exchange.address as `0x${string}`,
    destinatary: destinatary as `0x${string}`,
    amount,
    stable,
  });
  const nonce = () => ethers.provider.getTransactionCount(suite.exchange.address, "pending");
  return { ...suite, provider, adapter, coin, order, nonce };
}

/** web3.js 1.x log id, written independently of core/receipt.ts. */
function web3Id(blockHash: string, txHash: string, logIndexHex: string) {
  const text = blockHash.replace("0x", "") + txHash.replace("0x", "") + logIndexHex.replace("0x", "");
  return `log_${keccak256(toUtf8Bytes(text)).replace("0x", "").slice(0, 8)}`;
}

/** Compares a formatted receipt field by field with the node's raw JSON-RPC receipt. */
async function expectWeb3Receipt(receipt: TransactionReceipt, logCount: number, from: string, to: string) {
  expect(Object.keys(receipt)).to.deep.equal(RECEIPT_KEYS);
  const raw = (await connection.provider.request({
    method: "eth_getTransactionReceipt",
    params: [receipt.transactionHash],
  })) as RpcReceipt;
  expect(receipt.blockHash).to.equal(raw.blockHash);
  expect(receipt.blockNumber).to.equal(Number(raw.blockNumber));
  expect(receipt.contractAddress).to.equal(null);
  expect(receipt.cumulativeGasUsed).to.equal(Number(raw.cumulativeGasUsed));
  expect(receipt.effectiveGasPrice).to.equal(Number(raw.effectiveGasPrice));
  expect(receipt.from).to.equal(from.toLowerCase()).and.to.equal(raw.from);
  expect(receipt.gasUsed).to.equal(Number(raw.gasUsed));
  expect(receipt.logsBloom)
    .to.equal(raw.logsBloom)
    .and.to.match(/^0x[0-9a-f]{512}$/);
  expect(receipt.status).to.equal(true);
  expect(receipt.to).to.equal(to.toLowerCase()).and.to.equal(raw.to);
  expect(receipt.transactionHash).to.match(/^0x[0-9a-f]{64}$/);
  expect(receipt.transactionIndex).to.equal(Number(raw.transactionIndex));
  expect(receipt.type).to.equal("0x2").and.to.equal(raw.type);
  expect(receipt).not.to.have.property("logs");

  expect(Object.keys(receipt.events)).to.deep.equal([...Array(logCount).keys()].map(String));
  raw.logs.forEach((rawLog: RpcLog, i: number) => {
    const log = receipt.events[String(i)]!; // the keys were checked above
    expect(Object.keys(log)).to.deep.equal(LOG_KEYS);
    expect(log.address).to.equal(getAddress(rawLog.address));
    expect(log.blockHash).to.equal(receipt.blockHash);
    expect(log.blockNumber).to.equal(receipt.blockNumber);
    expect(log.logIndex).to.equal(Number(rawLog.logIndex));
    expect(log.removed).to.equal(false);
    expect(log.transactionHash).to.equal(receipt.transactionHash);
    expect(log.transactionIndex).to.equal(receipt.transactionIndex);
    expect(log.id)
      .to.equal(web3Id(rawLog.blockHash, rawLog.transactionHash, rawLog.logIndex))
      .and.to.match(/^log_[0-9a-f]{8}$/);
    expect(log.returnValues).to.deep.equal({});
    expect(log.signature).to.equal(null);
    expect(log.raw).to.deep.equal({ data: rawLog.data, topics: rawLog.topics });
  });
  expect(raw.logs).to.have.length(logCount);
}

describe("the chain adapter", function () {
  for (const symbol of STABLES) {
    describe(`trading against ${symbol}`, function () {
      it("sells: pays the exact stable coin and returns a five-log web3 receipt", async function () {
        const { adapter, coin, order, token, stableCoins, swap, exchange, customer } = await deployed();
        const stable = coin(symbol);
        const amount = parseUnits("3.333333333333333333", 18);
        const before = await stableCoins[symbol].balanceOf(customer);
        const tokensBefore = await token.balanceOf(exchange);
        const receipt = await adapter.trade.sell(order("sell", stable, amount));
        await expectWeb3Receipt(receipt, 5, exchange.address, await swap.getAddress());
        expect(await stableCoins[symbol].balanceOf(customer)).to.equal(
          before + expectedStableOut(amount, PRICE, stable.decimals),
        );
        expect(await token.balanceOf(exchange)).to.equal(tokensBefore - amount);
      });

      for (const kind of ["buy", "remittance"] as const) {
        it(`${kind === "buy" ? "buys" : "remits"}: mints the exact tokens and returns a three-log web3 receipt`, async function () {
          const { adapter, coin, order, token, stableCoins, swap, exchange, customer } = await deployed();
          const stable = coin(symbol);
          const usd = parseUnits("10.01", stable.decimals);
          const paidBefore = await stableCoins[symbol].balanceOf(exchange);
          const receipt = await adapter.trade[kind](order(kind, stable, usd));
          await expectWeb3Receipt(receipt, 3, exchange.address, await swap.getAddress());
          expect(await token.balanceOf(customer)).to.equal(expectedTokensOut(usd, PRICE, stable.decimals));
          expect(await stableCoins[symbol].balanceOf(exchange)).to.equal(paidBefore - usd);
        });
      }
    });
  }

  describe("the price", function () {
    it("quotes USD from the swap's feed and EUR and CHF through the fiat feeds, rounded down to 8 decimals", async function () {
      const { adapter } = await deployed();
      expect(await adapter.price.getPrice()).to.deep.equal({
        cryptoCurrency: "TTK",
        rateForCashCurrency: { CHF: 1.11607142, EUR: 1.1574074, USD: 1.25 },
        rateWithDiscountForCashCurrency: {},
      });
    });

    it("fills the discount record when a cash discount is configured", async function () {
      const { provider, addresses } = await deployed();
      const adapter = await createChainAdapter({
        provider,
        privateKeys: [keyOf(1)],
        addresses,
        cashDiscountBps: 200,
        journal: new MemoryJournal(),
      });
      const price = await adapter.price.getPrice();
      expect(price.rateWithDiscountForCashCurrency).to.deep.equal({ CHF: 1.09374999, EUR: 1.13425925, USD: 1.225 });
    });

    it("follows the feeds", async function () {
      const { adapter, feeds } = await deployed();
      await feeds.tokenUsd.updateAnswer(parseUnits("2", 8));
      await feeds.eurUsd.updateAnswer(parseUnits("0.8", 8));
      expect((await adapter.price.getPrice()).rateForCashCurrency).to.deep.include({ USD: 2, EUR: 2.5 });
    });

    it("is unavailable when the token feed is stale or not positive, or a fiat feed is broken", async function () {
      const { adapter, feeds } = await deployed();
      await feeds.tokenUsd.updateAnswer(0n);
      await expectRejected(adapter.price.getPrice(), PriceUnavailableError, /token\/USD feed answered 0/);
      await feeds.tokenUsd.updateAnswer(PRICE);
      await feeds.chfUsd.updateAnswer(-1n);
      await expectRejected(adapter.price.getPrice(), PriceUnavailableError, /CHF\/USD feed answered -1/);
      await feeds.chfUsd.updateAnswer(parseUnits("1.12", 8));
      await networkHelpers.time.increase(26 * 3600);
      await expectRejected(adapter.price.getPrice(), PriceUnavailableError, /older than/);
    });
  });

  describe("refusing trades", function () {
    it("refuses every failing trade with a clear error and leaves the wallet's nonce unchanged", async function () {
      const { adapter, coin, order, nonce, owner, swap, feeds, stableCoins, customer, other, exchange, token } =
        await deployed();
      const before = await nonce();
      const DAI = coin("DAI");
      const USDT = coin("USDT");

      await expectRejected(
        adapter.trade.sell({ ...order("sell", DAI, 1n), wallet: other.address as `0x${string}` }),
        UnknownWalletError,
        /userAddress/,
      );
      await expectRejected(
        adapter.trade.sell(order("sell", DAI, parseUnits("1000001", 18))),
        InsufficientFundsError,
        /userAddress: .* holds 1000000\.0 TTK/,
      );
      await expectRejected(
        adapter.trade.buy(order("buy", USDT, parseUnits("1000001", 6))),
        InsufficientFundsError,
        /holds 1000000\.0 USDT/,
      );
      await expectRejected(
        adapter.trade.sell(order("sell", USDT, 10n ** 9n)),
        InvalidArgumentError,
        /amount: is worth less than one base unit/,
      );

      // Reserves run out.
      await swap.connect(owner).withdrawReserves(stableCoins.USDC, owner, await stableCoins.USDC.balanceOf(swap));
      await expectRejected(
        adapter.trade.sell(order("sell", coin("USDC"), 10n ** 18n)),
        InsufficientFundsError,
        /reserves hold 0\.0/,
      );

      // A stable coin the swap stopped allowing.
      await swap.connect(owner).setStableAllowed(stableCoins.DAI, false);
      await expectRejected(adapter.trade.buy(order("buy", DAI, 10n ** 18n)), InvalidArgumentError, /usdAddress/);
      await swap.connect(owner).setStableAllowed(stableCoins.DAI, true);

      // Bad prices.
      await feeds.tokenUsd.updateAnswer(-5n);
      await expectRejected(
        adapter.trade.remittance(order("remittance", DAI, 10n ** 18n)),
        PriceUnavailableError,
        /answered -5/,
      );
      await feeds.tokenUsd.updateAnswer(PRICE);
      await networkHelpers.time.increase(26 * 3600);
      await expectRejected(adapter.trade.sell(order("sell", DAI, 10n ** 18n)), PriceUnavailableError, /older than/);
      await feeds.tokenUsd.updateAnswer(PRICE);

      // Paused.
      await swap.connect(owner).pause();
      await expectRejected(adapter.trade.buy(order("buy", DAI, 10n ** 18n)), TradeRevertedError, /paused/);
      await swap.connect(owner).unpause();

      expect(await nonce()).to.equal(before);
      expect(await token.balanceOf(customer)).to.equal(0n);
      // The adapter is still usable afterwards, with no nonce gap.
      const receipt = await adapter.trade.buy(order("buy", DAI, 10n ** 18n));
      expect(receipt.status).to.equal(true);
      expect(await nonce()).to.equal(before + 1);
      expect(await ethers.provider.getTransactionCount(exchange.address, "latest")).to.equal(before + 1);
    });
  });

  describe("concurrency", function () {
    it("runs 50 concurrent sells from one wallet: all mined, distinct hashes, balances exact to the base unit", async function () {
      const { adapter, coin, order, token, stableCoins, exchange, customer, nonce } = await deployed();
      const stables = [coin("DAI"), coin("USDT"), coin("USDC")];
      const amounts = Array.from({ length: 50 }, (_, i) => parseUnits("1", 18) + BigInt(i) * 123_456_789_012_345n);
      const start = await nonce();
      const tokensBefore = await token.balanceOf(exchange);
      const paidBefore = await Promise.all(STABLES.map((s) => stableCoins[s].balanceOf(customer)));

      const receipts = await Promise.all(
        amounts.map((amount, i) => adapter.trade.sell(order("sell", stables[i % 3]!, amount))),
      );

      expect(new Set(receipts.map((r) => r.transactionHash)).size).to.equal(50);
      expect(receipts.every((r) => r.status && Object.keys(r.events).length === 5)).to.equal(true);
      expect(await nonce()).to.equal(start + 50);
      expect(await token.balanceOf(exchange)).to.equal(tokensBefore - amounts.reduce((a, b) => a + b, 0n));
      for (const [s, symbol] of STABLES.entries()) {
        const expected = amounts
          .filter((_, i) => i % 3 === s)
          .reduce((sum, amount) => sum + expectedStableOut(amount, PRICE, stables[s]!.decimals), 0n);
        expect(await stableCoins[symbol].balanceOf(customer)).to.equal(paidBefore[s]! + expected);
      }
    });

    it("refuses the sells that 20 concurrent ones would overdraw, sends none that reverts, and shares its balance reads", async function () {
      const { adapter, coin, order, token, exchange, customer, nonce } = await deployed();
      await adapter.trade.sell(order("sell", coin("DAI"), 10n ** 18n)); // sets the allowance up
      // The wallet keeps 10.5 tokens: ten sells of one token fit, the eleventh does not.
      await (
        await token.connect(exchange).transfer(customer, (await token.balanceOf(exchange)) - parseUnits("10.5", 18))
      ).wait();
      const balanceReads = { count: 0 };
      const request = connection.provider.request.bind(connection.provider);
      connection.provider.request = async (args) => {
        // Each read, alone or carried in the call batcher's eth_call.
        for (const call of callsCarried(args.method, args.params))
          if (call.data?.startsWith("0x70a08231")) balanceReads.count += 1; // balanceOf
        return request(args);
      };
      const start = await nonce();
      try {
        const outcomes = await Promise.allSettled(
          Array.from({ length: 20 }, () => adapter.trade.sell(order("sell", coin("USDC"), 10n ** 18n))),
        );
        const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
        expect(outcomes.filter((o) => o.status === "fulfilled")).to.have.length(10);
        expect(refused).to.have.length(10);
        for (const { reason } of refused) expect(reason).to.be.instanceOf(InsufficientFundsError);
        expect(await nonce()).to.equal(start + 10); // nothing sent for the refused ones, nothing reverted
        expect(await token.balanceOf(exchange)).to.equal(parseUnits("0.5", 18));
        // Trades that arrive together share one read; a short one looks again before refusing.
        expect(balanceReads.count).to.be.lessThan(20);
      } finally {
        connection.provider.request = request;
      }
    });

    it("reads the native coin's USD feed once for the trades signed at one block, not once a trade", async function () {
      const { adapter, coin, order, addresses } = await deployed();
      await adapter.trade.sell(order("sell", coin("DAI"), 10n ** 18n)); // sets the allowance up
      await new Promise((resolve) => setTimeout(resolve, 1100)); // past the fee oracle's 1 s: a new head
      const native = addresses.feeds.nativeUsd!.toLowerCase();
      const nativeReads = { count: 0 };
      const request = connection.provider.request.bind(connection.provider);
      connection.provider.request = async (args) => {
        // Each read, alone or carried in the call batcher's eth_call.
        for (const call of callsCarried(args.method, args.params))
          if (call.to?.toLowerCase() === native && call.data?.startsWith("0xfeaf968c")) nativeReads.count += 1; // latestRoundData
        return request(args);
      };
      try {
        const receipts = await Promise.all(
          Array.from({ length: 8 }, () => adapter.trade.sell(order("sell", coin("USDC"), 10n ** 18n))),
        );
        expect(receipts.every((r) => r.status)).to.equal(true);
        expect(nativeReads.count).to.equal(1);
      } finally {
        connection.provider.request = request;
      }
    });

    it("refuses the sells that would pay out more than the swap's reserves together, and sends none that reverts", async function () {
      const { adapter, coin, order, stableCoins, swap, nonce } = await deployed();
      // The swap holds 1,000,000 USDT: at 1.25 USD a token, 16 sells of 50,000 tokens (62,500 USDT each) fit, 18 do not.
      expect(await stableCoins.USDT.balanceOf(swap)).to.equal(parseUnits("1000000", 6));
      const start = await nonce();
      const outcomes = await Promise.allSettled(
        Array.from({ length: 18 }, () => adapter.trade.sell(order("sell", coin("USDT"), parseUnits("50000", 18)))),
      );
      const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
      expect(outcomes.filter((o) => o.status === "fulfilled")).to.have.length(16);
      expect(refused).to.have.length(2);
      for (const { reason } of refused) {
        expect(reason).to.be.instanceOf(InsufficientFundsError);
        expect((reason as Error).message).to.match(
          /^the swap's reserves hold [\d.]+ USDT( \([\d.]+ already committed to trades in flight\))?, the trade pays out 62500\.0$/,
        );
      }
      expect(await nonce()).to.equal(start + 16); // only what fit was signed: nothing reverted on chain
      expect(await stableCoins.USDT.balanceOf(swap)).to.equal(0n);
    });

    it("recovers when someone else uses the wallet (nonce too low) without a restart", async function () {
      const { adapter, coin, order, token, swap, exchange, nonce } = await deployed();
      await adapter.trade.buy(order("buy", coin("USDC"), 10n ** 6n));
      // Another program spends the nonce the adapter expects next.
      const outsider = new Wallet(keyOf(1), ethers.provider);
      await (await token.connect(outsider).approve(swap, await token.allowance(exchange, swap))).wait();
      const start = await nonce();
      const receipt = await adapter.trade.sell(order("sell", coin("USDC"), 10n ** 18n));
      expect(receipt.status).to.equal(true);
      expect(await nonce()).to.equal(start + 1);
    });
  });

  describe("allowances", function () {
    it("resets a non-zero USDT allowance to zero before topping it up (the USDT quirk)", async function () {
      const { adapter, coin, order, stableCoins, swap, exchange } = await deployed();
      await stableCoins.USDT.connect(exchange).approve(swap, 0n);
      await stableCoins.USDT.connect(exchange).approve(swap, 5n);
      const receipt = await adapter.trade.buy(order("buy", coin("USDT"), parseUnits("100", 6)));
      expect(Object.keys(receipt.events)).to.have.length(3);
      expect(await stableCoins.USDT.allowance(exchange, swap)).to.equal(await stableCoins.USDT.balanceOf(exchange));
    });

    it("tops up a short token allowance with a finite one, so the sell still has five logs", async function () {
      const { adapter, coin, order, token, swap, exchange } = await deployed();
      await token.connect(exchange).approve(swap, 1n);
      const receipt = await adapter.trade.sell(order("sell", coin("DAI"), 2n * 10n ** 18n));
      expect(Object.keys(receipt.events)).to.have.length(5);
      expect(await token.allowance(exchange, swap)).to.equal(await token.balanceOf(exchange));
    });
  });

  describe("when the chain cannot be reached", function () {
    it("refuses to start with ChainUnavailableError", async function () {
      const { addresses } = await deployed();
      const provider = createRpcProvider("http://127.0.0.1:9", 31337n, 2_000);
      await expectRejected(
        createChainAdapter({ provider, privateKeys: [keyOf(1)], addresses, journal: new MemoryJournal() }),
        ChainUnavailableError,
        /did not answer/,
      );
      provider.destroy();
    });
  });
});

async function expectRejected(promise: Promise<unknown>, type: new (...args: never[]) => Error, message: RegExp) {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected a ${type.name}`).to.be.instanceOf(type);
  expect((caught as Error).message).to.match(message);
}
