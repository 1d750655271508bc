/**
 * BlockWatcher (adapters/chain/blocks/block-watcher.ts) and Receipts on it, against scripted providers:
 * confirmations counted from the look that read a receipt, no polling once nobody waits, one ask
 * per block, a failing hash failing alone, and which errors mean "no eth_getBlockReceipts here".
 */
import { expect } from "chai";
import type { JsonRpcApiProvider } from "ethers";

import { BlockWatcher, Receipts, isUnsupported, type RpcReceipt } from "../../../adapters/chain/blocks/index.js";
import type { PushedHead, PushedHeads } from "../../../adapters/chain/rpc/index.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const hex = (n: number) => `0x${n.toString(16)}`;
const hash = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;
/** Block `number`'s hash on fork `fork` (0: the chain the fake starts with). */
const blockHash = (number: number, fork = 0) => hash(0xb000 + number + fork * 0x10000);
const receiptOf = (tx: string, block: number, fork = 0): RpcReceipt =>
  ({
    transactionHash: tx,
    blockNumber: hex(block),
    blockHash: blockHash(block, fork),
    status: "0x1",
    logs: [],
  }) as never;

interface Block {
  number: number;
  hash: string;
  parentHash: string;
  receipts: RpcReceipt[];
}

/**
 * A scripted chain: its head, its blocks (by hash, replaced ones too, as a node keeps side
 * blocks), the canonical hash at each number, and every call made to it.
 */
class FakeChain {
  head = 10;
  readonly calls: string[] = [];
  /** The canonical block's hash by number, as the node's number index has it. */
  readonly canonical = new Map<number, string>();
  readonly byHash = new Map<string, Block>();
  /** The fork new blocks are made on. */
  fork = 0;
  /** A node that takes a block hash given to eth_getBlockReceipts for "latest". */
  hashAsLatest = false;
  /** Before each call (to slow one, move the head meanwhile, or fail it). */
  hook: ((method: string, params: unknown[]) => Promise<void> | void) | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor() {
    for (let number = 0; number <= this.head; number++) this.put(number);
  }

  readonly provider = {
    send: async (method: string, params: unknown[]) => {
      this.calls.push(method);
      await this.hook?.(method, params);
      switch (method) {
        case "eth_blockNumber":
          return hex(this.head);
        case "eth_getBlockByNumber": {
          if (params[0] !== "latest") throw new Error(`not scripted: ${method} ${String(params[0])}`);
          const block = this.byHash.get(this.canonical.get(this.head)!)!;
          return { number: hex(block.number), hash: block.hash, parentHash: block.parentHash, timestamp: "0x1" };
        }
        case "eth_getBlockReceipts": {
          const param = String(params[0]);
          if (param.length === 66 && this.hashAsLatest)
            return this.byHash.get(this.canonical.get(this.head)!)!.receipts;
          if (param.length === 66) return this.byHash.get(param)?.receipts ?? null;
          const number = Number(param);
          return number <= this.head ? (this.byHash.get(this.canonical.get(number)!)?.receipts ?? []) : null;
        }
        case "eth_getTransactionReceipt": {
          for (let number = 0; number <= this.head; number++)
            for (const r of this.byHash.get(this.canonical.get(number)!)?.receipts ?? [])
              if (r.transactionHash === params[0]) return r;
          return null;
        }
        default:
          throw new Error(`not scripted: ${method}`);
      }
    },
  } as unknown as JsonRpcApiProvider;

  /** Makes block `number` on the current fork (canonical from now on), on the canonical one below it. */
  put(number: number, receipts: RpcReceipt[] = []): Block {
    const block: Block = {
      number,
      hash: blockHash(number, this.fork),
      parentHash: this.canonical.get(number - 1) ?? hash(0),
      receipts,
    };
    this.byHash.set(block.hash, block);
    this.canonical.set(number, block.hash);
    return block;
  }

  /** Sets the receipts of the canonical block `number`. */
  fill(number: number, receipts: RpcReceipt[]): void {
    this.byHash.get(this.canonical.get(number)!)!.receipts = receipts;
  }

  /** A reorg: blocks from `number` up are replaced by blocks of fork `fork` (made by put / mine); the head goes back below them. */
  reorg(number: number, fork: number): void {
    this.fork = fork;
    for (let n = number; n <= this.head; n++) this.canonical.delete(n);
    this.head = number - 1;
  }

  count(method: string): number {
    return this.calls.filter((call) => call === method).length;
  }

