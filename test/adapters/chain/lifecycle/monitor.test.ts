/**
 * The lifecycle monitor (adapters/chain/lifecycle/monitor.ts) against scripted JSON-RPC nodes:
 * a broadcast's age counts from when its send was answered, a send on its way is never
 * re-sent under the sender, and a nonce counts as lost only after several looks apart in time
 * and the word of every endpoint. The anvil suites (*.anvil.test.ts) cover the rest on a node.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { expect } from "chai";
import { Wallet } from "ethers";

import { DEFAULT_TRADE_SETTINGS, RpcProvider, toSigner } from "../../../../adapters/chain/index.js";
import { Receipts, type FeeOracle } from "../../../../adapters/chain/blocks/index.js";
import { WalletMonitor, type LifecycleSettings } from "../../../../adapters/chain/lifecycle/index.js";
import { signEip1559With } from "../../../../adapters/chain/tx/index.js";
import { MemoryJournal } from "../../../../adapters/journal/index.js";
import { FakeRpcNode } from "../../../helpers/fake-rpc.js";

const wallet = new Wallet("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
const signer = toSigner(wallet);
const FEES = { maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };
const SETTINGS: LifecycleSettings = { ...DEFAULT_TRADE_SETTINGS, minAgeMs: 200, resubmitAfterMs: 600_000 };

/** A fee oracle that reads nothing: a quiet market at block 16. */
const quietMarket = {
  read: async () => ({
    baseFee: 1_000_000_000n,
    priorityFee: 1_000_000_000n,
    head: { number: 16, hash: `0x${"aa".repeat(32)}`, timestamp: Math.floor(Date.now() / 1000) },
  }),
} as unknown as FeeOracle;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("WalletMonitor", function () {
  const nodes: FakeRpcNode[] = [];
  const providers: RpcProvider[] = [];
  let journal: MemoryJournal;

  async function node(): Promise<FakeRpcNode> {
    const started = await FakeRpcNode.start();
    nodes.push(started);
    return started;
  }

  function monitorOn(
    urls: string[],
    sends?: { sentAt(nonce: number): number | null | undefined },
    silentEndpointGraceMs?: number,
  ): WalletMonitor {
    const provider = new RpcProvider(urls, { chainId: 31337n, batchStallMs: 0 });
    providers.push(provider);
    return new WalletMonitor({
      signer,
      chainId: 31337n,
      provider,
      journal,
      fees: quietMarket,
      receipts: new Receipts({ provider, confirmations: 1, timeoutMs: 1000, journalAfterMs: 0 }),
      settings: SETTINGS,
      log: { warn() {}, info() {} },
      holder: "test",
      ...(sends === undefined ? {} : { sends }),
      ...(silentEndpointGraceMs === undefined ? {} : { silentEndpointGraceMs }),
    });
  }

  /** Journals a transaction at `nonce`, as the send queue does before sending it, `ageMs` ago. */
  async function journalled(nonce: number, ageMs: number): Promise<{ hash: string; rawTx: string }> {
    const { rawTx, txHash } = await signEip1559With(signer, {
      to: wallet.address,
      data: "0x",
      gasLimit: 21_000n,
      value: 0n,
      ...FEES,
      chainId: 31337n,
      nonce,
    });
    await journal.recordSlot(
      { wallet: wallet.address, nonce, purpose: "approval", deadline: null },
      { hash: txHash, rawTx, ...FEES, noop: false, sentAt: new Date(Date.now() - ageMs) },
    );
    return { hash: txHash, rawTx };
  }

  beforeEach(function () {
    journal = new MemoryJournal();
  });

  afterEach(async function () {
    for (const provider of providers.splice(0)) provider.destroy();
    for (const started of nodes.splice(0)) await started.close();
  });

  it("never re-sends a broadcast whose send is still on its way, however long ago it was journalled", async function () {
    const chain = await node();
    chain.pendingNonce = 7;
    const { rawTx } = await journalled(7, 60_000);
    let sentAt: number | null | undefined = null; // the send queue's request has not come back
    const monitor = monitorOn([chain.url], { sentAt: () => sentAt });
    await monitor.look();
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
    // Answered just now: its age counts from now, not from when it was journalled.
    sentAt = Date.now();
    await monitor.look();
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
    // Answered long enough ago, and the node does not know it: the same bytes again.
    sentAt = Date.now() - 1000;
    await monitor.look();
    expect(chain.calls("eth_sendRawTransaction").map((call) => call.params[0])).to.deep.equal([rawTx]);
  });

  it("asks nothing of the chain for a look whose pending nonces are all too young to act on", async function () {
    const chain = await node();
    chain.pendingNonce = 7;
    await journalled(7, 0);
    let sentAt: number | null | undefined = Date.now();
    const monitor = monitorOn([chain.url], { sentAt: () => sentAt });
    await monitor.look();
    // Neither the nonce count nor a look at the transaction: nothing could be done with them yet.
    expect(chain.calls("eth_getTransactionCount")).to.have.length(0);
    expect(chain.calls("eth_getTransactionByHash")).to.have.length(0);
    // Once it is old enough, the look asks as before.
    sentAt = Date.now() - 1000;
    await sleep(SETTINGS.minAgeMs);
    await monitor.look();
    expect(chain.calls("eth_getTransactionCount")).to.have.length(1);
  });

  it("counts a nonce lost only after looks apart in time, and never while any endpoint has its transaction", async function () {
    // The first endpoint says the nonce is used and knows nothing of ours; the second has it mined.
    const lagging = await node();
    lagging.pendingNonce = 8;
    const ahead = await node();
    ahead.automine = true;
    const { hash, rawTx } = await journalled(7, 10_000);
    ahead.pendingNonce = 7;
    await fetch(ahead.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [rawTx] }),
    });
    const monitor = monitorOn([lagging.url, ahead.url]);
    for (let look = 0; look < 4; look++) await monitor.look(); // four quick looks: too close together
    expect((await journal.slot(wallet.address, 7))!.state).to.equal("pending");
    await sleep(SETTINGS.minAgeMs + 50);
    await monitor.look();
    // Every endpoint was asked, and the second one has it mined: not lost. Its receipt is
    // recorded once the service's own endpoint sees it, not from another endpoint's fork.
    expect(ahead.calls("eth_getTransactionReceipt").map((call) => call.params[0])).to.include(hash);
    expect((await journal.slot(wallet.address, 7))!.state).to.equal("pending");
    for (let look = 0; look < 3; look++) await monitor.look();
    expect((await journal.slot(wallet.address, 7))!.state).to.equal("pending");
  });

  it("counts a nonce lost when every endpoint has mined past it and none knows its transactions", async function () {
    const chain = await node();
    chain.pendingNonce = 8; // someone else's transaction took nonce 7
    await journalled(7, 10_000);
    const monitor = monitorOn([chain.url]);
    await monitor.look();
    await sleep(SETTINGS.minAgeMs + 50);
    await monitor.look();
    expect((await journal.slot(wallet.address, 7))!.state).to.equal("pending"); // two looks so far
    await monitor.look();
    expect((await journal.slot(wallet.address, 7))!.state).to.equal("lost");
  });

  it("waits for an endpoint that does not answer before counting a nonce lost, and not for ever", async function () {
    const chain = await node();
    chain.pendingNonce = 8; // someone else's transaction took nonce 7, as far as this endpoint knows
    const gone = http.createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
    try {
      await journalled(7, 10_000);
      const monitor = monitorOn(
        [chain.url, `http://127.0.0.1:${(gone.address() as AddressInfo).port}`],
        undefined,
        1_500,
      );
      for (let look = 0; look < 4; look++) {
        await monitor.look();
        await sleep(SETTINGS.minAgeMs + 50);
      }
      // The second endpoint may hold its transaction: not lost yet.
      expect((await journal.slot(wallet.address, 7))!.state).to.equal("pending");
      await sleep(1_500);
      await monitor.look();
      expect((await journal.slot(wallet.address, 7))!.state).to.equal("lost");
    } finally {
      gone.closeAllConnections();
      await new Promise((resolve) => gone.close(resolve));
    }
  });
});
