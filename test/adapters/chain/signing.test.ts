/**
 * Signing (adapters/chain/trade/signing.ts) between a real SendQueue, on a scripted node, and
 * callers that journal what it hands them as the trade use case does: nothing is broadcast before
 * its caller said it is journalled, a caller that gives its trade up takes nothing else of it
 * with it, and a round never waits on a trade nobody will journal.
 */
import { expect } from "chai";
import { Wallet } from "ethers";

import { RpcProvider, toSigner } from "../../../adapters/chain/index.js";
import { SendQueue } from "../../../adapters/chain/send/index.js";
import { Signing } from "../../../adapters/chain/trade/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import type { SignedTradeTx } from "../../../core/index.js";
import { FakeRpcNode } from "../../helpers/fake-rpc.js";

const wallet = new Wallet("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
const SWAP = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const FEES = { maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };

describe("Signing, between the send queue and the journal", function () {
  let node: FakeRpcNode;
  let provider: RpcProvider;
  let journal: MemoryJournal;
  let queue: SendQueue;

  beforeEach(async function () {
    node = await FakeRpcNode.start();
    node.pendingNonce = 7;
    provider = new RpcProvider(node.url, { chainId: 31337n, batchStallMs: 0 });
    journal = new MemoryJournal();
    queue = new SendQueue({
      signer: toSigner(wallet),
      chainId: 31337n,
      provider,
      nonces: journal,
      ledger: journal,
      maxBatch: 50,
    });
  });

  afterEach(async function () {
    provider.destroy();
    await node.close();
  });

  /** A trade handed to the queue through a Signing; its result, and the signing. */
  function trade(i: number) {
    const signing = new Signing({ beforeHandover: (tx) => tx });
    const result = queue.send({
      to: SWAP,
      data: `0x${i.toString(16).padStart(8, "0")}`,
      gasLimit: 150_000n,
      fees: FEES,
      deadline: 1_900_000_000,
      onSigned: signing.onSigned,
    });
    result.catch(() => {});
    return { signing, result };
  }

  /** Journals a handed-over transaction as the use case's markSigned would (its slot, for the queue's look-ups). */
  const journalled = (tx: SignedTradeTx) =>
    journal.recordSlot(
      { wallet: tx.wallet, nonce: tx.nonce, purpose: "trade", deadline: tx.deadline },
      { hash: tx.txHash, rawTx: tx.rawTx, ...FEES, noop: false, sentAt: new Date() },
    );

  it("broadcasts a trade only once its caller journalled that very transaction", async function () {
    const { signing, result } = trade(0);
    const tx = await signing.next();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(node.calls("eth_sendRawTransaction"), "nothing before the journal").to.have.length(0);
    signing.proceed(`0x${"00".repeat(32)}`); // not its transaction: nothing
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(node.calls("eth_sendRawTransaction")).to.have.length(0);
    await journalled(tx);
    signing.proceed(tx.txHash);
    expect((await result).hash).to.equal(tx.txHash);
    expect(node.calls("eth_sendRawTransaction")).to.have.length(1);
  });

  it("refuses at once, sending nothing, every trade of a chunk whose journal writes all failed", async function () {
    const trades = [0, 1, 2].map(trade);
    const started = Date.now();
    for (const { signing } of trades) {
      const tx = await signing.next();
      signing.refuse(tx.txHash, new Error("the journal is unreachable"));
    }
    const outcomes = await Promise.allSettled(trades.map((t) => t.result));
    expect(outcomes.map((o) => o.status)).to.deep.equal(["rejected", "rejected", "rejected"]);
    expect(Date.now() - started, "no round waited on a trade given up").to.be.below(5_000);
    expect(node.calls("eth_sendRawTransaction")).to.have.length(0);
    // The nonces went to nobody: the next trade takes the first.
    const next = trade(3);
    const tx = await next.signing.next();
    expect(tx.nonce).to.equal(7);
  });

  it("signs again, at the next nonces, the trades journalled after one whose write failed, and sends each once journalled again", async function () {
    // W holds the round while A and B queue: they are signed together, in the next chunk.
    const w = trade(9);
    const txW = await w.signing.next();
    const [a, b] = [trade(0), trade(1)];
    await journalled(txW);
    w.signing.proceed(txW.txHash);
    await w.result;
    const txA = await a.signing.next();
    const txB = await b.signing.next();
    expect([txA.nonce, txB.nonce]).to.deep.equal([8, 9]);
    a.signing.refuse(txA.txHash, new Error("write failed"));
    await journalled(txB);
    b.signing.proceed(txB.txHash);
    // B comes back signed at nonce 8, to be journalled again; its first bytes are never sent.
    const again = await b.signing.next();
    expect(again.nonce).to.equal(8);
    await journalled(again);
    b.signing.proceed(again.txHash);
    expect((await b.result).hash).to.equal(again.txHash);
    expect(node.accepted.map((t) => t.hash)).to.deep.equal([txW.txHash, again.txHash]);
    expect(await a.result.catch((error: unknown) => String(error))).to.match(/write failed/);
  });
});
