/**
 * BlockWatcher (adapters/chain/block-watcher.ts) and Receipts on it, against scripted providers:
 * confirmations counted from the look that read a receipt, no polling once nobody waits, one ask
 * per block, a failing hash failing alone, and which errors mean "no eth_getBlockReceipts here".
 */
import { expect } from "chai";
import type { JsonRpcApiProvider } from "ethers";

import { BlockWatcher, isUnsupported } from "../../../adapters/chain/block-watcher.js";
import { Receipts } from "../../../adapters/chain/receipts.js";
import type { RpcReceipt } from "../../../adapters/chain/web3-receipt.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const hex = (n: number) => `0x${n.toString(16)}`;
const hash = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;
const receiptOf = (tx: string, block: number): RpcReceipt =>
  ({ transactionHash: tx, blockNumber: hex(block), blockHash: hash(0xb000 + block), status: "0x1", logs: [] }) as never;

/** A scripted chain: its head, its blocks' receipts, and every call made to it. */
class FakeChain {
  head = 10;
  readonly calls: string[] = [];
  readonly blocks = new Map<number, RpcReceipt[]>();
  /** Before each call (to slow one, move the head meanwhile, or fail it). */
  hook: ((method: string, params: unknown[]) => Promise<void> | void) | undefined;
  #timer: NodeJS.Timeout | undefined;

  readonly provider = {
    send: async (method: string, params: unknown[]) => {
      this.calls.push(method);
      await this.hook?.(method, params);
      switch (method) {
        case "eth_blockNumber":
          return hex(this.head);
        case "eth_getBlockReceipts": {
          const number = Number(params[0]);
          return number <= this.head ? (this.blocks.get(number) ?? []) : null;
        }
        case "eth_getTransactionReceipt": {
          for (const [number, receipts] of this.blocks)
            if (number <= this.head) for (const r of receipts) if (r.transactionHash === params[0]) return r;
          return null;
        }
        default:
          throw new Error(`not scripted: ${method}`);
      }
    },
  } as unknown as JsonRpcApiProvider;

  count(method: string): number {
    return this.calls.filter((call) => call === method).length;
  }

  mine(receipts: RpcReceipt[] = []): void {
    this.head += 1;
    this.blocks.set(this.head, receipts);
  }

  /** A block every `ms`. */
  mineEvery(ms: number): void {
    this.#timer = setInterval(() => this.mine(), ms);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

describe("BlockWatcher", function () {
  let chain: FakeChain;
  let watcher: BlockWatcher;

  beforeEach(function () {
    chain = new FakeChain();
  });

  afterEach(function () {
    chain.stop();
    watcher?.stop();
  });

  it("counts confirmations from the look that read the receipt, not from a head seen while a stale one was fetched again", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const [a, b] = [hash(0xa), hash(0xb)];
    chain.blocks.set(10, [receiptOf(a, 10)]);
    let look = await watcher.next([a], 2_000);
    expect(look.head).to.equal(10);
    // B (a replacement) in block 11; A, read at look 10, is fetched again: slowly, while block 12 comes.
    chain.mine([receiptOf(b, 11)]);
    let slow = true;
    chain.hook = async (method) => {
      if (method === "eth_getTransactionReceipt" && slow) {
        slow = false;
        chain.mine();
        await sleep(300);
      }
    };
    look = await watcher.next([a, b], 2_000, look.head);
    expect(look.receipts.has(b)).to.equal(true);
    // B was read at the look of head 11: one confirmation, whatever a later look saw.
    expect(look.head).to.equal(11);
  });

  it("stops asking once a trade answered with its send's receipt is done", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const receipts = new Receipts({
      provider: chain.provider,
      confirmations: 1,
      timeoutMs: 10_000,
      journalAfterMs: 5_000,
      watcher,
    });
    const tx = hash(1);
    watcher.expect(tx); // as the send queue does before the broadcast
    const outcome = await receipts.wait(tx, receiptOf(tx, 10), async () => ({}));
    expect(outcome.confirmations).to.equal(1);
    await sleep(100);
    const before = chain.calls.length;
    await sleep(400);
    expect(chain.calls.length - before).to.equal(0);
    expect(watcher.expected).to.equal(0);
  });

  it("stops asking once a trade waited for on the looks is done", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const receipts = new Receipts({
      provider: chain.provider,
      confirmations: 2,
      timeoutMs: 10_000,
      journalAfterMs: 5_000,
      watcher,
    });
    const tx = hash(2);
    watcher.expect(tx);
    const waited = receipts.wait(tx, null, async () => ({}));
    await sleep(60);
    chain.mine([receiptOf(tx, 11)]);
    await sleep(60);
    chain.mine();
    expect((await waited).confirmations).to.equal(2);
    await sleep(100);
    const before = chain.calls.length;
    await sleep(400);
    expect(chain.calls.length - before).to.equal(0);
  });

