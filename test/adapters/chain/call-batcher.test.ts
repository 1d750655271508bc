/**
 * The call batcher (adapters/chain/rpc/call-batcher.ts) on EDR: what it answers is what eth_calls of
 * their own answer (test/helpers/call-batcher-cases.ts, also run on anvil); the calls of a tick go
 * out as one eth_call; a node that takes no state overrides, or ignores them, still gets right
 * answers from plain eth_calls; and a trade through the chain adapter costs one eth_call.
 */
import { expect } from "chai";
import { BrowserProvider, type Eip1193Provider, HDNodeWallet, Interface, Wallet, makeError, parseUnits } from "ethers";
import { artifacts, network } from "hardhat";

import { ERC20_ABI, SWAP_ABI } from "../../../adapters/chain/tx/index.js";
import { CallBatcher, SIMULATOR_ADDRESS, executionGas } from "../../../adapters/chain/rpc/index.js";
import { tradeGasLimit } from "../../../adapters/chain/trade/index.js";
import { createChainAdapter } from "../../../adapters/chain/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import type { TradeKind } from "../../../core/index.js";
import { callSimulatorAbi, callSimulatorRuntime } from "../../../gen/abi/index.js";
import {
  type BatcherChain,
  callBatcherCases,
  expectSameProof,
  plainCall,
  recordCalls,
} from "../../helpers/call-batcher-cases.js";
import { callsCarried } from "../../helpers/eth-calls.js";
import { suiteFixture } from "../../helpers/suite.js";
import { withoutMetadata } from "../../../scripts/generate-abi.js";

const connection = await network.create();
const { ethers, networkHelpers } = connection;
const erc20 = new Interface(ERC20_ABI);
const swap = new Interface(SWAP_ABI);
const MNEMONIC = "test test test test test test test test test test test junk";
const keyOf = (index: number) => HDNodeWallet.fromPhrase(MNEMONIC, undefined, `m/44'/60'/0'/0/${index}`).privateKey;
const deploySuiteOnly = () => suiteFixture(ethers);

/** An ethers provider over `request` (the EDR connection, or a node made to misbehave around it). */
function providerOver(request: Eip1193Provider["request"]): BrowserProvider {
  return new BrowserProvider({ request }, undefined, { cacheTimeout: -1 });
}

async function chain(): Promise<BatcherChain> {
  const suite = await networkHelpers.loadFixture(deploySuiteOnly);
  return {
    provider: providerOver((args) => connection.provider.request(args)),
    addresses: suite.addresses,
    exchange: suite.exchange.address,
    customer: suite.customer.address,
  };
}

/** `n` distinct reads: the token balance of `n` made-up holders. */
function balanceReads(token: string, n: number) {
  return Array.from({ length: n }, () => ({
    to: token,
    data: erc20.encodeFunctionData("balanceOf", [Wallet.createRandom().address]),
  }));
}

