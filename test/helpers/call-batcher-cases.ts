/**
 * The call batcher's equivalence with plain eth_calls (adapters/chain/rpc/call-batcher.ts), as cases
 * any node runs: test/adapters/chain/call-batcher.test.ts on EDR, call-batcher.anvil.test.ts on
 * anvil. Reads and proofs through the batcher, in one eth_call of the simulator, answer byte for
 * byte what each gives as an eth_call of its own: outputs, revert data and the revert's name, and
 * the least gas limit a trade succeeds with.
 */
import { expect } from "chai";
import { AbiCoder, Interface, type JsonRpcApiProvider, isError, parseUnits, toQuantity } from "ethers";

import { AGGREGATOR_ABI, ERC20_ABI, SWAP_ABI } from "../../adapters/chain/tx/index.js";
import { CallBatcher, revertName, type ProofOutcome } from "../../adapters/chain/rpc/index.js";
import { tradeGasLimit } from "../../adapters/chain/trade/index.js";
import type { DeploymentAddresses } from "../../adapters/chain/index.js";
import { isBatchedCall } from "./eth-calls.js";

const swap = new Interface(SWAP_ABI);
const erc20 = new Interface(ERC20_ABI);
const aggregator = new Interface(AGGREGATOR_ABI);

/** A chain with the suite deployed, and its exchange wallet funded and approved (scripts/deploy.ts). */
export interface BatcherChain {
  provider: JsonRpcApiProvider;
  addresses: DeploymentAddresses;
  exchange: string;
  customer: string;
}

/** Every JSON-RPC call `provider` sends from now on, until `restore`. */
export function recordCalls(provider: JsonRpcApiProvider): {
  calls: Array<{ method: string; params: unknown[] }>;
  /** The eth_calls among them: batched (the simulator's) and plain. */
  ethCalls(): { batched: number; plain: number };
  restore(): void;
} {
  const calls: Array<{ method: string; params: unknown[] }> = [];
  const send = provider.send;
  provider.send = function (this: JsonRpcApiProvider, method: string, params: unknown[] | Record<string, unknown>) {
    calls.push({ method, params: params as unknown[] });
    return send.call(this, method, params);
  };
  return {
    calls,
    ethCalls: () => {
      const eth = calls.filter((call) => call.method === "eth_call");
      const batched = eth.filter((call) => isBatchedCall(call.method, call.params)).length;
      return { batched, plain: eth.length - batched };
    },
    restore: () => {
      provider.send = send;
    },
  };
}

/** An eth_call of its own against the latest block: its output, or the error it fails with. */
export async function plainCall(
  provider: JsonRpcApiProvider,
  tx: { from?: string; to: string; data: string },
  gasLimit?: bigint,
): Promise<{ ok: true; output: string } | { ok: false; error: unknown }> {
  try {
    const call = gasLimit === undefined ? tx : { ...tx, gas: toQuantity(gasLimit) };
    return { ok: true, output: (await provider.send("eth_call", [call, "latest"])) as string };
  } catch (error) {
    return { ok: false, error };
  }
}

/** A proof's revert as the provider would have thrown it: what the adapter's error mapping reads. */
export function proofError(tx: { from: string; to: string; data: string }, outcome: ProofOutcome): Error {
  if (outcome.ok) throw new Error("the proof succeeded");
  return AbiCoder.getBuiltinCallException("call", tx, outcome.revertData);
}

/** Expects the batched proof of `tx` to say what a plain eth_call with the same limit says. */
export function expectSameProof(
  label: string,
  tx: { from: string; to: string; data: string },
  batched: ProofOutcome,
  plain: Awaited<ReturnType<typeof plainCall>>,
): void {
  expect(batched.ok, `${label}: succeeds in the batch as on its own`).to.equal(plain.ok);
  if (plain.ok && batched.ok) {
    expect(batched.output, `${label}: output`).to.equal(plain.output);
    return;
  }
  if (plain.ok || batched.ok) return;
  expect(isError(plain.error, "CALL_EXCEPTION"), `${label}: the plain call's error is a call exception`).to.equal(true);
  const plainData = (plain.error as { data?: string | null }).data ?? "0x";
  expect(batched.revertData, `${label}: revert data`).to.equal(plainData);
  expect(revertName(proofError(tx, batched)), `${label}: the revert's name`).to.equal(revertName(plain.error));
}

/** The latest block's timestamp, plus an hour: a deadline no trade here reaches. */
async function deadline(provider: JsonRpcApiProvider): Promise<bigint> {
  const block = (await provider.send("eth_getBlockByNumber", ["latest", false])) as { timestamp: string };
  return BigInt(block.timestamp) + 3600n;
}

