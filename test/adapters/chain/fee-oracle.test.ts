/**
 * FeeOracle (adapters/chain/blocks/fees.ts): the next base fee from the latest header, as the node
 * itself computes it (eth_feeHistory's last entry), on Hardhat's EDR and on anvil, for blocks
 * over, at and under their gas target; and the calls it makes: none of its own for the head
 * while the block watcher's head is young, and the priority fee once per `tipCacheMs`.
 */
import { expect } from "chai";
import type { JsonRpcApiProvider } from "ethers";
import { network } from "hardhat";

import { FeeOracle, nextBaseFee, tradeFees } from "../../../adapters/chain/blocks/index.js";
import { ChainUnavailableError } from "../../../core/index.js";
import type { HeadBlock } from "../../../adapters/chain/rpc/index.js";
import { startAnvil } from "../../helpers/anvil.js";

const GWEI = 10n ** 9n;

describe("nextBaseFee", function () {
  it("follows EIP-1559: +1/8 for a full block, unchanged at the target, -1/8 for an empty one, +1 wei at least above it", function () {
    const base = 8n * GWEI;
    expect(nextBaseFee({ baseFee: base, gasUsed: 30_000_000n, gasLimit: 30_000_000n })).to.equal(9n * GWEI);
    expect(nextBaseFee({ baseFee: base, gasUsed: 15_000_000n, gasLimit: 30_000_000n })).to.equal(base);
    expect(nextBaseFee({ baseFee: base, gasUsed: 0n, gasLimit: 30_000_000n })).to.equal(7n * GWEI);
    expect(nextBaseFee({ baseFee: 7n, gasUsed: 15_000_001n, gasLimit: 30_000_000n })).to.equal(8n);
    expect(nextBaseFee({ baseFee: 7n, gasUsed: 0n, gasLimit: 0n })).to.equal(7n);
  });

  type Rpc = (method: string, params?: unknown[]) => Promise<unknown>;
  const NODES: Array<[string, () => Promise<{ rpc: Rpc; close(): Promise<void> }>]> = [
    [
      "Hardhat's EDR",
      async () => {
        const connection = await network.create();
        return {
          rpc: (method, params = []) => connection.provider.request({ method, params }),
          close: () => connection.close(),
        };
      },
    ],
    [
      "anvil",
      async () => {
        const anvil = await startAnvil();
        await anvil.rpc("evm_setAutomine", [true]); // a block per transaction, as on EDR
        return { rpc: (method, params = []) => anvil.rpc(method, params), close: () => anvil.stop() };
      },
    ],
  ];

  for (const [name, start] of NODES) {
    it(`is the next base fee ${name} itself reports, for blocks over, at and under their gas target`, async function () {
      this.timeout(60_000);
      const node = await start();
      try {
        const [from] = (await node.rpc("eth_accounts")) as string[];
        // A 21,000-gas transfer per block: over the target of a 30,000 limit, at that of 42,000, under that of 1,000,000.
        await node.rpc("evm_mine"); // past the genesis block, whose next base fee nodes special-case
        for (const limit of [30_000, 30_000, 42_000, 1_000_000, 30_000, 0]) {
          let block = "latest";
          if (limit === 0) await node.rpc("evm_mine");
          else {
            await node.rpc("evm_setBlockGasLimit", [`0x${limit.toString(16)}`]);
            const hash = await node.rpc("eth_sendTransaction", [{ from, to: from, value: "0x0", gas: "0x5208" }]);
            // The block that mined it (a node may mine it a moment after answering).
            for (let receipt = null as { blockNumber: string } | null; receipt === null; ) {
              receipt = (await node.rpc("eth_getTransactionReceipt", [hash])) as { blockNumber: string } | null;
              if (receipt === null) await new Promise((resolve) => setTimeout(resolve, 20));
              else block = receipt.blockNumber;
            }
          }
          const head = (await node.rpc("eth_getBlockByNumber", [block, false])) as HeadBlock;
          // Asked for that very block: a block mined meanwhile must not be compared with it.
          const history = (await node.rpc("eth_feeHistory", ["0x1", head.number, []])) as { baseFeePerGas: string[] };
          const expected = BigInt(history.baseFeePerGas.at(-1)!);
          const got = nextBaseFee({
            baseFee: BigInt(head.baseFeePerGas!),
            gasUsed: BigInt(head.gasUsed),
            gasLimit: BigInt(head.gasLimit),
          });
          expect(
            got,
            `block ${Number(head.number)}, gas used ${Number(head.gasUsed)} of ${Number(head.gasLimit)}`,
          ).to.equal(expected);
        }
      } finally {
        await node.close();
      }
    });
  }
});