describe("the call batcher", function () {
  describe("on EDR: the same answers as eth_calls of their own", function () {
    callBatcherCases(chain);
  });

  describe("its simulator", function () {
    it("runs the compiled runtime code, from gen/abi, at the address the contract derives", async function () {
      const { deployedBytecode } = await artifacts.readArtifact("CallSimulator");
      expect(callSimulatorRuntime).to.equal(withoutMetadata(deployedBytecode));
      expect(new Interface(callSimulatorAbi).getFunction("simulate")).to.not.equal(null);
      // A proof runs only if the wallet's code sees SIMULATOR as its caller: the addresses agree.
      const { provider, addresses, exchange, customer } = await chain();
      const data = swap.encodeFunctionData("buy", [addresses.stableCoins.DAI, 10n ** 18n, customer, 0n, 2n ** 40n]);
      const proof = await new CallBatcher({ provider }).prove(exchange, addresses.swap, data, tradeGasLimit("buy"));
      expect(proof.ok).to.equal(true);
      expect(proof.ok && proof.gasUsed).to.be.a("bigint");
      expect(SIMULATOR_ADDRESS).to.match(/^0x[0-9a-fA-F]{40}$/);
    });

    it("leaves a proof's call what a transaction leaves it: its limit less 21,000 and 4 or 16 gas a calldata byte", function () {
      expect(executionGas("0x", 21_000n)).to.equal(0n);
      expect(executionGas("0x", 20_999n)).to.be.undefined;
      expect(executionGas("0x00ff", 100_000n)).to.equal(100_000n - 21_020n);
      // EIP-7623's floor, 21,000 and 10 a token (a zero byte one, another four), is not left to the call.
      expect(executionGas("0x00ff", 21_050n)).to.equal(30n);
      expect(executionGas("0x00ff", 21_049n)).to.be.undefined;
      expect(executionGas(`0x${"ff".repeat(100)}`, 21_000n + 1_600n)).to.be.undefined;
      expect(executionGas(`0x${"ff".repeat(100)}`, 21_000n + 4_000n)).to.equal(4_000n - 1_600n);
    });
  });

  describe("batching", function () {
    it("sends the calls made in one tick as one eth_call, and a read asked twice in it once", async function () {
      const { provider, addresses, exchange, customer } = await chain();
      const reads = balanceReads(addresses.token, 12);
      const repeated = [...reads, ...reads.slice(0, 4)];
      const tx = {
        from: exchange,
        to: addresses.swap,
        data: swap.encodeFunctionData("sell", [addresses.stableCoins.USDC, 10n ** 18n, customer, 0n, 2n ** 40n]),
      };
      const expected = await Promise.all(repeated.map((read) => plainCall(provider, read)));
      const plainProof = await plainCall(provider, tx, tradeGasLimit("sell"));
      const batcher = new CallBatcher({ provider });
      const recorder = recordCalls(provider);
      try {
        const [answers, proofs] = await Promise.all([
          Promise.all(repeated.map((read) => batcher.read(read.to, read.data))),
          Promise.all([0, 1, 2].map(() => batcher.prove(tx.from, tx.to, tx.data, tradeGasLimit("sell")))),
        ]);
        expect(answers).to.deep.equal(expected.map((answer) => (answer.ok ? answer.output : "not ok")));
        for (const proof of proofs) expectSameProof("sell", tx, proof, plainProof);
        expect(recorder.ethCalls()).to.deep.equal({ batched: 1, plain: 0 });
        const carried = callsCarried("eth_call", recorder.calls.find((call) => call.method === "eth_call")!.params);
        expect(carried).to.have.length(12 + 3); // the 12 distinct reads, then the 3 proofs
        expect(carried.slice(12).every((call) => call.from === tx.from)).to.equal(true);
      } finally {
        recorder.restore();
      }
    });

    it("holds the calls made while a batch is in flight for the next one: at most one in flight", async function () {
      const { addresses } = await chain();
      // The node holds its answer to the first eth_call until told.
      let answerFirst!: () => void;
      const held = new Promise<void>((resolve) => (answerFirst = resolve));
      let seen = 0;
      const provider = providerOver(async (args) => {
        if (args.method === "eth_call" && seen++ === 0) await held;
        return connection.provider.request(args);
      });
      const [first, ...later] = balanceReads(addresses.token, 4);
      const batcher = new CallBatcher({ provider });
      const recorder = recordCalls(provider);
      try {
        const answered = batcher.read(first!.to, first!.data);
        await new Promise((resolve) => setTimeout(resolve, 5)); // the batch goes out
        expect(recorder.ethCalls().batched).to.equal(1);
        const laterAnswers = Promise.all(later.map((read) => batcher.read(read.to, read.data)));
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(recorder.ethCalls().batched).to.equal(1); // the later calls wait for the first answer
        answerFirst();
        expect(await answered).to.equal(`0x${"0".repeat(64)}`);
        expect(await laterAnswers).to.deep.equal(later.map(() => `0x${"0".repeat(64)}`));
        expect(recorder.ethCalls()).to.deep.equal({ batched: 2, plain: 0 });
        const batches = recorder.calls.filter((call) => call.method === "eth_call");
        expect(callsCarried("eth_call", batches[1]!.params)).to.have.length(3);
      } finally {
        recorder.restore();
      }
    });

    it("sends riding reads with the next batch that goes out anyway, or alone when flushed, a wallet's native balance among them", async function () {
      const { provider, addresses, exchange } = await chain();
      const batcher = new CallBatcher({ provider });
      const recorder = recordCalls(provider);
      const simulator = new Interface(callSimulatorAbi);
      try {
        const [tokenRead, other] = balanceReads(addresses.token, 2);
        const native = batcher.ride(SIMULATOR_ADDRESS, simulator.encodeFunctionData("nativeBalance", [exchange]));
        const riding = batcher.ride(tokenRead!.to, tokenRead!.data);
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(recorder.ethCalls().batched).to.equal(0); // riders send nothing of their own
        expect(batcher.riders).to.equal(2);
        // A trade's read goes out: the riders with it, one joining the same read.
        const [read] = await Promise.all([batcher.readAt(tokenRead!.to, tokenRead!.data), riding, native]);
        expect(recorder.ethCalls().batched).to.equal(1);
        const carried = callsCarried("eth_call", recorder.calls.find((call) => call.method === "eth_call")!.params);
        expect(carried).to.have.length(2);
        const [balance] = simulator.decodeFunctionResult("nativeBalance", (await native).data);
        expect(balance).to.equal(await provider.getBalance(exchange));
        expect((await native).block).to.equal(read.block);
        expect(batcher.riders).to.equal(0);
        // Nothing else goes out: a flush sends the rider alone.
        const alone = batcher.ride(other!.to, other!.data);
        batcher.flushRiders();
        expect((await alone).data).to.equal(`0x${"0".repeat(64)}`);
        expect(recorder.ethCalls()).to.deep.equal({ batched: 2, plain: 0 });
      } finally {
        recorder.restore();
      }
    });

    it("holds at most maxEntries calls in one eth_call", async function () {
      const { provider, addresses } = await chain();
      const batcher = new CallBatcher({ provider, maxEntries: 8 });
      const recorder = recordCalls(provider);
      try {
        const reads = balanceReads(addresses.token, 20);
        await Promise.all(reads.map((read) => batcher.read(read.to, read.data)));
        expect(recorder.ethCalls()).to.deep.equal({ batched: 3, plain: 0 });
        const batches = recorder.calls.filter((call) => call.method === "eth_call");
        expect(batches.map((call) => callsCarried(call.method, call.params).length)).to.deep.equal([8, 8, 4]);
      } finally {
        recorder.restore();
      }
    });
  });

  describe("on a node that takes no state overrides", function () {
    /** Reads and proofs through `batcher` on `provider`, against their plain eth_calls on the real node. */
    async function expectRightAnswers(batcher: CallBatcher, real: BatcherChain) {
      const { addresses, exchange, customer } = real;
      const reads = [
        ...balanceReads(addresses.token, 3),
        { to: addresses.token, data: erc20.encodeFunctionData("balanceOf", [exchange]) },
      ];
      const txs = [addresses.stableCoins.USDC, addresses.token].map((stable) => ({
        from: exchange,
        to: addresses.swap,
        data: swap.encodeFunctionData("sell", [stable, 10n ** 18n, customer, 0n, 2n ** 40n]),
      }));
      const limit = tradeGasLimit("sell");
      const [answers, proofs] = await Promise.all([
        Promise.all(reads.map((read) => batcher.read(read.to, read.data))),
        Promise.all(txs.map((tx) => batcher.prove(tx.from, tx.to, tx.data, limit))),
      ]);
      const expected = await Promise.all(reads.map((read) => plainCall(real.provider, read)));
      expect(answers).to.deep.equal(expected.map((answer) => (answer.ok ? answer.output : "not ok")));
      for (const [i, tx] of txs.entries())
        expectSameProof(`proof ${i}`, tx, proofs[i]!, await plainCall(real.provider, tx, limit));
      expect(proofs.map((proof) => proof.ok)).to.deep.equal([true, false]);
    }

    it("refuses the override (-32602): plain eth_calls, for good", async function () {
      const real = await chain();
      const provider = providerOver(async (args) => {
        if (args.method === "eth_call" && (args.params?.length ?? 0) > 2)
          throw Object.assign(new Error("too many arguments, want at most 2"), { code: -32602 });
        return connection.provider.request(args);
      });
      const batcher = new CallBatcher({ provider });
      const recorder = recordCalls(provider);
      try {
        await expectRightAnswers(batcher, real);
        expect(batcher.batching).to.equal(false);
        const refused = recorder.ethCalls().batched;
        expect(refused).to.equal(1);
        await expectRightAnswers(batcher, real);
        expect(recorder.ethCalls().batched).to.equal(refused); // not asked again
      } finally {
        recorder.restore();
      }
    });

    it("ignores the override (no simulator answers): plain eth_calls, for good", async function () {
      const real = await chain();
      const provider = providerOver((args) =>
        connection.provider.request(
          args.method === "eth_call" ? { ...args, params: (args.params as unknown[]).slice(0, 2) } : args,
        ),
      );
      const batcher = new CallBatcher({ provider });
      await expectRightAnswers(batcher, real);
      expect(batcher.batching).to.equal(false);
    });

    it("fails every call of a batch the network lost with that error, and keeps batching", async function () {
      const { provider, addresses } = await chain();
      const batcher = new CallBatcher({ provider });
      const send = provider.send;
      provider.send = function (this: BrowserProvider, method, params) {
        if (method === "eth_call" && Array.isArray(params) && params.length > 2)
          return Promise.reject(makeError("request timeout", "TIMEOUT", { operation: "eth_call" }));
        return send.call(this, method, params);
      };
      try {
        const reads = balanceReads(addresses.token, 3);
        const outcomes = await Promise.allSettled(reads.map((read) => batcher.read(read.to, read.data)));
        for (const outcome of outcomes) {
          expect(outcome.status).to.equal("rejected");
          expect((outcome as PromiseRejectedResult).reason.code).to.equal("TIMEOUT");
        }
        expect(batcher.batching).to.equal(true);
      } finally {
        provider.send = send;
      }
    });
  });

  describe("in the chain adapter", function () {
    it("costs a sell, a buy and a remittance one eth_call each", async function () {
      const suite = await networkHelpers.loadFixture(deploySuiteOnly);
      const ethCalls: unknown[][] = [];
      const provider = providerOver((args) => {
        if (args.method === "eth_call") ethCalls.push(args.params as unknown[]);
        return connection.provider.request(args);
      });
      const adapter = await createChainAdapter({
        provider,
        privateKeys: [keyOf(1)],
        addresses: suite.addresses,
        journal: new MemoryJournal(),
      });
      const coin = (symbol: string) => adapter.stableCoins.find((c) => c.symbol === symbol)!;
      const order = (kind: TradeKind, symbol: string, amount: bigint) => ({
        kind,
        wallet: suite.exchange.address as `0x${string}`,
        destinatary: suite.customer.address as `0x${string}`,
        amount,
        stable: coin(symbol),
      });
      try {
        await adapter.trade.sell(order("sell", "DAI", 10n ** 18n)); // the first reads: decimals, the token feed
        for (const [kind, symbol, amount] of [
          ["sell", "USDC", parseUnits("2", 18)],
          ["buy", "DAI", parseUnits("5", 18)],
          ["remittance", "USDT", parseUnits("5", 6)],
          ["sell", "USDT", parseUnits("1", 18)],
        ] as const) {
          ethCalls.length = 0;
          const receipt = await adapter.trade[kind](order(kind, symbol, amount));
          expect(receipt.status).to.equal(true);
          expect(ethCalls, `${kind} ${symbol}`).to.have.length(1);
          expect((ethCalls[0]![0] as { to: string }).to).to.equal(SIMULATOR_ADDRESS);
        }
        // A burst: the trades arriving together share their eth_calls.
        ethCalls.length = 0;
        const receipts = await Promise.all(
          Array.from({ length: 12 }, () => adapter.trade.sell(order("sell", "USDC", 10n ** 18n))),
        );
        expect(receipts.every((receipt) => receipt.status)).to.equal(true);
        expect(ethCalls.length).to.be.at.most(3);
      } finally {
        await adapter.close();
      }
    });
  });
});
