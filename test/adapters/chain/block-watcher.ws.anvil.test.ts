/**
 * BlockWatcher on pushed heads (eth_subscribe newHeads over a WebSocket) on anvil, an
 * independent node mining a block a second: while subscribed it finds receipts without asking
 * for a head; when the WebSocket drops it polls (over the HTTP endpoint the calls fail over to)
 * and subscribes again once the connection is back. The WebSocket goes through a proxy
 * (test/helpers/ws-proxy.ts) that the test cuts and refuses at will.
 */
import { expect } from "chai";

import { BlockWatcher } from "../../../adapters/chain/blocks/index.js";
import { RpcProvider } from "../../../adapters/chain/index.js";
import { startAnvil, type Anvil } from "../../helpers/anvil.js";
import { waitFor } from "../../helpers/wait.js";
import { startWsProxy, type WsProxy } from "../../helpers/ws-proxy.js";

/** Anvil's default accounts #0 and #2 (unlocked: anvil signs their eth_sendTransaction). */
const FROM = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
const TO = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

describe("BlockWatcher on anvil's newHeads over a WebSocket", function () {
  this.timeout(120_000);
  let anvil: Anvil;
  let proxy: WsProxy;
  let provider: RpcProvider | undefined;
  let watcher: BlockWatcher | undefined;
  /** Calls the provider made, by method (every request, each call of a batch). */
  let calls: Map<string, number>;
  let log: string[];
  const count = (method: string) => calls.get(method) ?? 0;

  before(async function () {
    anvil = await startAnvil({ blockTime: 1 });
  });

  after(async function () {
    await anvil?.stop();
  });

  beforeEach(async function () {
    proxy = await startWsProxy(`ws://127.0.0.1:${anvil.port}`);
    calls = new Map();
    log = [];
  });

  afterEach(async function () {
    watcher?.stop();
    provider?.destroy();
    [watcher, provider] = [undefined, undefined];
    await proxy.close();
  });

  const make = (urls: string[]) => {
    provider = new RpcProvider(urls, {
      chainId: 31337n,
      restMs: 200,
      onRequest: ({ methods }) => {
        for (const method of methods) calls.set(method, (calls.get(method) ?? 0) + 1);
        log.push(methods.join("+"));
      },
    });
    watcher = new BlockWatcher({ provider, intervalMs: 1_000, heads: provider.heads });
    return { provider, watcher };
  };

  /** A transfer anvil signs and takes (sent to it directly, not through the provider). */
  const transfer = () => anvil.rpc<string>("eth_sendTransaction", [{ from: FROM, to: TO, value: "0x1" }]);

  /** Waits on the watcher's looks until `tx`'s receipt is found. */
  const receiptOf = async (tx: string) => {
    let seen = -1;
    const until = Date.now() + 20_000;
    while (Date.now() < until) {
      const look = await watcher!.next([tx], 5_000, seen);
      seen = look.head;
      const receipt = look.receipts.get(tx);
      if (receipt !== undefined) return receipt;
    }
    throw new Error(`no receipt for ${tx}`);
  };

  it("finds receipts with no head poll while subscribed: one eth_getBlockReceipts per block, by its hash", async function () {
    const { provider, watcher } = make([proxy.url]);
    await waitFor("the subscription", async () => provider.heads!.subscribed);
    // A first header pushed, looked at while nothing is expected (no call): the next blocks are read by hash.
    await waitFor("a first head", async () => watcher.lastHead() !== undefined);
    expect(log).to.deep.equal(["eth_subscribe"]);
    for (let i = 0; i < 3; i++) {
      const tx = await transfer();
      const receipt = await receiptOf(tx);
      expect(receipt.status).to.equal("0x1");
      watcher.release([tx]);
    }
    expect(count("eth_getBlockByNumber")).to.equal(0);
    expect(count("eth_subscribe")).to.equal(1);
    expect(count("eth_getBlockReceipts"), log.join(", ")).to.be.within(3, 9);
    expect(count("eth_getTransactionReceipt")).to.equal(0);
    // What the proxy forwarded is what the provider counted: no notification among them.
    expect(proxy.counts.get("eth_getBlockByNumber") ?? 0).to.equal(0);
    expect(watcher.lastHead()?.block.hash).to.match(/^0x[0-9a-f]{64}$/);
  });

  it("polls over the HTTP endpoint while the WebSocket is down, and subscribes again once it is back", async function () {
    const { provider, watcher } = make([proxy.url, anvil.url]);
    await waitFor("the subscription", async () => provider.heads!.subscribed);
    proxy.refuse = true;
    proxy.drop();
    await waitFor("the loss of the subscription", async () => !provider.heads!.subscribed);
    // Down: calls fail over to HTTP, heads are polled.
    let tx = await transfer();
    expect((await receiptOf(tx)).status).to.equal("0x1");
    watcher.release([tx]);
    expect(count("eth_getBlockByNumber")).to.be.greaterThan(0);
    expect(provider.endpoints().map((endpoint) => endpoint.up)).to.deep.equal([false, true]);
    // Back: subscribed again (a second eth_subscribe), no head polled any more.
    proxy.refuse = false;
    await waitFor("the second subscription", async () => provider.heads!.subscribed, 90_000);
    expect(proxy.counts.get("eth_subscribe")).to.equal(2); // those that reached the node
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // a poll already due may still go out
    const polls = count("eth_getBlockByNumber");
    tx = await transfer();
    expect((await receiptOf(tx)).status).to.equal("0x1");
    expect(count("eth_getBlockByNumber")).to.equal(polls);
  });

  it("fails over from a WebSocket endpoint that is gone to the HTTP one", async function () {
    await proxy.close();
    const { provider } = make([proxy.url, anvil.url]);
    expect(await provider.send("eth_chainId", [])).to.equal("0x7a69");
    expect(provider.endpoints().map((endpoint) => endpoint.up)).to.deep.equal([false, true]);
    const [answer] = await provider.sendBatch([{ method: "eth_blockNumber", params: [] }]);
    expect(answer).to.have.property("result");
  });
});