  it("forgets a waiter that gave up: it keeps the watcher asking no longer", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    chain.hook = (method) => {
      if (method === "eth_blockNumber") throw new Error("the node is down");
    };
    const tx = hash(3);
    const look = await watcher.next([tx], 120);
    expect(look.receipts.size).to.equal(0);
    watcher.release([tx]);
    await sleep(100);
    const before = chain.calls.length;
    await sleep(400);
    expect(chain.calls.length - before).to.equal(0);
  });

  it("asks for the head at most once per interval, and about once per block once it knows the block time", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 100 });
    // A head that does not move: once per interval, no faster.
    watcher.expect(hash(4));
    await sleep(1_050);
    expect(chain.count("eth_blockNumber")).to.be.within(9, 12);
    // A block every 400 ms: after a few blocks to learn that, at most two asks per block.
    chain.mineEvery(400);
    await sleep(2_000);
    const [calls, head] = [chain.count("eth_blockNumber"), chain.head];
    await sleep(4_000);
    const perBlock = (chain.count("eth_blockNumber") - calls) / (chain.head - head);
    expect(perBlock).to.be.at.most(2);
    expect(watcher.blockTimeMs()).to.be.within(300, 500);
  });

  it("answers the receipts it found when another transaction's lookup fails, and finds that one once it can", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const [poisoned, fine] = [hash(5), hash(6)];
    let indexing = true;
    chain.hook = (method, params) => {
      if (method === "eth_getTransactionReceipt" && params[0] === poisoned && indexing)
        throw new Error("transaction indexing is in progress");
    };
    chain.blocks.set(10, [receiptOf(poisoned, 10), receiptOf(fine, 10)]);
    watcher.expect(poisoned);
    const look = await watcher.next([fine], 1_000);
    expect(look.head).to.equal(10);
    expect(look.receipts.has(fine)).to.equal(true);
    // Block 10 was read by transaction: the failed one is asked for again, not only looked for in new blocks.
    indexing = false;
    chain.mine();
    const again = await watcher.next([poisoned], 1_000, look.head);
    expect(again.receipts.get(poisoned)?.blockNumber).to.equal(hex(10));
  });

  for (const [message, code] of [
    ["the method eth_getBlockReceipts does not exist/is not available", -32601],
    ["Method not found", -32601],
    ["method not allowed", -32000],
    ["eth_getBlockReceipts is not whitelisted", -32000],
  ] as const) {
    it(`takes "${message}" for a node without eth_getBlockReceipts`, async function () {
      expect(
        isUnsupported(Object.assign(new Error("could not coalesce error"), { error: { code, message } })),
      ).to.equal(true);
    });
  }

  it("takes a block the node cannot serve for a block to read by transaction, not for a missing method", async function () {
    for (const message of ["header not found", "block not found", "unknown block"])
      expect(
        isUnsupported(Object.assign(new Error("could not coalesce error"), { error: { code: -32000, message } })),
      ).to.equal(false);
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 20 });
    const tx = hash(7);
    chain.hook = (method) => {
      if (method === "eth_getBlockReceipts")
        throw Object.assign(new Error("could not coalesce error"), {
          error: { code: -32000, message: "header not found" },
        });
    };
    watcher.expect(hash(0x77)); // never mined: looked for at every block
    let look = await watcher.next([tx], 1_000);
    chain.mine([receiptOf(tx, 11)]);
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.has(tx)).to.equal(true); // read by transaction
    for (let i = 0; i < 3; i++) {
      chain.mine();
      look = await watcher.next([tx], 1_000, look.head);
    }
    expect(chain.count("eth_getBlockReceipts")).to.equal(4); // asked at every new block still
  });

  it("stops asking a node without eth_getBlockReceipts for it, asks again after a hundred blocks, and marks a node found without it after a failover", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 5 });
    let supported = true;
    chain.hook = (method) => {
      if (method === "eth_getBlockReceipts" && !supported)
        throw Object.assign(new Error("could not coalesce error"), {
          error: { code: -32000, message: "method not allowed" },
        });
    };
    const tx = hash(8);
    let look = await watcher.next([tx], 1_000);
    chain.mine();
    look = await watcher.next([tx], 1_000, look.head);
    expect(chain.count("eth_getBlockReceipts")).to.equal(1); // supported
    supported = false; // a failover to a node without it
    for (let i = 0; i < 50; i++) {
      chain.mine();
      look = await watcher.next([tx], 1_000, look.head);
    }
    expect(chain.count("eth_getBlockReceipts")).to.equal(2);
    for (let i = 0; i < 60; i++) {
      chain.mine();
      look = await watcher.next([tx], 1_000, look.head);
    }
    expect(chain.count("eth_getBlockReceipts")).to.equal(3); // asked again after 100 blocks
  });
});