/** Declares the equivalence cases, on the chain `chain()` gives (called in each case). */
export function callBatcherCases(chain: () => Promise<BatcherChain>): void {
  it("answers reads byte for byte as eth_calls do, in one eth_call", async function () {
    const { provider, addresses, exchange } = await chain();
    const reads = [
      { to: addresses.token, data: erc20.encodeFunctionData("balanceOf", [exchange]) },
      { to: addresses.token, data: erc20.encodeFunctionData("allowance", [exchange, addresses.swap]) },
      { to: addresses.stableCoins.USDC, data: erc20.encodeFunctionData("balanceOf", [addresses.swap]) },
      { to: addresses.stableCoins.USDT, data: erc20.encodeFunctionData("allowance", [exchange, addresses.swap]) },
      { to: addresses.feeds.tokenUsd, data: aggregator.encodeFunctionData("latestRoundData") },
      { to: addresses.feeds.nativeUsd!, data: aggregator.encodeFunctionData("decimals") },
      { to: addresses.swap, data: swap.encodeFunctionData("priceFeed") },
      { to: addresses.token, data: erc20.encodeFunctionData("symbol") },
      // Not a contract: an empty answer, as an eth_call gives.
      { to: exchange, data: erc20.encodeFunctionData("balanceOf", [exchange]) },
    ];
    const expected = await Promise.all(reads.map((read) => plainCall(provider, read)));
    const batcher = new CallBatcher({ provider });
    const recorder = recordCalls(provider);
    try {
      const answers = await Promise.all(reads.map((read) => batcher.read(read.to, read.data)));
      expect(answers).to.deep.equal(expected.map((answer) => (answer.ok ? answer.output : "not ok")));
      expect(recorder.ethCalls()).to.deep.equal({ batched: 1, plain: 0 });
    } finally {
      recorder.restore();
    }
  });

  it("fails a read as its eth_call fails: the node's own error", async function () {
    const { provider, addresses } = await chain();
    // The token has no latestRoundData: it reverts without data.
    const read = { to: addresses.token, data: aggregator.encodeFunctionData("latestRoundData") };
    const plain = await plainCall(provider, read);
    expect(plain.ok).to.equal(false);
    const batcher = new CallBatcher({ provider });
    const failure = await batcher.read(read.to, read.data).then(
      () => expect.fail("the read succeeded"),
      (error: unknown) => error,
    );
    const { error } = plain as { error: { code?: string; data?: string | null } };
    expect((failure as { code?: string }).code)
      .to.equal(error.code)
      .and.equal("CALL_EXCEPTION");
    expect((failure as { data?: string | null }).data).to.equal(error.data);
  });

  it("proves trades as eth_calls with their gas limit do: the output, or the same revert by name", async function () {
    const { provider, addresses, exchange, customer } = await chain();
    const until = await deadline(provider);
    const trade = (kind: "sell" | "buy" | "buyAndRemit", stable: string, amount: bigint) => ({
      from: exchange,
      to: addresses.swap,
      data: swap.encodeFunctionData(kind, [stable, amount, customer, 0n, until]),
    });
    const cases = [
      { label: "sell", tx: trade("sell", addresses.stableCoins.USDC, parseUnits("3", 18)), expected: undefined },
      { label: "buy", tx: trade("buy", addresses.stableCoins.DAI, parseUnits("10", 18)), expected: undefined },
      {
        label: "remittance",
        tx: trade("buyAndRemit", addresses.stableCoins.USDT, parseUnits("2.5", 6)),
        expected: undefined,
      },
      {
        label: "an unsupported stable coin",
        tx: trade("sell", addresses.token, parseUnits("1", 18)),
        expected: "SwapUnsupportedStable",
      },
      {
        label: "more than the wallet may spend",
        tx: trade("sell", addresses.stableCoins.DAI, parseUnits("1000000000", 18)),
        expected: "ERC20InsufficientAllowance",
      },
      { label: "nothing", tx: trade("buy", addresses.stableCoins.USDC, 0n), expected: "SwapZeroAmount" },
    ];
    const limit = tradeGasLimit("sell");
    const plain = await Promise.all(cases.map(({ tx }) => plainCall(provider, tx, limit)));
    const batcher = new CallBatcher({ provider });
    const recorder = recordCalls(provider);
    let batched: ProofOutcome[];
    try {
      batched = await Promise.all(cases.map(({ tx }) => batcher.prove(tx.from, tx.to, tx.data, limit)));
      expect(recorder.ethCalls()).to.deep.equal({ batched: 1, plain: 0 });
    } finally {
      recorder.restore();
    }
    cases.forEach(({ label, tx, expected }, i) => {
      expectSameProof(label, tx, batched[i]!, plain[i]!);
      if (expected === undefined) expect(batched[i]!.ok, label).to.equal(true);
      else expect(revertName(proofError(tx, batched[i]!)), label).to.equal(expected);
    });
  });

  it("names the block a proof ran on: the latest, as eth_blockNumber gives it", async function () {
    const { provider, addresses, exchange, customer } = await chain();
    const until = await deadline(provider);
    const data = swap.encodeFunctionData("sell", [
      addresses.stableCoins.USDC,
      parseUnits("1", 18),
      customer,
      0n,
      until,
    ]);
    const latest = Number(await provider.send("eth_blockNumber", []));
    const outcome = await new CallBatcher({ provider }).prove(exchange, addresses.swap, data, tradeGasLimit("sell"));
    expect(outcome.ok).to.equal(true);
    const block = outcome.ok ? outcome.block : undefined;
    // The latest block, or one mined since eth_blockNumber answered (anvil mines on its own).
    expect(block).to.be.a("number");
    expect(block! - latest).to.be.within(0, 1);
    expect(block).to.be.at.most(Number(await provider.send("eth_blockNumber", [])));
  });

  it("runs each proof on the block's state: none sees another's effects", async function () {
    const { provider, addresses, exchange, customer } = await chain();
    const held = BigInt(
      (await provider.send("eth_call", [
        { to: addresses.token, data: erc20.encodeFunctionData("balanceOf", [exchange]) },
        "latest",
      ])) as string,
    );
    // Each sells three fifths of the wallet's tokens: together they would overdraw it.
    const tx = {
      from: exchange,
      to: addresses.swap,
      data: swap.encodeFunctionData("sell", [
        addresses.stableCoins.DAI,
        (held * 3n) / 5n,
        customer,
        0n,
        await deadline(provider),
      ]),
    };
    const limit = tradeGasLimit("sell");
    const plain = await plainCall(provider, tx, limit);
    expect(plain.ok).to.equal(true);
    const batcher = new CallBatcher({ provider });
    const balance = erc20.encodeFunctionData("balanceOf", [exchange]);
    const [first, second, read] = await Promise.all([
      batcher.prove(tx.from, tx.to, tx.data, limit),
      batcher.prove(tx.from, tx.to, tx.data, limit),
      batcher.read(addresses.token, balance),
    ]);
    expectSameProof("first", tx, first, plain);
    expectSameProof("second", tx, second, plain);
    expect(BigInt(read)).to.equal(held); // the reads see the block, not the proofs
  });

  it("fails a proof that runs out of its gas, and succeeds from the least limit an eth_call succeeds with", async function () {
    const { provider, addresses, exchange, customer } = await chain();
    const tx = {
      from: exchange,
      to: addresses.swap,
      data: swap.encodeFunctionData("sell", [
        addresses.stableCoins.USDC,
        parseUnits("1", 18),
        customer,
        0n,
        await deadline(provider),
      ]),
    };
    // The least gas limit a plain eth_call succeeds with, by bisection.
    let low = 21_000n; // fails
    let high = tradeGasLimit("sell"); // succeeds
    expect((await plainCall(provider, tx, high)).ok).to.equal(true);
    while (high - low > 1n) {
      const mid = (low + high) / 2n;
      if ((await plainCall(provider, tx, mid)).ok) high = mid;
      else low = mid;
    }
    const batcher = new CallBatcher({ provider });
    const recorder = recordCalls(provider);
    try {
      const [least, short, starved, below] = await Promise.all([
        batcher.prove(tx.from, tx.to, tx.data, high),
        batcher.prove(tx.from, tx.to, tx.data, high - 1n),
        batcher.prove(tx.from, tx.to, tx.data, 50_000n),
        batcher.prove(tx.from, tx.to, tx.data, 21_000n), // not even the transaction's own cost
      ]);
      expectSameProof(`at ${high}`, tx, least, await plainCall(provider, tx, high));
      expectSameProof(`at ${high - 1n}`, tx, short, await plainCall(provider, tx, high - 1n));
      expect(least.ok).to.equal(true);
      expect(short.ok).to.equal(false);
      expect(starved.ok).to.equal(false);
      expect(below.ok).to.equal(false);
    } finally {
      recorder.restore();
    }
  });
}
