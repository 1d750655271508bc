/**
 * RpcProvider (adapters/chain/rpc/rpc-provider.ts) over a WebSocket (ws:// in RPC_URL), against a
 * scripted JSON-RPC node: calls and batches on one connection, answers matched by id, the same
 * failures as over HTTP (a dropped connection, a timeout, an answer too large, one error for the
 * whole request), failover to an HTTP endpoint, and the newHeads subscription.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { expect } from "chai";
import { Wallet, isError } from "ethers";

import { RpcProvider, type RpcRequestRecord } from "../../../adapters/chain/index.js";
import { isChainUnreachable, isDefiniteRefusal, type PushedHead } from "../../../adapters/chain/rpc/index.js";
import { signEip1559 } from "../../../adapters/chain/tx/index.js";
import { FakeRpcNode } from "../../helpers/fake-rpc.js";
import { acceptWebSockets, type WsPeer } from "../../helpers/ws-server.js";

interface WsCall {
  jsonrpc: "2.0";
  id: number;
  method: string;
  params: unknown[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const until = async (what: string, check: () => boolean, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
};
const failure = (call: Promise<unknown>) =>
  call.then(
    () => undefined,
    (error: unknown) => error as Error,
  );

/**
 * A scripted JSON-RPC node over WebSocket: it records each message's calls, answers them by
 * `answer` (default: a few methods), and can push, drop or refuse connections.
 */
class WsNode {
  /** Each message's calls (a batch has several). */
  readonly messages: WsCall[][] = [];
  readonly peers = new Set<WsPeer>();
  connections = 0;
  refuse = false;
  /** Decides what is sent back for each message; `undefined`: nothing. */
  answer: (calls: WsCall[], batch: boolean, peer: WsPeer) => string | undefined = (calls, batch) => {
    const answers = calls.map((call) => this.defaultAnswer(call));
    return JSON.stringify(batch ? answers : answers[0]);
  };
  #subscriptions = 0;
  readonly #server: http.Server;

  private constructor(server: http.Server) {
    this.#server = server;
  }