describe("FeeOracle", function () {
  const block = (number: number): HeadBlock => ({
    number: `0x${number.toString(16)}`,
    hash: `0x${number.toString(16).padStart(64, "0")}`,
    timestamp: "0x64",
    baseFeePerGas: `0x${(8n * GWEI).toString(16)}`,
    gasUsed: "0x0",
    gasLimit: "0x1c9c380",
  });
  /**
   * A node whose head reads ("latest") answer `heads` in turn, then block 7; a block asked for by
   * number is answered up to its latest head (7), and is null above it (`byNumber` lists those asked).
   */
  function fakeNode(heads: number[] = []) {
    const calls: string[] = [];
    const byNumber: number[] = [];
    const provider = {
      send: async (method: string, params: unknown[] = []) => {
        calls.push(method);
        if (method === "eth_getBlockByNumber" && params[0] !== "latest") {
          const number = Number(params[0]);
          byNumber.push(number);
          return number <= 7 ? block(number) : null;
        }
        if (method === "eth_getBlockByNumber") return block(heads.shift() ?? 7);
        if (method === "eth_maxPriorityFeePerGas") return "0x3b9aca00";
        throw new Error(`not scripted: ${method}`);
      },
    } as unknown as JsonRpcApiProvider;
    return { calls, byNumber, provider };
  }

  it("reads no head of its own while the block watcher's is young, and the priority fee once per tipCacheMs", async function () {
    const { calls, provider } = fakeNode();
    let watched = { block: block(9), at: Date.now() };
    const oracle = new FeeOracle(provider, { heads: { lastHead: () => watched }, cacheMs: 1_000, tipCacheMs: 200 });
    for (let i = 0; i < 5; i++) {
      const state = await oracle.read();
      expect(state.head.number).to.equal(9);
      // The empty block 9's own base fee: EIP-1559's rule would predict 1/8 less, which a chain
      // with other parameters does not make, so the fall is never counted on.
      expect(state.baseFee).to.equal(8n * GWEI);
      expect(state.priorityFee).to.equal(GWEI);
    }
    expect(calls).to.deep.equal(["eth_maxPriorityFeePerGas"]);
    // The watcher's head grew old: one read of its own, shared; the tip is old too.
    watched = { block: block(9), at: Date.now() - 5_000 };
    await new Promise((resolve) => setTimeout(resolve, 250));
    const states = await Promise.all([oracle.read(), oracle.read(), oracle.read()]);
    expect(states.map((s) => s.head.number)).to.deep.equal([7, 7, 7]);
    expect(calls).to.deep.equal(["eth_maxPriorityFeePerGas", "eth_getBlockByNumber", "eth_maxPriorityFeePerGas"]);
    // `fresh` always reads the head.
    await oracle.read(true);
    expect(calls.filter((c) => c === "eth_getBlockByNumber")).to.have.length(2);
  });

  it("reads from a head no older than a given block: the reused one when it is, else that block's own header, once for every trade proven on it", async function () {
    const { calls, byNumber, provider } = fakeNode(); // its head: block 7
    const watched = { block: block(5), at: Date.now() };
    const oracle = new FeeOracle(provider, { heads: { lastHead: () => watched }, cacheMs: 1_000 });
    // The watcher's block 5 is new enough for a proof that ran on block 5: nothing is read.
    expect((await oracle.readFrom(5)).head.number).to.equal(5);
    expect(calls.filter((c) => c === "eth_getBlockByNumber")).to.have.length(0);
    // Three trades whose proofs ran on block 6 at once: block 6 read once, by number, for all three.
    const states = await Promise.all([oracle.readFrom(6), oracle.readFrom(6), oracle.readFrom(6)]);
    expect(states.map((state) => state.head.number)).to.deep.equal([6, 6, 6]);
    expect(byNumber).to.deep.equal([6]);
    // Another trade proven on block 6 later: no call.
    expect((await oracle.readFrom(6)).head.number).to.equal(6);
    expect(calls.filter((c) => c === "eth_getBlockByNumber")).to.have.length(1);
  });

  it("checks a trade proven on a spiked block against that block's fees, though a head read on its way answers the block before", async function () {
    // Block 10 at 1 gwei, block 11 at 500 gwei. The head read ("latest") started before block 11
    // existed answers block 10, late; the trades proven on block 11 get block 11's fees.
    const header = (number: number, baseFee: bigint) => ({
      ...block(number),
      baseFeePerGas: `0x${baseFee.toString(16)}`,
    });
    const provider = {
      send: async (method: string, params: unknown[] = []) => {
        if (method === "eth_maxPriorityFeePerGas") return "0x3b9aca00";
        if (method !== "eth_getBlockByNumber") throw new Error(`not scripted: ${method}`);
        if (params[0] === "latest") {
          await new Promise((resolve) => setTimeout(resolve, 100));
          return header(10, GWEI);
        }
        return Number(params[0]) === 11 ? header(11, 500n * GWEI) : header(Number(params[0]), GWEI);
      },
    } as unknown as JsonRpcApiProvider;
    const oracle = new FeeOracle(provider, {
      heads: { lastHead: () => ({ block: header(10, GWEI), at: Date.now() }) },
    });
    const early = oracle.read(true); // the head read on its way
    const states = await Promise.all([oracle.readFrom(11), oracle.readFrom(11), oracle.readFrom(11)]);
    await early;
    for (const state of states) {
      expect(state.head.number).to.equal(11);
      expect(() => tradeFees(state, 100n * GWEI)).to.throw(/above this service's cap of 100 gwei/);
    }
  });

  it("refuses a trade proven on a block the node does not have, after asking again, rather than check an older block's fees", async function () {
    const { byNumber, provider } = fakeNode(); // its head: block 7, behind the watcher's
    const watched = { block: block(8), at: Date.now() };
    const oracle = new FeeOracle(provider, { heads: { lastHead: () => watched }, cacheMs: 1_000 });
    // A proof on block 9, which this node (a lagging backend) does not have.
    let refusal: unknown;
    await oracle.readFrom(9).catch((error: unknown) => (refusal = error));
    expect(refusal).to.be.instanceOf(ChainUnavailableError);
    expect(String(refusal)).to.match(/no block 9, which the trade was proven on.*nothing was sent/);
    expect(byNumber, "asked twice, a moment apart").to.deep.equal([9, 9]);
    // Not kept: the next trade proven on block 9 asks again.
    await oracle.readFrom(9).catch(() => {});
    expect(byNumber).to.deep.equal([9, 9, 9, 9]);
  });

  it("refuses a trade while the latest base fee is above the cap, though Ethereum's rule predicts a fall the chain does not make (OP stack)", async function () {
    // OP stack after Canyon: target = limit / 6, change denominator 250: an empty block lowers the
    // base fee by 0.4 % (to 0.996 gwei), where Ethereum's parameters say 12.5 % (0.875 gwei).
    const base = GWEI;
    const provider = {
      send: async (method: string) => {
        if (method === "eth_getBlockByNumber") return { ...block(100), baseFeePerGas: `0x${base.toString(16)}` };
        if (method === "eth_maxPriorityFeePerGas") return "0xf4240";
        throw new Error(`not scripted: ${method}`);
      },
    } as unknown as JsonRpcApiProvider;
    const cap = (99n * GWEI) / 100n; // below the node's next base fee
    const state = await new FeeOracle(provider).read();
    expect(state.baseFee >= 996_000_000n, `base fee checked: ${state.baseFee}`).to.equal(true);
    expect(() => tradeFees(state, cap)).to.throw(/above this service's cap/);
  });

  it("does not take the watcher's head when it carries no base fee: reads its own", async function () {
    const { calls, provider } = fakeNode();
    const { baseFeePerGas: _, ...withoutFee } = block(9);
    const oracle = new FeeOracle(provider, { heads: { lastHead: () => ({ block: withoutFee, at: Date.now() }) } });
    expect((await oracle.read()).head.number).to.equal(7);
    expect(calls).to.include("eth_getBlockByNumber");
  });

  it("refuses a chain without EIP-1559 base fees", async function () {
    const provider = {
      send: async (method: string) =>
        method === "eth_getBlockByNumber" ? { ...block(1), baseFeePerGas: undefined } : "0x1",
    } as unknown as JsonRpcApiProvider;
    const error = await new FeeOracle(provider).read().catch((e: unknown) => e);
    expect(String(error)).to.match(/no EIP-1559 base fee/);
  });
});