  mine(receipts: RpcReceipt[] = []): void {
    this.put(this.head + 1, receipts);
    this.head += 1;
  }

  /** A block every `ms`. */
  mineEvery(ms: number): void {
    this.#timer = setInterval(() => this.mine(), ms);
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** The head poll (eth_getBlockByNumber "latest"). */
const HEAD = "eth_getBlockByNumber";

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
    chain.fill(10, [receiptOf(a, 10)]);
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
      if (method === HEAD) throw new Error("the node is down");
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
    // No faster than the interval (12 at most); the lower bound only says it keeps looking, with
    // room for a loaded machine's timer lag, which each look's schedule adds to the next.
    expect(chain.count(HEAD)).to.be.within(5, 12);
    // A block every 400 ms: after a few blocks to learn that, at most two asks per block.
    chain.mineEvery(400);
    await sleep(2_000);
    const [calls, head] = [chain.count(HEAD), chain.head];
    await sleep(4_000);
    const perBlock = (chain.count(HEAD) - calls) / (chain.head - head);
    expect(perBlock).to.be.at.most(2);
    // The fake's setInterval(400) drifts late under load, never early.
    expect(watcher.blockTimeMs()).to.be.within(300, 800);
  });

  it("answers the receipts it found when another transaction's lookup fails, and finds that one once it can", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const [poisoned, fine] = [hash(5), hash(6)];
    let indexing = true;
    chain.hook = (method, params) => {
      if (method === "eth_getTransactionReceipt" && params[0] === poisoned && indexing)
        throw new Error("transaction indexing is in progress");
    };
    chain.fill(10, [receiptOf(poisoned, 10), receiptOf(fine, 10)]);
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

  it("reads a block replaced at the same height at the next look: a transaction moved into it is found then", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const tx = hash(0x1a);
    let look = await watcher.next([tx], 1_000);
    chain.mine(); // 11, without it
    look = await watcher.next([tx], 1_000, look.head);
    expect([look.head, look.receipts.size]).to.deep.equal([11, 0]);
    // 11 replaced by 11', which holds it: the head's number stays 11.
    chain.reorg(11, 1);
    chain.mine([receiptOf(tx, 11, 1)]);
    const started = Date.now();
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.get(tx)?.blockHash).to.equal(blockHash(11, 1));
    expect(look.head).to.equal(11);
    expect(Date.now() - started).to.be.below(500); // at the next look, not at a recheck
    expect(chain.count("eth_getTransactionReceipt")).to.equal(1); // the first look's only
  });

  it("does not hand out a receipt read from a block that a reorg then replaced", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const tx = hash(0x1b);
    let look = await watcher.next([tx], 1_000);
    chain.mine([receiptOf(tx, 11)]);
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.get(tx)?.blockHash).to.equal(blockHash(11));
    // 11 replaced at the same height by 11', without it.
    chain.reorg(11, 1);
    chain.mine();
    look = await watcher.next([tx], 600, look.head);
    expect(look.head).to.equal(11);
    expect(look.receipts.has(tx)).to.equal(false);
    // Mined again, in 12'.
    chain.mine([receiptOf(tx, 12, 1)]);
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.get(tx)?.blockHash).to.equal(blockHash(12, 1));
  });

  it("counts confirmations only over the head's own ancestors when a reorg lands while a look reads two blocks", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const receipts = new Receipts({
      provider: chain.provider,
      confirmations: 2,
      timeoutMs: 10_000,
      journalAfterMs: 5_000,
      watcher,
    });
    const tx = hash(0x1c);
    const handed: string[] = [];
    const next = watcher.next.bind(watcher);
    watcher.next = async (...args) => {
      const look = await next(...args);
      for (const receipt of look.receipts.values()) handed.push(receipt.blockHash);
      return look;
    };
    watcher.expect(tx);
    const waited = receipts.wait(tx, null, async () => ({}));
    await sleep(150); // the first look, at 10
    // 11 (holding it) and 12, then both replaced by 11' and 12' (without it). The head poll sees
    // 12', whose parent is 11'; the node's index by number still has the old 11 for a moment (a
    // node mid-reorg, or another node behind the same balancer).
    chain.mine([receiptOf(tx, 11)]);
    chain.mine();
    const old = chain.canonical.get(11)!;
    chain.reorg(11, 1);
    chain.mine();
    chain.mine();
    chain.canonical.set(11, old);
    chain.hook = (method) => {
      if (method !== HEAD) setTimeout(() => chain.canonical.set(11, blockHash(11, 1)), 20);
    };
    await sleep(200);
    chain.hook = undefined;
    chain.canonical.set(11, blockHash(11, 1));
    // Mined again in 13', confirmed by 14'.
    chain.mine([receiptOf(tx, 13, 1)]);
    await sleep(100);
    chain.mine();
    const outcome = await waited;
    expect(outcome.receipt.blockHash).to.equal(blockHash(13, 1));
    expect(outcome.confirmations).to.equal(2);
    expect(handed).to.not.include(blockHash(11));
  });

  it("asks once for the head and once per block read at each look, a replaced block included", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 30 });
    const tx = hash(0x1d);
    let look = await watcher.next([tx], 1_000);
    const looks: string[][] = [];
    chain.hook = (method) => {
      if (method === HEAD) looks.push([]);
      looks.at(-1)!.push(method);
    };
    const step = async (change: () => void) => {
      change();
      look = await watcher.next([tx], 1_000, look.head);
    };
    await step(() => chain.mine()); // one new block
    await step(() => {
      chain.mine();
      chain.mine();
    }); // two
    await step(() => {
      chain.reorg(chain.head, 1);
      chain.mine();
    }); // the head replaced at the same height
    // The head replaced, and one more on it: blocks below the replaced one may have been replaced
    // too (the look cannot tell), so the missing transaction is also asked for by transaction.
    await step(() => {
      chain.reorg(chain.head, 2);
      chain.mine();
      chain.mine();
    });
    const reading = looks.filter((calls) => calls.length > 1);
    expect(reading).to.deep.equal([
      [HEAD, "eth_getBlockReceipts"],
      [HEAD, "eth_getBlockReceipts", "eth_getBlockReceipts"],
      [HEAD, "eth_getBlockReceipts"],
      [HEAD, "eth_getBlockReceipts", "eth_getBlockReceipts", "eth_getTransactionReceipt"],
    ]);
    expect(chain.count("eth_blockNumber")).to.equal(0);
  });

  it("reads by transaction when the receipts answered for a block hash are another block's", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50 });
    const [tx, other] = [hash(0x1e), hash(0x1f)];
    let look = await watcher.next([tx], 1_000);
    chain.hashAsLatest = true;
    chain.mine([receiptOf(tx, 11)]);
    chain.mine([receiptOf(other, 12)]);
    const before = chain.count("eth_getTransactionReceipt");
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.get(tx)?.blockHash).to.equal(blockHash(11));
    expect(chain.count("eth_getTransactionReceipt") - before).to.equal(1);
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