  static async start(): Promise<WsNode> {
    const server = http.createServer((_req, res) => res.writeHead(426).end());
    const node = new WsNode(server);
    acceptWebSockets(
      server,
      (peer) => {
        node.connections += 1;
        node.peers.add(peer);
        peer.onClose = () => node.peers.delete(peer);
        peer.onMessage = (text) => {
          const parsed = JSON.parse(text) as WsCall | WsCall[];
          const calls = Array.isArray(parsed) ? parsed : [parsed];
          node.messages.push(calls);
          const reply = node.answer(calls, Array.isArray(parsed), peer);
          if (reply !== undefined) peer.send(reply);
        };
      },
      { refuse: () => node.refuse },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return node;
  }

  get url(): string {
    return `ws://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  calls(method: string): WsCall[] {
    return this.messages.flat().filter((call) => call.method === method);
  }

  defaultAnswer(call: WsCall): object {
    switch (call.method) {
      case "eth_chainId":
        return { jsonrpc: "2.0", id: call.id, result: "0x7a69" };
      case "eth_blockNumber":
        return { jsonrpc: "2.0", id: call.id, result: "0x10" };
      case "eth_subscribe":
        this.#subscriptions += 1;
        return { jsonrpc: "2.0", id: call.id, result: `0x5${this.#subscriptions}` };
      case "eth_unsubscribe":
        return { jsonrpc: "2.0", id: call.id, result: true };
      default:
        return { jsonrpc: "2.0", id: call.id, error: { code: -32601, message: `${call.method} is not scripted` } };
    }
  }

  /** Pushes a notification of `subscription` to every connection. */
  push(subscription: string, result: object): void {
    const text = JSON.stringify({ jsonrpc: "2.0", method: "eth_subscription", params: { subscription, result } });
    for (const peer of this.peers) peer.send(text);
  }

  /** Cuts every connection without a close frame. */
  drop(): void {
    for (const peer of this.peers) peer.destroy();
  }

  async close(): Promise<void> {
    this.drop();
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

/** A signed transaction (never mined anywhere). */
const signed = () =>
  signEip1559(Wallet.createRandom().signingKey, {
    chainId: 31337n,
    nonce: 0,
    maxFeePerGas: 2n,
    maxPriorityFeePerGas: 1n,
    gasLimit: 21_000n,
    to: Wallet.createRandom().address,
    value: 0n,
    data: "0x",
  }).rawTx;

const header = (number: number): PushedHead => ({
  number: `0x${number.toString(16)}`,
  hash: `0x${number.toString(16).padStart(64, "0")}`,
  parentHash: `0x${(number - 1).toString(16).padStart(64, "0")}`,
  timestamp: "0x1",
  gasUsed: "0x0",
  gasLimit: "0x1c9c380",
  baseFeePerGas: "0x7",
});

describe("RpcProvider over a WebSocket", function () {
  let node: WsNode;
  let provider: RpcProvider | undefined;

  beforeEach(async function () {
    node = await WsNode.start();
  });

  afterEach(async function () {
    provider?.destroy();
    provider = undefined;
    await node.close();
  });

  it("sends calls made together as one batch on one connection, and matches answers by id in any order", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n });
    node.answer = (calls, batch) => {
      const answers = calls.map((call) => node.defaultAnswer(call)).reverse();
      return JSON.stringify(batch ? answers : answers[0]);
    };
    const answers = await Promise.all([
      provider.send("eth_blockNumber", []),
      provider.send("eth_chainId", []),
      provider.send("eth_blockNumber", []),
    ]);
    expect(answers).to.deep.equal(["0x10", "0x7a69", "0x10"]);
    expect(node.messages.map((calls) => calls.map((call) => call.method))).to.deep.equal([
      ["eth_blockNumber", "eth_chainId", "eth_blockNumber"],
    ]);
    expect(await provider.send("eth_chainId", [])).to.equal("0x7a69");
    expect(node.connections).to.equal(1);
  });

  it("answers a batch's calls that came one message each, and fails only a call left out of a batch's answer", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n });
    node.answer = (calls, _batch, peer) => {
      for (const call of [...calls].reverse()) peer.send(JSON.stringify(node.defaultAnswer(call)));
      return undefined;
    };
    const outcomes = await provider.sendBatch([
      { method: "eth_blockNumber", params: [] },
      { method: "eth_unscripted", params: [] },
      { method: "eth_chainId", params: [] },
    ]);
    expect(outcomes[0]).to.deep.equal({ result: "0x10" });
    expect("error" in outcomes[1]! && outcomes[1].error.message).to.match(/eth_unscripted is not scripted/);
    expect(outcomes[2]).to.deep.equal({ result: "0x7a69" });
    node.answer = (calls) => JSON.stringify(calls.slice(1).map((call) => node.defaultAnswer(call)));
    const partial = await provider.sendBatch([
      { method: "eth_blockNumber", params: [] },
      { method: "eth_chainId", params: [] },
    ]);
    expect("error" in partial[0]! && isError(partial[0].error, "BAD_DATA")).to.equal(true);
    expect(partial[1]).to.deep.equal({ result: "0x7a69" });
  });

  it("fails a call in flight when the connection drops, as a lost answer (the node may have taken it), never sends it again, and reconnects", async function () {
    const records: RpcRequestRecord[] = [];
    provider = new RpcProvider(node.url, { chainId: 31337n, restMs: 50, onRequest: (r) => records.push(r) });
    expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
    node.answer = (calls, _batch, peer) => {
      if (calls.some((call) => call.method === "eth_sendRawTransaction")) peer.destroy();
      return JSON.stringify(node.defaultAnswer(calls[0]!));
    };
    const thrown = await failure(provider.send("eth_sendRawTransaction", [signed()]));
    expect(thrown).to.be.instanceOf(Error);
    expect(isChainUnreachable(thrown)).to.equal(true);
    expect(isDefiniteRefusal(thrown)).to.equal(false);
    expect(node.calls("eth_sendRawTransaction")).to.have.length(1);
    expect(records.at(-1)).to.deep.include({ failed: true, methods: ["eth_sendRawTransaction"] });
    // The next call opens a new connection.
    expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
    expect(node.connections).to.equal(2);
    await sleep(200);
    expect(node.calls("eth_sendRawTransaction")).to.have.length(1);
  });

  it("times out a node that does not answer, and replaces the connection", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, timeoutMs: 200 });
    node.answer = () => undefined;
    const thrown = await failure(provider.send("eth_blockNumber", []));
    expect(isError(thrown, "TIMEOUT")).to.equal(true);
    expect(isChainUnreachable(thrown)).to.equal(true);
    node.answer = (calls) => JSON.stringify(node.defaultAnswer(calls[0]!));
    expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
    expect(node.connections).to.equal(2);
  });

  it("refuses a message over maxAnswerBytes as a failure of the endpoint", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, maxAnswerBytes: 64 * 1024 });
    node.answer = (calls) => JSON.stringify({ jsonrpc: "2.0", id: calls[0]!.id, result: `0x${"ab".repeat(40_000)}` });
    const thrown = await failure(provider.send("eth_blockNumber", []));
    expect(isError(thrown, "SERVER_ERROR"), String(thrown)).to.equal(true);
    expect(isChainUnreachable(thrown)).to.equal(true);
    expect(thrown?.message).to.include("more than 65536 bytes");
    node.answer = (calls) => JSON.stringify({ jsonrpc: "2.0", id: calls[0]!.id, result: `0x${"ab".repeat(32_000)}` });
    expect(await provider.send("eth_blockNumber", [])).to.have.length(64_002);
  });

  it("fails each call with the node's one error for the whole request, as the transport's failure", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n });
    node.answer = () =>
      JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32005, message: "batch size limit exceeded" } });
    const outcomes = await Promise.allSettled([provider.send("eth_blockNumber", []), provider.send("eth_chainId", [])]);
    for (const outcome of outcomes) {
      const reason = (outcome as PromiseRejectedResult).reason as Error;
      expect(reason.message).to.include("batch size limit exceeded");
      expect(isChainUnreachable(reason)).to.equal(true);
    }
  });

  it("never names the URL's secret, and fails over to an HTTP endpoint when the WebSocket one refuses connections", async function () {
    const http = await FakeRpcNode.start();
    try {
      node.refuse = true;
      provider = new RpcProvider([`${node.url}/v3/secret-project-key`, http.url], { chainId: 31337n });
      expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
      expect(http.requests).to.have.length(1);
      const [ws] = provider.endpoints();
      expect(ws!.up).to.equal(false);
      expect(JSON.stringify(provider.endpoints())).to.not.include("secret-project-key");
      provider.destroy();
      provider = new RpcProvider(`${node.url}/v3/secret-project-key`, { chainId: 31337n });
      const thrown = await failure(provider.send("eth_blockNumber", []));
      expect(isChainUnreachable(thrown)).to.equal(true);
      expect(String(thrown?.message)).to.not.include("secret-project-key");
    } finally {
      await http.close();
    }
  });

  it("hands signed transactions sent over HTTP to the WebSocket endpoint too", async function () {
    const http = await FakeRpcNode.start();
    try {
      provider = new RpcProvider([http.url, node.url], { chainId: 31337n });
      const raw = signed();
      await provider.send("eth_sendRawTransaction", [raw]);
      await until("the WebSocket endpoint to get it", () => node.calls("eth_sendRawTransaction").length === 1);
      expect(node.calls("eth_sendRawTransaction")[0]!.params).to.deep.equal([raw]);
    } finally {
      await http.close();
    }
  });

  it("has no pushed heads without a WebSocket endpoint", async function () {
    const http = await FakeRpcNode.start();
    try {
      provider = new RpcProvider(http.url, { chainId: 31337n });
      expect(provider.heads).to.equal(undefined);
    } finally {
      await http.close();
    }
  });

  describe("newHeads", function () {
    it("subscribes once, hands each header to every listener, and counts no notification as a call", async function () {
      const records: RpcRequestRecord[] = [];
      provider = new RpcProvider(node.url, { chainId: 31337n, onRequest: (r) => records.push(r) });
      const heads = provider.heads!;
      const [seenA, seenB, changes] = [[] as PushedHead[], [] as PushedHead[], [] as boolean[]];
      const stopA = heads.onHead(
        (head) => seenA.push(head),
        (up) => changes.push(up),
      );
      heads.onHead((head) => seenB.push(head));
      await until("the subscription", () => heads.subscribed);
      expect(changes).to.deep.equal([true]);
      node.push("0x51", header(11));
      node.push("0x99", header(99)); // not ours
      node.push("0x51", { number: "0xc" }); // not a header
      node.push("0x51", header(12));
      await until("two headers", () => seenB.length === 2);
      expect(seenA.map((head) => head.number)).to.deep.equal(["0xb", "0xc"]);
      expect(node.calls("eth_subscribe")).to.deep.include({
        jsonrpc: "2.0",
        id: node.calls("eth_subscribe")[0]!.id,
        method: "eth_subscribe",
        params: ["newHeads"],
      });
      expect(records.flatMap((r) => r.methods)).to.deep.equal(["eth_subscribe"]);
      stopA();
      expect(node.calls("eth_unsubscribe")).to.have.length(0); // B still listens
    });

    it("takes headers pushed right after the subscription's answer, in the same read", async function () {
      provider = new RpcProvider(node.url, { chainId: 31337n });
      node.answer = (calls, _batch, peer) => {
        const answer = JSON.stringify(node.defaultAnswer(calls[0]!));
        const pushed = JSON.stringify({
          jsonrpc: "2.0",
          method: "eth_subscription",
          params: { subscription: "0x51", result: header(20) },
        });
        peer.send(answer);
        peer.send(pushed);
        return undefined;
      };
      const seen: PushedHead[] = [];
      provider.heads!.onHead((head) => seen.push(head));
      await until("the header", () => seen.length === 1);
      expect(seen[0]!.number).to.equal("0x14");
    });

    it("subscribes only on the endpoint calls go to: never while an HTTP endpoint comes first, and not on one resting", async function () {
      const httpNode = await FakeRpcNode.start();
      try {
        // HTTP first: calls go there, so heads are not taken from the WebSocket endpoint's node.
        provider = new RpcProvider([httpNode.url, node.url], { chainId: 31337n, restMs: 60_000 });
        provider.heads!.onHead(() => {});
        await sleep(200);
        expect(provider.heads!.subscribed).to.equal(false);
        expect(node.calls("eth_subscribe")).to.have.length(0);
        provider.destroy();
        // WebSocket first: subscribed there, until a failure rests it and calls go to HTTP.
        provider = new RpcProvider([node.url, httpNode.url], { chainId: 31337n, restMs: 60_000 });
        const changes: boolean[] = [];
        provider.heads!.onHead(
          () => {},
          (up) => changes.push(up),
        );
        await until("the subscription", () => provider!.heads!.subscribed);
        node.answer = () =>
          JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32005, message: "rate limited" } });
        expect(await provider.send("eth_blockNumber", [])).to.equal("0x10"); // answered by the HTTP endpoint
        await until("the subscription dropped", () => !provider!.heads!.subscribed);
        expect(changes).to.deep.equal([true, false]);
      } finally {
        await httpNode.close();
      }
    });

    it("says when the subscription is lost, and subscribes again after reconnecting", async function () {
      provider = new RpcProvider(node.url, { chainId: 31337n, restMs: 50 });
      const heads = provider.heads!;
      const [seen, changes] = [[] as PushedHead[], [] as boolean[]];
      heads.onHead(
        (head) => seen.push(head),
        (up) => changes.push(up),
      );
      await until("the subscription", () => heads.subscribed);
      node.refuse = true;
      node.drop();
      await until("the loss", () => !heads.subscribed);
      expect(changes).to.deep.equal([true, false]);
      await sleep(300);
      expect(heads.subscribed).to.equal(false);
      node.refuse = false;
      await until("the second subscription", () => heads.subscribed);
      expect(changes).to.deep.equal([true, false, true]);
      expect(node.calls("eth_subscribe")).to.have.length(2);
      node.push("0x51", header(30)); // the old subscription's id: gone with its connection
      node.push("0x52", header(31));
      await until("the header", () => seen.length === 1);
      await sleep(50);
      expect(seen.map((head) => head.number)).to.deep.equal(["0x1f"]);
    });

    it("unsubscribes once nobody listens, and stops asking a node that refuses eth_subscribe", async function () {
      provider = new RpcProvider(node.url, { chainId: 31337n, restMs: 20 });
      const stop = provider.heads!.onHead(() => {});
      await until("the subscription", () => provider!.heads!.subscribed);
      stop();
      await until("eth_unsubscribe", () => node.calls("eth_unsubscribe").length === 1);
      expect(node.calls("eth_unsubscribe")[0]!.params).to.deep.equal(["0x51"]);
      expect(provider.heads!.subscribed).to.equal(false);
      node.answer = (calls) =>
        JSON.stringify({ jsonrpc: "2.0", id: calls[0]!.id, error: { code: -32601, message: "method not found" } });
      provider.heads!.onHead(() => {});
      await sleep(500);
      expect(node.calls("eth_subscribe")).to.have.length(2);
      expect(provider.heads!.subscribed).to.equal(false);
      expect(provider.endpoints()[0]!.up).to.equal(true); // a refusal is the node's answer, not a failure
    });
  });
});
