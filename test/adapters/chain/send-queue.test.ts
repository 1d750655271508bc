/**
 * SendQueue (adapters/chain/send/send-queue.ts) against a scripted JSON-RPC node: group commit,
 * ordered batches, no nonce gaps whatever fails, and the gap filler.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { expect } from "chai";
import { Wallet, keccak256 } from "ethers";

import { RpcProvider, toSigner, type TransactionSigner } from "../../../adapters/chain/index.js";
import { SendQueue, type Outgoing } from "../../../adapters/chain/send/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";
import {
  InsufficientFundsError,
  TransactionRefusedError,
  type NoncesConsumed,
  type SignedTradeTx,
} from "../../../core/index.js";
import { FakeRpcNode } from "../../helpers/fake-rpc.js";
import { remoteSigner, withHighS } from "../../helpers/remote-signer.js";

const wallet = new Wallet("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
const SWAP = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const FEES = { maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };

describe("SendQueue", function () {
  let node: FakeRpcNode;
  let provider: RpcProvider;
  let nonces: MemoryJournal;
  let queue: SendQueue;

  /** Records the slot in the ledger, as the trade adapter does for a transaction without a trade record. */
  const record = (tx: SignedTradeTx) =>
    nonces.recordSlot(
      { wallet: tx.wallet, nonce: tx.nonce, purpose: "trade", deadline: tx.deadline },
      {
        hash: tx.txHash,
        rawTx: tx.rawTx,
        maxFeePerGas: tx.maxFeePerGas,
        maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
        noop: false,
        sentAt: new Date(),
      },
    );
  const trade = (i: number, onSigned?: (tx: SignedTradeTx) => Promise<void>): Outgoing => ({
    to: SWAP,
    data: `0x${i.toString(16).padStart(8, "0")}`,
    gasLimit: 150_000n,
    fees: FEES,
    deadline: 1_900_000_000,
    onSigned: async (tx) => {
      await onSigned?.(tx);
      await record(tx);
    },
  });
  const nextStored = () =>
    nonces.withNonce(
      wallet.address,
      async () => -1,
      async (nonce) => nonce,
      () => null,
    );

  /**
   * Four trades: trade 0 goes out alone (the queue is idle), trades 1-3 arrive meanwhile and form
   * one chunk, whose journal hooks (`hook`, before each trade's slot is recorded) run once all four
   * have started; trade 1's write fails at nonce 8. Answers how each send settled.
   */
  async function chunkWithFailedWrite(
    hook: (i: number, tx: SignedTradeTx) => Promise<void> = async () => {},
  ): Promise<PromiseSettledResult<Awaited<ReturnType<SendQueue["send"]>>>[]> {
    const started: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const results = Promise.allSettled(
      Array.from({ length: 4 }, (_, i) =>
        queue.send(
          trade(i, async (tx) => {
            started.push(i);
            if (i > 0) await gate;
            await hook(i, tx);
            if (i === 1 && tx.nonce === 8) throw new Error("journal unavailable");
          }),
        ),
      ),
    );
    for (let waited = 0; waited < 2000 && started.length < 4; waited += 5)
      await new Promise((resolve) => setTimeout(resolve, 5));
    release();
    return results;
  }

  /** A queue over the shared ledger, on `through` (default: the one endpoint), signing with `signer`. */
  const queueOn = (through: RpcProvider = provider, signer: TransactionSigner = toSigner(wallet)) =>
    new SendQueue({
      signer,
      chainId: 31337n,
      provider: through,
      nonces,
      ledger: nonces,
      maxBatch: 50,
    });

  /** The nonce reads the queue made (pending counts), not the lookups' mined counts. */
  const pendingCounts = () =>
    node.calls("eth_getTransactionCount").filter((call) => call.params[1] === "pending").length;

  beforeEach(async function () {
    node = await FakeRpcNode.start();
    node.pendingNonce = 7;
    provider = new RpcProvider(node.url, { chainId: 31337n, batchStallMs: 0 });
    nonces = new MemoryJournal();
    queue = queueOn();
  });

  afterEach(async function () {
    provider.destroy();
    await node.close();
  });

  it("signs a burst with consecutive nonces from the chain's count and sends it in a few ordered batches", async function () {
    const journalled: SignedTradeTx[] = [];
    const hashes = (
      await Promise.all(
        Array.from({ length: 30 }, (_, i) => queue.send(trade(i, async (tx) => void journalled.push(tx)))),
      )
    ).map((sent) => sent.hash);

    expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal(Array.from({ length: 30 }, (_, i) => 7 + i));
    expect(node.accepted.map((tx) => tx.data)).to.deep.equal(Array.from({ length: 30 }, (_, i) => trade(i).data));
    expect(hashes).to.deep.equal(node.accepted.map((tx) => tx.hash));
    // Journalled before sending, with the hash of exactly what was sent.
    expect(journalled.map((tx) => tx.txHash)).to.deep.equal(hashes);
    expect(journalled.every((tx) => keccak256(tx.rawTx) === tx.txHash && tx.wallet === wallet.address)).to.equal(true);
    expect(
      journalled.every(
        (tx) =>
          tx.maxFeePerGas === FEES.maxFeePerGas &&
          tx.maxPriorityFeePerGas === FEES.maxPriorityFeePerGas &&
          tx.deadline === 1_900_000_000,
      ),
    ).to.equal(true);
    // Each is a slot in the ledger, with the bytes that went out.
    const slots = await nonces.openSlots(wallet.address);
    expect(slots.map((slot) => [slot.nonce, slot.broadcasts[0]!.hash])).to.deep.equal(
      node.accepted.map((tx) => [tx.nonce, tx.hash]),
    );
    // One lone send, then the rest in batches: far fewer requests than transactions.
    const sendRequests = node.requests.filter((calls) => calls.some((c) => c.method === "eth_sendRawTransaction"));
    expect(sendRequests.length).to.be.lessThan(10);
    expect(node.calls("eth_getTransactionCount")).to.have.length(1);
    expect(await nextStored()).to.equal(37);
  });

  it("sends nothing for a trade whose journal write fails, and leaves no gap for the others", async function () {
    const failure = new Error("journal unavailable");
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) =>
        queue.send(
          trade(i, async () => {
            if (i === 2) throw failure;
          }),
        ),
      ),
    );
    expect(results.map((r) => r.status)).to.deep.equal([
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
    ]);
    expect((results[2] as PromiseRejectedResult).reason).to.equal(failure);
    expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([7, 8, 9, 10]);
    expect(node.accepted.map((tx) => tx.data)).to.deep.equal([0, 1, 3, 4].map((i) => trade(i).data));
    // The ledger holds exactly what went out: those signed again left no slot at their first nonce.
    const slots = await nonces.openSlots(wallet.address);
    expect(slots.map((slot) => [slot.nonce, slot.broadcasts.map((b) => b.hash)])).to.deep.equal(
      node.accepted.map((tx) => [tx.nonce, [tx.hash]]),
    );
  });

  it("journals a chunk's trades together, and rewrites the records of those signed again after a failed write", async function () {
    const failure = new Error("journal unavailable");
    const started: number[] = [];
    const lastWritten = new Map<number, SignedTradeTx>();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const results = Promise.allSettled(
      Array.from({ length: 4 }, (_, i) =>
        queue.send(
          trade(i, async (tx) => {
            started.push(i);
            if (i > 0) await gate; // opened once every write of the chunk has started
            if (i === 1 && tx.nonce === 8) throw failure;
            lastWritten.set(i, tx);
          }),
        ),
      ),
    );
    // Trade 0 goes out alone (the queue was idle); trades 1-3 arrive meanwhile and form one chunk.
    for (let waited = 0; waited < 2000 && started.length < 4; waited += 5)
      await new Promise((resolve) => setTimeout(resolve, 5));
    expect(started).to.deep.equal([0, 1, 2, 3]);
    release();
    const settled = await results;
    expect(settled.map((r) => r.status)).to.deep.equal(["fulfilled", "rejected", "fulfilled", "fulfilled"]);
    // Trades 2 and 3 were first signed with nonces 9 and 10, then again with 8 and 9: the
    // journal holds what was sent.
    expect(node.accepted.map((tx) => [tx.nonce, tx.data])).to.deep.equal([
      [7, trade(0).data],
      [8, trade(2).data],
      [9, trade(3).data],
    ]);
    for (const [i, sent] of [
      [2, 1],
      [3, 2],
    ] as const) {
      expect(lastWritten.get(i)!.txHash).to.equal(node.accepted[sent]!.hash);
      expect(lastWritten.get(i)!.nonce).to.equal(node.accepted[sent]!.nonce);
    }
    expect(started).to.deep.equal([0, 1, 2, 3, 2, 3]);
  });

  it("never signs a trade again at another nonce when its slot holds another instance's replacement: it keeps its nonce, and the gap below is filled", async function () {
    node.onSend = () => ({ accept: true }); // a mempool: holds a nonce above a gap
    let written2!: () => void;
    const wrote2 = new Promise<void>((resolve) => (written2 = resolve));
    let replacement: { hash: string; data: string } | undefined;
    // Trade 2's record is written (after `trade`'s own hook) once its hook returns: let it, then fail 1.
    const recorded2 = setInterval(() => {
      void nonces.slot(wallet.address, 9).then((slot) => slot !== undefined && written2());
    }, 5);
    const settled = await chunkWithFailedWrite(async (i, tx) => {
      if (i !== 1 || tx.nonce !== 8) return;
      // Trade 1's write fails slowly; meanwhile another instance speeds trade 2 up at 9:
      // recorded in place of its first transaction, and broadcast.
      await wrote2;
      const last = (await nonces.slot(wallet.address, 9))!.broadcasts.at(-1)!;
      const signed = await wallet.signTransaction({
        to: SWAP,
        data: trade(2).data,
        gasLimit: 150_000n,
        maxFeePerGas: 10n * FEES.maxFeePerGas,
        maxPriorityFeePerGas: 2n * FEES.maxPriorityFeePerGas,
        chainId: 31337n,
        nonce: 9,
        type: 2,
      });
      const hash = keccak256(signed);
      const recorded = await nonces.recordBroadcast(
        wallet.address,
        9,
        { hash, rawTx: signed, ...FEES, maxFeePerGas: 10n * FEES.maxFeePerGas, noop: false, sentAt: new Date() },
        last.hash,
      );
      expect(recorded).to.equal(true);
      await provider.send("eth_sendRawTransaction", [signed]);
      replacement = { hash, data: trade(2).data };
    });
    clearInterval(recorded2);
    expect(settled.map((r) => r.status)).to.deep.equal(["fulfilled", "rejected", "fulfilled", "fulfilled"]);
    // Trade 2's call went out once, as the other instance's replacement: never signed again here.
    const twos = node.accepted.filter((tx) => tx.data === trade(2).data);
    expect(twos.map((tx) => [tx.nonce, tx.hash])).to.deep.equal([[9, replacement!.hash]]);
    expect((settled[2] as PromiseFulfilledResult<{ nonce: number; known: boolean }>).value).to.deep.include({
      nonce: 9,
      known: false,
    });
    expect((await nonces.slot(wallet.address, 9))!.broadcasts.map((b) => b.hash)).to.have.length(2);
    // Trade 3 signed again past it, and nonce 8 filled, so that 9 can be mined.
    const threes = node.accepted.filter((tx) => tx.data === trade(3).data);
    expect(threes.map((tx) => tx.nonce)).to.deep.equal([10]);
    const eight = node.accepted.filter((tx) => tx.nonce === 8);
    expect(eight.map((tx) => [tx.to, tx.data, tx.value])).to.deep.equal([[wallet.address, "0x", 0n]]);
  });

  it("signs a trade again past a failed write when its slot's release went through but its answer was lost", async function () {
    const released = nonces.releaseSlot.bind(nonces);
    nonces.releaseSlot = async (...args) => {
      await released(...args);
      throw new Error("connection terminated"); // committed; the answer lost
    };
    const settled = await chunkWithFailedWrite();
    expect(settled.map((r) => r.status)).to.deep.equal(["fulfilled", "rejected", "fulfilled", "fulfilled"]);
    // Its slot at 9 is gone: trade 2 is signed again, and each answer is a transaction the node took.
    for (const i of [2, 3]) {
      const sent = (settled[i] as PromiseFulfilledResult<{ hash: string; nonce: number; known: boolean }>).value;
      expect(
        node.accepted.map((tx) => tx.hash),
        `trade ${i}`,
      ).to.include(sent.hash);
      expect((await nonces.slot(wallet.address, sent.nonce))!.broadcasts.map((b) => b.hash)).to.deep.equal([sent.hash]);
    }
    expect(node.accepted.filter((tx) => tx.data === trade(2).data)).to.have.length(1);
  });

  it("lets trades that arrive while a round sends join it, under the same nonce lock", async function () {
    /** Counts the rounds: one nonce-lock hold each. */
    class CountingNonceStore extends MemoryJournal {
      holds = 0;
      override withNonce<T>(
        wallet: string,
        chainNonce: () => Promise<number>,
        send: (nonce: number) => Promise<T>,
        consumed?: NoncesConsumed<T>,
      ): Promise<T> {
        this.holds += 1;
        return super.withNonce(wallet, chainNonce, send, consumed);
      }
    }
    const counted = new CountingNonceStore();
    nonces = counted;
    queue = new SendQueue({
      signer: toSigner(wallet),
      chainId: 31337n,
      provider,
      nonces: counted,
      ledger: counted,
      maxBatch: 16,
    });
    const later: Array<Promise<unknown>> = [];
    // Trades 1-3 arrive while trade 0 is being journalled, so after its round began.
    const first = queue.send(trade(0, async () => void later.push(...[1, 2, 3].map((i) => queue.send(trade(i))))));
    await first;
    await Promise.all(later);
    expect(counted.holds).to.equal(1);
    expect(node.accepted.map((tx) => [tx.nonce, tx.data])).to.deep.equal(
      [0, 1, 2, 3].map((i) => [7 + i, trade(i).data]),
    );

    // Once a send of the round was refused, later arrivals wait for the next round.
    // Trade 5 arrives while the node refuses trade 4, so before the round knows it.
    const more: Array<Promise<unknown>> = [];
    node.onSend = (tx) => {
      if (tx.data !== trade(4).data) return { accept: true };
      more.push(queue.send(trade(5)));
      return { error: { code: -32000, message: "exceeds block gas limit" } };
    };
    const refused = await queue.send(trade(4)).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(String(refused)).to.match(/exceeds block gas limit/);
    await Promise.all(more);
    expect(counted.holds).to.equal(3);
    expect(node.accepted.at(-1)!.data).to.equal(trade(5).data);
    expect(node.accepted.at(-1)!.nonce).to.equal(11); // the refused one's nonce: no gap
  });

  it("asks for the receipts in the batch that sends, and answers each trade with its own", async function () {
    node.automine = true;
    const first = queue.send(trade(0)); // alone: the next three form one batch
    const sent = await Promise.all([first, ...[1, 2, 3].map((i) => queue.send(trade(i)))]);
    expect(sent.map((s) => s.receipt?.transactionHash)).to.deep.equal(node.accepted.map((tx) => tx.hash));
    expect(sent.map((s) => s.hash)).to.deep.equal(node.accepted.map((tx) => tx.hash));
    const batch = node.requests.find(
      (calls) => calls.filter((c) => c.method === "eth_sendRawTransaction").length === 3,
    )!;
    expect(batch.map((c) => c.method)).to.deep.equal([
      ...Array(3).fill("eth_sendRawTransaction"),
      ...Array(3).fill("eth_getTransactionReceipt"),
    ]);
    expect(batch.slice(3).map((c) => c.params[0])).to.deep.equal(node.accepted.slice(1).map((tx) => tx.hash));
  });

  it("answers a trade without a receipt when its receipt call fails, or the node has not mined it, and then stops asking for receipts", async function () {
    let failedOne = false; // the first receipt call answered fails
    node.shapeAnswers = (answers) =>
      answers.map((answer) => {
        const { id, result } = answer as { id: number; result?: { transactionHash?: string } | null };
        if (failedOne || !result?.transactionHash) return answer;
        failedOne = true;
        return { jsonrpc: "2.0", id, error: { code: -32000, message: "boom" } };
      });
    node.automine = true;
    const [a, b] = await Promise.all([queue.send(trade(0)), queue.send(trade(1))]);
    expect(a.hash).to.equal(node.accepted[0]!.hash);
    expect(a.receipt).to.equal(null); // …its receipt call failed: waited for instead
    expect(b.receipt?.transactionHash).to.equal(node.accepted[1]!.hash);
    node.automine = false;
    const unmined = await queue.send(trade(2));
    expect(unmined.receipt).to.equal(null);
    // No receipt came back: the node mines in blocks, so the next send asks for none.
    await queue.send(trade(3));
    const last = node.requests.filter((calls) => calls.some((c) => c.method === "eth_sendRawTransaction")).at(-1)!;
    expect(last.map((c) => c.method)).to.deep.equal(["eth_sendRawTransaction"]);
  });

  it("keeps asking for receipts beside sends after a refused send (its null receipt tells nothing)", async function () {
    node.automine = true;
    expect((await queue.send(trade(0))).receipt).to.not.equal(null);
    node.onSend = (tx, n) =>
      tx.data === trade(1).data
        ? { error: { code: -32000, message: "insufficient funds for gas * price + value" } }
        : tx.nonce === n.pendingNonce
          ? { accept: true }
          : { error: { code: -32000, message: "nonce too low" } };
    await queue.send(trade(1)).then(
      () => expect.fail("refused"),
      () => {},
    );
    for (const i of [2, 3])
      expect((await queue.send(trade(i))).receipt?.transactionHash).to.equal(node.accepted.at(-1)!.hash);
  });

  it("tells the watcher to forget the hashes of sends refused, never sent, or signed again", async function () {
    const expected = new Set<string>();
    const watcher = {
      expect: (hash: string) => void expected.add(hash),
      release: (hashes: readonly string[]) => {
        for (const hash of hashes) expected.delete(hash);
      },
    };
    const watched = new SendQueue({
      signer: toSigner(wallet),
      chainId: 31337n,
      provider,
      nonces,
      ledger: nonces,
      maxBatch: 50,
      watcher,
    });
    // Refused outright: nobody waits for it.
    node.onSend = (tx) =>
      tx.data === trade(0).data
        ? { error: { code: -32000, message: "insufficient funds for gas * price + value" } }
        : { accept: true };
    await watched.send(trade(0)).catch(() => {});
    expect([...expected]).to.deep.equal([]);
    // Its nonce found taken: signed again at the next one; only the hash that went out stays expected (for its waiter).
    node.onSend = (tx, n) =>
      tx.nonce === n.pendingNonce ? { accept: true } : { error: { code: -32000, message: "nonce too low" } };
    await watched.send(trade(1)); // stores 8 as the next nonce
    expected.clear();
    node.pendingNonce = 12;
    const sent = await watched.send(trade(2));
    expect(sent.nonce).to.equal(12);
    expect([...expected]).to.deep.equal([sent.hash]);
  });

  it("signs a trade again, once, past a nonce someone else took, when a second look a second later says so too", async function () {
    await queue.send(trade(0)); // stores 8 as the next nonce
    node.pendingNonce = 12; // four transactions from elsewhere, mined
    const sent = await queue.send(trade(1));
    expect(sent.nonce).to.equal(12);
    expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([7, 12]);
    expect(sent.hash).to.equal(node.accepted.at(-1)!.hash);
    // Nonce 8 was looked up twice, across the endpoints, before its slot went.
    expect(node.calls("eth_getTransactionByHash")).to.have.length(2);
    expect(await nonces.slot(wallet.address, 8)).to.equal(undefined);
  });

  it("keeps the slot when the second look finds the trade's own transaction (an endpoint that lagged)", async function () {
    await queue.send(trade(0)); // stores 8 as the next nonce
    node.automine = true;
    node.onSend = (tx, n) => {
      // This endpoint's view lags: it says "nonce too low" and does not know the transaction yet,
      // though the chain has mined it; a moment later it does.
      n.pendingNonce = tx.nonce + 1;
      setTimeout(() => n.accepted.push(tx), 300);
      return { error: { code: -32000, message: "nonce too low" } };
    };
    const sent = await queue.send(trade(1));
    expect(sent).to.deep.include({ nonce: 8, known: true });
    expect(node.calls("eth_sendRawTransaction")).to.have.length(2); // never signed again
    expect((await nonces.slot(wallet.address, 8))!.broadcasts.map((b) => b.hash)).to.deep.equal([sent.hash]);
  });

  it("leaves a trade whose nonce is taken again after it was signed again to the lifecycle monitor", async function () {
    node.onSend = (tx, n) => {
      n.pendingNonce = tx.nonce + 1; // someone else's transaction takes every nonce first
      return { error: { code: -32000, message: "nonce too low" } };
    };
    const sent = await queue.send(trade(0));
    expect(sent).to.deep.include({ nonce: 8, known: false });
    expect(node.calls("eth_sendRawTransaction")).to.have.length(2);
    expect((await nonces.openSlots(wallet.address)).map((slot) => slot.nonce)).to.deep.equal([8]);
  });

  it("keeps the slot of a 'nonce too low' that no endpoint explains, and never signs it again", async function () {
    // The node says the nonce is used, yet its chain has not mined past it and nobody knows the
    // transaction: nothing proves it went nowhere, so it is left to the lifecycle monitor.
    node.onSend = () => ({ error: { code: -32000, message: "nonce too low" } });
    const sent = await queue.send(trade(0));
    expect(sent).to.deep.include({ nonce: 7, receipt: null, known: false });
    expect(node.calls("eth_sendRawTransaction")).to.have.length(1);
    expect((await nonces.slot(wallet.address, 7))!.broadcasts.map((b) => b.hash)).to.deep.equal([sent.hash]);
    node.onSend = () => ({ accept: true });
    await queue.send(trade(1));
    expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([8]);
  });

  it("takes a 'nonce too low' answered beside the transaction's own receipt as the send it is", async function () {
    node.automine = true;
    node.onSend = (tx, n) => {
      // The node already mined this very transaction (another endpoint took it first).
      n.accepted.push(tx);
      n.pendingNonce = tx.nonce + 1;
      return { error: { code: -32000, message: "nonce too low" } };
    };
    const sent = await queue.send(trade(0));
    expect(sent.receipt?.transactionHash).to.equal(sent.hash);
    expect(node.calls("eth_sendRawTransaction")).to.have.length(1);
    expect(node.calls("eth_getTransactionByHash")).to.have.length(0); // the batch's receipt said it all
    expect(await nonces.openSlots(wallet.address)).to.have.length(1);
  });

  it("pays once when the first endpoint takes the batch and loses the answer, and the second has mined it", async function () {
    // A gateway in front of the node: it forwards each request, then drops the connection
    // without an answer (as a provider's gateway does when it times out after the node took it).
    node.automine = true;
    const gateway = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", async () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const forwarded = await fetch(node.url, {
          method: "POST",
          body,
          headers: { "content-type": "application/json" },
        });
        await forwarded.text();
        if (body.includes("eth_sendRawTransaction")) res.socket?.destroy();
        else
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(
              await (
                await fetch(node.url, { method: "POST", body, headers: { "content-type": "application/json" } })
              ).text(),
            );
      });
    });
    await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
    const second = new RpcProvider([`http://127.0.0.1:${(gateway.address() as AddressInfo).port}`, node.url], {
      chainId: 31337n,
      batchStallMs: 0,
    });
    const twice = queueOn(second);
    try {
      const sent = await Promise.all([0, 1, 2].map((i) => twice.send(trade(i))));
      // Each signed once, each accepted once by the node; nothing was signed at another nonce.
      expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([7, 8, 9]);
      expect(sent.map((s) => s.hash)).to.deep.equal(node.accepted.map((tx) => tx.hash));
      expect(sent.map((s) => s.nonce)).to.deep.equal([7, 8, 9]);
      expect((await nonces.openSlots(wallet.address)).map((slot) => slot.nonce)).to.deep.equal([7, 8, 9]);
    } finally {
      second.destroy();
      gateway.closeAllConnections();
      await new Promise((resolve) => gateway.close(resolve));
    }
  });

  it("never signs at a nonce the ledger holds, in any state, when the endpoint's count lags behind", async function () {
    // Nonces 7 to 9 were used and are final in the ledger; the endpoint still reports 7.
    for (const nonce of [7, 8, 9]) {
      await nonces.recordSlot(
        { wallet: wallet.address, nonce, purpose: "trade", deadline: null },
        { hash: `0x${nonce.toString(16).padStart(64, "0")}`, rawTx: "0x02", ...FEES, noop: false, sentAt: new Date() },
      );
      await nonces.markSlot(wallet.address, nonce, nonce === 8 ? "lost" : "final", null);
    }
    const sent = await queue.send(trade(0));
    expect(sent.nonce).to.equal(10);
  });

  it("tells when each send was answered, and that a send is on its way until then", async function () {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const seen: Array<number | null | undefined> = [];
    node.onSend = (tx, n) => {
      seen.push(queue.sentAt(tx.nonce));
      return tx.nonce === n.pendingNonce ? { accept: true } : { error: { code: -32000, message: "nonce too high" } };
    };
    const sending = queue.send(
      trade(0, async () => {
        await held;
      }),
    );
    expect(queue.sentAt(7)).to.equal(undefined);
    release();
    const before = Date.now();
    await sending;
    expect(seen).to.deep.equal([null]);
    expect(queue.sentAt(7)).to.be.a("number").within(before, Date.now());
  });

  it("fills the nonce of a refused send with an empty transfer when one after it was accepted", async function () {
    // A node that queues future nonces (a real mempool) and refuses one transaction for itself.
    node.onSend = (tx) =>
      tx.data === trade(1).data ? { error: { code: -32000, message: "exceeds block gas limit" } } : { accept: true };
    // Hold the first send back so that the three others go out in one batch behind it.
    const first = queue.send(trade(0));
    const rest = [1, 2, 3].map((i) =>
      queue.send(trade(i)).then(
        (sent) => sent.hash,
        (error: unknown) => error as Error,
      ),
    );
    await first;
    const [refused, ...sent] = await Promise.all(rest);
    expect(String(refused)).to.match(/exceeds block gas limit/);
    expect(sent.every((hash) => typeof hash === "string")).to.equal(true);
    // The accepted trades are answered at once; the filler follows within the same round.
    for (let waited = 0; waited < 2000 && !node.accepted.some((tx) => tx.nonce === 8); waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const filler = node.accepted.find((tx) => tx.nonce === 8);
    expect(filler, "no transaction filled nonce 8").to.not.equal(undefined);
    expect(filler!.to).to.equal(wallet.address);
    expect(filler!.value).to.equal(0n);
    expect(filler!.data).to.equal("0x");
    expect(filler!.gasLimit).to.equal(21_000n);
    expect(node.pendingNonce).to.equal(11);
    // The refused trade's slot was freed, and the filler recorded there before it went out.
    expect(await nonces.slot(wallet.address, 8)).to.deep.include({
      purpose: "filler",
      tradeId: null,
      state: "pending",
    });
    expect((await nonces.slot(wallet.address, 8))!.broadcasts.map((b) => [b.hash, b.noop])).to.deep.equal([
      [filler!.hash, true],
    ]);
    expect(node.accepted.map((tx) => tx.nonce).sort((a, b) => a - b)).to.deep.equal([7, 8, 9, 10]);
  });

  it("keeps the slot of a trade whose request broke before any answer, answers it as sent, and never reuses its nonce", async function () {
    node.onSend = () => ({ accept: true }); // a real mempool queues a nonce above a gap
    await queue.send(trade(0));
    node.nextRaw = (res) => res.destroy();
    const sent = await queue.send(trade(1));
    // The node may have it, or not: it waits for its receipt, and its slot stays for the
    // lifecycle monitor, which sends the same bytes again.
    expect(sent).to.deep.include({ nonce: 8, receipt: null, known: false });
    expect((await nonces.slot(wallet.address, 8))!.broadcasts[0]!.hash).to.equal(sent.hash);
    await queue.send(trade(2));
    expect(pendingCounts()).to.equal(2);
    expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([7, 9]);
  });

  it("fails a trade the node refused outright and no endpoint knows, and frees its slot", async function () {
    node.onSend = (tx) =>
      tx.data === trade(0).data
        ? { error: { code: -32000, message: "insufficient funds for gas * price + value" } }
        : { accept: true };
    const refused = await queue.send(trade(0)).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(InsufficientFundsError);
    expect(String(refused)).to.match(/cannot pay the gas/);
    expect(await nonces.openSlots(wallet.address)).to.deep.equal([]);
    await queue.send(trade(1));
    expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([7]);
  });

  it("fails with transaction_refused when the refusal is not the trade's own, with nothing paid", async function () {
    node.onSend = () => ({ error: { code: -32000, message: "exceeds block gas limit" } });
    const refused = await queue.send(trade(0)).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(TransactionRefusedError);
    expect((refused as TransactionRefusedError).code).to.equal("transaction_refused");
    expect(String(refused)).to.match(/exceeds block gas limit/);
    expect(await nonces.openSlots(wallet.address)).to.deep.equal([]);
  });

  it("keeps the slot of a refusal that may hide a send (a gateway's text, a full pool, a timeout)", async function () {
    for (const [i, message] of ["txpool is full", "request timed out", "upstream connect error"].entries()) {
      node.onSend = () => ({ error: { code: -32000, message } });
      const sent = await queue.send(trade(i));
      expect(sent, message).to.deep.include({ receipt: null, known: false });
      expect((await nonces.slot(wallet.address, sent.nonce))!.broadcasts.map((b) => b.hash)).to.deep.equal([sent.hash]);
    }
    expect((await nonces.openSlots(wallet.address)).map((slot) => slot.nonce)).to.deep.equal([7, 8, 9]);
  });

  it("keeps the slot of a plain refusal while an endpoint that may have it cannot be asked", async function () {
    // The second endpoint is gone: it may hold the transaction, so the refusal proves nothing.
    const gone = http.createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
    const both = new RpcProvider([node.url, `http://127.0.0.1:${(gone.address() as AddressInfo).port}`], {
      chainId: 31337n,
      batchStallMs: 0,
    });
    const careful = queueOn(both);
    node.onSend = () => ({ error: { code: -32000, message: "insufficient funds for gas * price + value" } });
    try {
      const sent = await careful.send(trade(0));
      expect(sent).to.deep.include({ nonce: 7, known: false });
      expect((await nonces.slot(wallet.address, 7))!.state).to.equal("pending");
    } finally {
      both.destroy();
      gone.closeAllConnections();
      await new Promise((resolve) => gone.close(resolve));
    }
  });

  it("signs a trade again past a nonce someone else's pending transaction holds, once that one is mined, and not before", async function () {
    await queue.send(trade(0)); // stores 8 as the next nonce
    // Someone else's transaction holds nonce 8 in the pool, with higher fees.
    node.pendingNonce = 9;
    node.latestNonce = 8;
    node.onSend = (tx, n) =>
      tx.nonce === 8
        ? { error: { code: -32000, message: "replacement transaction underpriced" } }
        : tx.nonce === n.pendingNonce
          ? { accept: true }
          : { error: { code: -32000, message: "nonce too high" } };
    const sending = queue.send(trade(1));
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(node.calls("eth_sendRawTransaction"), "nothing signed again while it is unmined").to.have.length(2);
    expect((await nonces.slot(wallet.address, 8))?.state, "its slot kept meanwhile").to.equal("pending");
    node.latestNonce = 9; // mined
    const sent = await sending;
    expect(sent).to.deep.include({ nonce: 9, known: true });
    expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([7, 9]);
    expect(await nonces.slot(wallet.address, 8)).to.equal(undefined);
  });

  it("leaves a trade whose nonce someone else's transaction holds to the lifecycle monitor when that one is never mined", async function () {
    const patient = new SendQueue({
      signer: toSigner(wallet),
      chainId: 31337n,
      provider,
      nonces,
      ledger: nonces,
      maxBatch: 50,
      heldWaitMs: 1_500,
    });
    node.onSend = () => ({ error: { code: -32000, message: "replacement transaction underpriced" } });
    const sent = await patient.send(trade(0));
    expect(sent).to.deep.include({ nonce: 7, known: false });
    expect(node.calls("eth_sendRawTransaction")).to.have.length(1);
    expect(patient.sentAt(7)).to.be.a("number"); // the monitor's from now on
    expect((await nonces.slot(wallet.address, 7))!.broadcasts.map((b) => b.hash)).to.deep.equal([sent.hash]);
  });

  it("never signs a trade again while an endpoint that may hold it does not answer, though another says its nonce is taken", async function () {
    // The first endpoint has mined past the nonce and knows none of the trade's hashes; the
    // second, which may be the one holding the transaction, answers nothing.
    const gone = http.createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
    const both = new RpcProvider([node.url, `http://127.0.0.1:${(gone.address() as AddressInfo).port}`], {
      chainId: 31337n,
      batchStallMs: 0,
    });
    const careful = queueOn(both);
    node.onSend = (tx, n) => {
      n.latestNonce = tx.nonce + 1;
      return { error: { code: -32000, message: "nonce too low" } };
    };
    try {
      const sent = await careful.send(trade(0));
      expect(sent).to.deep.include({ nonce: 7, known: false });
      expect(node.calls("eth_sendRawTransaction"), "signed once").to.have.length(1);
      expect((await nonces.slot(wallet.address, 7))!.broadcasts.map((b) => b.hash)).to.deep.equal([sent.hash]);
    } finally {
      both.destroy();
      gone.closeAllConnections();
      await new Promise((resolve) => gone.close(resolve));
    }
  });

  describe("with a signer that is not the local key (KMS, Vault)", function () {
    const queueWith = (signer: TransactionSigner) => queueOn(provider, signer);

    for (const [what, signer] of [
      ["answers a high s", remoteSigner(wallet.address, wallet, withHighS)],
      ["signs with another key", remoteSigner(wallet.address, Wallet.createRandom())],
    ] as const) {
      it(`broadcasts nothing, journals nothing and takes no nonce when it ${what}`, async function () {
        const remote = queueWith(signer);
        const journalled: SignedTradeTx[] = [];
        const outcomes = await Promise.allSettled(
          [0, 1, 2].map((i) => remote.send(trade(i, async (tx) => void journalled.push(tx)))),
        );
        expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(["rejected", "rejected", "rejected"]);
        expect(String((outcomes[0] as PromiseRejectedResult).reason)).to.include(`signer of ${wallet.address}`);
        expect(node.calls("eth_sendRawTransaction")).to.have.length(0);
        expect(journalled).to.have.length(0);
        expect(await nonces.openSlots(wallet.address)).to.have.length(0);
      });
    }

    it("asks for a round's signatures concurrently, and leaves no gap when one of them fails", async function () {
      let inFlight = 0;
      let most = 0;
      let calls = 0;
      const slow: TransactionSigner = {
        address: wallet.address,
        concurrency: 4,
        async signDigest(digest) {
          const call = ++calls;
          inFlight += 1;
          most = Math.max(most, inFlight);
          await new Promise((resolve) => setTimeout(resolve, 20));
          inFlight -= 1;
          if (call === 2) throw new Error("the token did not answer");
          return wallet.signingKey.sign(digest);
        },
      };
      const remote = queueWith(slow);
      const outcomes = await Promise.allSettled([0, 1, 2, 3, 4, 5].map((i) => remote.send(trade(i))));
      expect(most, "signatures in flight at once").to.be.at.least(2);
      expect(outcomes.filter((o) => o.status === "rejected")).to.have.length(1);
      const sent = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value.nonce] : []));
      expect(sent.sort((a, b) => a - b)).to.deep.equal([7, 8, 9, 10, 11]);
      expect(node.accepted.map((tx) => tx.nonce)).to.deep.equal([7, 8, 9, 10, 11]);
    });

    /** A signer of `concurrency` whose calls numbered in `failing` fail after a while (KMS throttled past its budget); each call's options recorded. */
    const flaky = (failing: Set<number>, concurrency = 4) => {
      const calls: Array<{ startedAt: number | undefined }> = [];
      const signer: TransactionSigner = {
        address: wallet.address,
        concurrency,
        async signDigest(digest, options) {
          calls.push({ startedAt: options?.startedAt });
          const call = calls.length;
          await new Promise((resolve) => setTimeout(resolve, failing.has(call) ? 30 : 10));
          if (failing.has(call)) throw new Error("ThrottlingException, budget spent");
          return wallet.signingKey.sign(digest);
        },
      };
      return { signer, calls };
    };

    it("asks once per trade when one signature of a wave fails: the others keep theirs, the next trade takes the free nonce", async function () {
      const { signer, calls } = flaky(new Set([3]));
      const remote = queueWith(signer);
      const outcomes = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => remote.send(trade(i))));
      expect(outcomes.filter((o) => o.status === "rejected")).to.have.length(1);
      expect(calls.length, "signatures asked for: eight trades, one failed, none asked twice").to.equal(8);
      expect(
        node.accepted.map((tx) => tx.nonce).sort((a, b) => a - b),
        "no gap",
      ).to.deep.equal([7, 8, 9, 10, 11, 12, 13]);
    });

    it("moves only the last signed trade into a failed nonce when no trade is left for it, within that trade's first budget", async function () {
      const { signer, calls } = flaky(new Set([2]));
      const remote = queueWith(signer);
      const outcomes = await Promise.allSettled([0, 1, 2, 3].map((i) => remote.send(trade(i))));
      expect(outcomes.filter((o) => o.status === "rejected")).to.have.length(1);
      expect(
        node.accepted.map((tx) => tx.nonce).sort((a, b) => a - b),
        "no gap",
      ).to.deep.equal([7, 8, 9]);
      expect(calls.length, "four asked, one of them again at the free nonce").to.equal(5);
      expect(calls[4]!.startedAt, "signed again within the budget it started with").to.be.a("number");
      expect(calls[4]!.startedAt).to.equal(calls[3]!.startedAt);
    });

    it("broadcasts what it signs when its signatures are the wallet's", async function () {
      const sent = await queueWith(remoteSigner(wallet.address, wallet)).send(trade(0));
      expect(sent).to.deep.include({ nonce: 7, known: true });
      expect(node.accepted.map((tx) => tx.from)).to.deep.equal([wallet.address]);
    });
  });
});