describe("BlockWatcher.canonical: what the lifecycle monitor need not ask the node", function () {
  let chain: FakeChain;
  let watcher: BlockWatcher;

  beforeEach(function () {
    chain = new FakeChain();
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 20 });
  });

  afterEach(function () {
    chain.stop();
    watcher.stop();
  });

  it("vouches for a block it read while every head since links to it by parent hash", async function () {
    const tx = hash(0x51);
    let look = await watcher.next([tx], 1_000);
    for (let i = 0; i < 3; i++) {
      chain.mine();
      look = await watcher.next([tx], 1_000, look.head);
    }
    expect(look.head).to.equal(13);
    expect(watcher.canonical(11, blockHash(11))).to.equal(true);
    expect(watcher.canonical(13, blockHash(13))).to.equal(true);
    // Another hash at a number it read, a number above its head, or one below what it linked: it cannot tell.
    expect(watcher.canonical(11, blockHash(11, 1))).to.equal(undefined);
    expect(watcher.canonical(14, blockHash(14))).to.equal(undefined);
    expect(watcher.canonical(5, blockHash(5))).to.equal(undefined);
  });

  it("does not vouch across a jump it did not link, nor for a block a reorg replaced", async function () {
    const tx = hash(0x52);
    let look = await watcher.next([tx], 1_000);
    chain.mine();
    look = await watcher.next([tx], 1_000, look.head);
    expect(watcher.canonical(11, blockHash(11))).to.equal(true);
    // Three blocks at once: 12 is never read, so 11 is no longer vouched for (only 13 and 14 are).
    chain.mine();
    chain.mine();
    chain.mine();
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.head).to.equal(14);
    expect(watcher.canonical(11, blockHash(11))).to.equal(undefined);
    expect(watcher.canonical(13, blockHash(13))).to.equal(true);
    // 14 is replaced by another block at the same height.
    chain.reorg(14, 1);
    chain.mine();
    look = await watcher.next([tx], 1_000, look.head - 1);
    expect(watcher.canonical(14, blockHash(14))).to.equal(undefined);
    expect(watcher.canonical(14, blockHash(14, 1))).to.equal(true);
  });

  it("lends its head to Receipts within an interval of the look, so confirmations cost no eth_blockNumber", async function () {
    // An interval of 200 ms, not 20: a pause of the machine between the look and the read must not end it.
    watcher.stop();
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 200 });
    const tx = hash(0x54);
    chain.fill(10, [receiptOf(tx, 10)]);
    const look = await watcher.next([tx], 1_000);
    expect(watcher.recentHead()).to.equal(look.head);
    const receipts = new Receipts({
      provider: chain.provider,
      confirmations: 1,
      timeoutMs: 1_000,
      journalAfterMs: 0,
      watcher,
    });
    expect((await receipts.find([{ hash: tx, noop: false }]))?.confirmations).to.equal(1);
    expect(chain.count("eth_blockNumber")).to.equal(0);
    watcher.release([tx]);
    await sleep(260); // older than the interval: the node is asked
    expect(watcher.recentHead()).to.equal(undefined);
    await receipts.find([{ hash: tx, noop: false }]);
    expect(chain.count("eth_blockNumber")).to.equal(1);
  });

  it("does not vouch for anything once it has stopped looking for a while", async function () {
    const tx = hash(0x53);
    const look = await watcher.next([tx], 1_000);
    expect(watcher.canonical(look.head, blockHash(look.head))).to.equal(true);
    watcher.release([tx]);
    await sleep(100); // more than a block time (the interval, while none was seen) and an interval
    expect(watcher.canonical(look.head, blockHash(look.head))).to.equal(undefined);
  });
});

/** Heads pushed by hand: a WebSocket subscription that the test turns on and off. */
class FakeHeads implements PushedHeads {
  subscribed = false;
  readonly #listeners = new Set<{ onHead: (head: PushedHead) => void; onChange?: (up: boolean) => void }>();

  onHead(onHead: (head: PushedHead) => void, onChange?: (up: boolean) => void): () => void {
    const listener = { onHead, ...(onChange === undefined ? {} : { onChange }) };
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get listening(): number {
    return this.#listeners.size;
  }

  /** The chain's head, pushed as newHeads would. */
  push(chain: FakeChain): void {
    const block = chain.byHash.get(chain.canonical.get(chain.head)!)!;
    const head = {
      number: hex(block.number),
      hash: block.hash,
      parentHash: block.parentHash,
      timestamp: "0x1",
      gasUsed: "0x0",
      gasLimit: "0x1c9c380",
    };
    for (const listener of this.#listeners) listener.onHead(head);
  }

  set(up: boolean): void {
    this.subscribed = up;
    for (const listener of this.#listeners) listener.onChange?.(up);
  }
}

describe("BlockWatcher with pushed heads (eth_subscribe newHeads over a WebSocket)", function () {
  let chain: FakeChain;
  let heads: FakeHeads;
  let watcher: BlockWatcher;

  beforeEach(function () {
    chain = new FakeChain();
    heads = new FakeHeads();
    heads.subscribed = true;
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 50, heads });
  });

  afterEach(function () {
    chain.stop();
    watcher.stop();
  });

  it("looks at each pushed head instead of asking for it: the receipts by the pushed block's hash, no head poll", async function () {
    heads.push(chain); // 10, while nothing is expected: nothing asked
    await sleep(20);
    expect(chain.calls).to.deep.equal([]);
    expect(watcher.lastHead()?.block.number).to.equal(hex(10));
    const tx = hash(0x61);
    const waiting = watcher.next([tx], 2_000);
    await sleep(150);
    chain.mine([receiptOf(tx, 11)]);
    heads.push(chain);
    const look = await waiting;
    expect(look.head).to.equal(11);
    expect(look.receipts.get(tx)?.blockHash).to.equal(blockHash(11));
    expect(chain.calls).to.deep.equal(["eth_getBlockReceipts"]);
    expect(watcher.lastHead()?.block.hash).to.equal(blockHash(11));
    expect(watcher.canonical(11, blockHash(11))).to.equal(true);
  });

  it("asks nothing for heads pushed while nothing is expected, and stops listening once stopped", async function () {
    for (let i = 0; i < 5; i++) {
      chain.mine();
      heads.push(chain);
      await sleep(60);
    }
    expect(chain.calls).to.deep.equal([]);
    expect(watcher.lastHead()?.block.number).to.equal(hex(15));
    watcher.stop();
    expect(heads.listening).to.equal(0);
  });

  it("does not hand out a receipt from a block replaced at the same height by a pushed head (the look a poll makes)", async function () {
    const tx = hash(0x62);
    heads.push(chain);
    let look = await watcher.next([tx], 1_000);
    chain.mine([receiptOf(tx, 11)]);
    heads.push(chain);
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.get(tx)?.blockHash).to.equal(blockHash(11));
    chain.reorg(11, 1);
    chain.mine(); // 11', without it
    heads.push(chain);
    look = await watcher.next([tx], 600, look.head);
    expect(look.head).to.equal(11);
    expect(look.receipts.has(tx)).to.equal(false);
    chain.mine([receiptOf(tx, 12, 1)]);
    heads.push(chain);
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.get(tx)?.blockHash).to.equal(blockHash(12, 1));
    expect(chain.count(HEAD)).to.equal(0);
  });

  it("polls while the subscription is down, and stops polling once it is back", async function () {
    heads.set(false);
    const tx = hash(0x63);
    let look = await watcher.next([tx], 1_000);
    expect(chain.count(HEAD)).to.be.greaterThan(0); // found by polling
    chain.mine([receiptOf(tx, 11)]);
    look = await watcher.next([tx], 1_000, look.head);
    expect(look.receipts.has(tx)).to.equal(true);
    heads.set(true);
    await sleep(120); // a look already due may still poll
    const polls = chain.count(HEAD);
    await sleep(400);
    expect(chain.count(HEAD)).to.equal(polls);
    // Down again: polled within an interval or so.
    heads.set(false);
    await sleep(150);
    expect(chain.count(HEAD)).to.be.greaterThan(polls);
  });
});

describe("BlockWatcher and Receipts with heads that are not the receipts' node's", function () {
  let chain: FakeChain;
  let heads: FakeHeads;
  let watcher: BlockWatcher | undefined;

  beforeEach(function () {
    chain = new FakeChain();
    heads = new FakeHeads();
    heads.subscribed = true;
  });

  afterEach(function () {
    chain.stop();
    watcher?.stop();
  });

  it("counts a receipt's confirmations from its own node's head unless the watcher vouches for its block", async function () {
    // The watcher's heads come from a fork (11' and 12' on fork 1); the receipt is in block 11 of
    // the chain the calls go to, whose head is 11: one confirmation, not two.
    const tx = hash(0x71);
    chain.mine([receiptOf(tx, 11)]);
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 1_000, heads });
    const fork = new FakeChain();
    fork.fork = 1;
    fork.reorg(11, 1);
    fork.mine();
    fork.mine();
    heads.push(fork); // 12' on fork 1
    await sleep(20);
    expect(watcher.recentHead()).to.equal(12);
    const receipts = new Receipts({
      provider: chain.provider,
      confirmations: 2,
      timeoutMs: 1_000,
      journalAfterMs: 0,
      watcher,
    });
    expect((await receipts.find([{ hash: tx, noop: false }]))?.confirmations).to.equal(1);
    expect(chain.count("eth_blockNumber")).to.equal(1);
    fork.stop();
  });

  it("polls at block time again when a safety poll finds a block the subscription did not push", async function () {
    watcher = new BlockWatcher({ provider: chain.provider, intervalMs: 30, heads, safetyPollMs: 150 });
    heads.push(chain); // 10
    const tx = hash(0x72);
    let look = await watcher.next([tx], 2_000);
    // The node keeps the connection and stops pushing; blocks go on.
    chain.mineEvery(40);
    look = await watcher.next([tx], 2_000, look.head); // found by the safety poll
    const polledAt = chain.count(HEAD);
    expect(polledAt).to.be.at.least(1);
    chain.fill(look.head, []);
    // From now on it polls at block time, not once per safetyPollMs.
    const started = Date.now();
    let looks = 0;
    while (Date.now() - started < 400) {
      look = await watcher.next([tx], 2_000, look.head);
      looks += 1;
    }
    expect(looks).to.be.at.least(4);
    // A pushed header that catches up puts it back on the subscription.
    chain.stop();
    const before = chain.count(HEAD);
    chain.mine();
    heads.push(chain);
    look = await watcher.next([tx], 2_000, look.head);
    await sleep(100);
    expect(chain.count(HEAD) - before).to.be.at.most(1);
  });
});
