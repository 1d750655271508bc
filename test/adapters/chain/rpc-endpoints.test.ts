/**
 * RpcProvider with several endpoints (RPC_URL="a,b"): failover on transport failures only,
 * rest and probe, and signed transactions handed to every endpoint.
 */
import { expect } from "chai";
import { Wallet, isError } from "ethers";

import { RpcProvider, type EndpointStatus } from "../../../adapters/chain/index.js";
import { isChainUnreachable } from "../../../adapters/chain/rpc/index.js";
import { signEip1559 } from "../../../adapters/chain/tx/index.js";
import { FakeRpcNode } from "../../helpers/fake-rpc.js";

const until = async (check: () => boolean, ms = 3_000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe("RpcProvider with several endpoints", function () {
  let first: FakeRpcNode;
  let second: FakeRpcNode;
  let provider: RpcProvider | undefined;
  let changes: EndpointStatus[];

  beforeEach(async function () {
    [first, second] = await Promise.all([FakeRpcNode.start(), FakeRpcNode.start()]);
    changes = [];
  });

  afterEach(async function () {
    provider?.destroy();
    provider = undefined;
    await Promise.all([first.close(), second.close()]);
  });

  const make = (options: { timeoutMs?: number; restMs?: number; chainId?: bigint } = {}) =>
    new RpcProvider([first.url, second.url], {
      chainId: options.chainId ?? 31337n,
      timeoutMs: options.timeoutMs ?? 2_000,
      restMs: options.restMs ?? 60_000,
      onEndpointChange: (change) => changes.push(change),
    });

  it("uses the first endpoint while it answers", async function () {
    provider = make();
    await provider.send("eth_blockNumber", []);
    await provider.send("eth_blockNumber", []);
    expect(first.requests).to.have.length(2);
    expect(second.requests).to.have.length(0);
  });

  it("fails over to the next endpoint when the first refuses connections, and says which is down", async function () {
    provider = make();
    const firstUrl = first.url;
    await first.close();
    expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
    expect(second.requests).to.have.length(1);
    expect(provider.endpoints().map((e) => e.up)).to.deep.equal([false, true]);
    expect(provider.endpoints()[0]!.reason).to.equal("ECONNREFUSED");
    expect(changes).to.deep.equal([{ url: firstUrl, up: false, reason: "ECONNREFUSED" }]);
    // Resting: the next call goes straight to the second endpoint.
    await provider.send("eth_blockNumber", []);
    expect(second.requests).to.have.length(2);
  });

  it("never marks an endpoint down for a JSON-RPC error such as 'nonce too low' (OZ Relayer #681)", async function () {
    provider = make();
    first.pendingNonce = 5;
    const key = Wallet.createRandom().signingKey;
    const stale = signEip1559(key, {
      chainId: 31337n,
      nonce: 1,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      gasLimit: 21_000n,
      to: Wallet.createRandom().address,
      value: 0n,
      data: "0x",
    });
    for (let i = 0; i < 5; i++) {
      const thrown = await provider.send("eth_sendRawTransaction", [stale.rawTx]).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(String((thrown as Error).message)).to.match(/nonce too low/);
    }
    expect(provider.endpoints().every((e) => e.up)).to.equal(true);
    expect(changes).to.deep.equal([]);
    expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
    expect(first.calls("eth_blockNumber")).to.have.length(1);
  });

  for (const [name, status, body] of [
    ["an HTTP 502 page", 502, "<html>bad gateway</html>"],
    [
      "a rate limit (429), even with a JSON body",
      429,
      '{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"limit exceeded"}}',
    ],
    ["an answer that is not JSON", 200, "not json"],
  ] as const) {
    it(`fails over on ${name}`, async function () {
      provider = make();
      first.nextRaw = (res) => {
        res.writeHead(status, { "content-type": "text/plain" });
        res.end(body);
      };
      expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
      expect(second.requests).to.have.length(1);
      expect(provider.endpoints()[0]!.up).to.equal(false);
    });
  }

  it("fails over when the first endpoint does not answer in time", async function () {
    provider = make({ timeoutMs: 200 });
    first.nextRaw = () => {}; // hangs
    const started = Date.now();
    expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
    expect(Date.now() - started).to.be.lessThan(2_000);
    expect(provider.endpoints()[0]!.up).to.equal(false);
  });

  it("fails over when the first endpoint answers an error for the whole batch, and says why it is down", async function () {
    provider = make();
    first.nextRaw = (res) =>
      res.end(
        JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32005, message: "batch size limit exceeded" } }),
      );
    const answers = await Promise.all([provider.send("eth_blockNumber", []), provider.send("eth_chainId", [])]);
    expect(answers).to.deep.equal(["0x10", "0x7a69"]);
    expect(second.requests.map((calls) => calls.length)).to.deep.equal([2]);
    expect(provider.endpoints()[0]!.up).to.equal(false);
    expect(provider.endpoints()[0]!.reason).to.include("batch size limit exceeded");
  });

  it("fails over when the first endpoint's answer is over maxAnswerBytes", async function () {
    provider = new RpcProvider([first.url, second.url], { chainId: 31337n, restMs: 60_000, maxAnswerBytes: 1024 });
    first.nextRaw = (res) => res.end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: `0x${"00".repeat(2048)}` }));
    expect(await provider.send("eth_blockNumber", [])).to.equal("0x10");
    expect(provider.endpoints()[0]!.up).to.equal(false);
    expect(provider.endpoints()[0]!.reason).to.include("more than 1024 bytes");
  });

  it("brings a rested endpoint back only once a probe of its chain id succeeds", async function () {
    // Rests long enough that the probe cannot come before the assertion (the fallback's own
    // request to the second endpoint may take a while on a loaded machine).
    provider = make({ restMs: 500 });
    first.nextRaw = (res) => {
      res.writeHead(503);
      res.end();
    };
    await provider.send("eth_blockNumber", []);
    expect(provider.endpoints()[0]!.up).to.equal(false);
    await until(() => provider!.endpoints()[0]!.up);
    expect(first.calls("eth_chainId")).to.have.length(1); // the probe, not a caller's request
    expect(changes.map((c) => c.up)).to.deep.equal([false, true]);
    await provider.send("eth_blockNumber", []);
    expect(first.calls("eth_blockNumber")).to.have.length(2);
  });

  it("keeps an endpoint that serves another chain out of rotation", async function () {
    provider = make({ restMs: 30, chainId: 1n }); // the fake nodes serve 31337
    first.nextRaw = (res) => {
      res.writeHead(503);
      res.end();
    };
    await provider.send("eth_blockNumber", []);
    await until(() => first.calls("eth_chainId").length >= 2);
    expect(provider.endpoints()[0]).to.deep.include({ up: false, reason: "it serves chain 31337, not 1" });
  });

  it("hands every signed transaction to the other endpoints too, and the caller gets the first's answer", async function () {
    provider = make();
    const key = Wallet.createRandom().signingKey;
    const tx = signEip1559(key, {
      chainId: 31337n,
      nonce: 0,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      gasLimit: 21_000n,
      to: Wallet.createRandom().address,
      value: 0n,
      data: "0x",
    });
    const [sent, receipt] = await provider.sendBatch([
      { method: "eth_sendRawTransaction", params: [tx.rawTx] },
      { method: "eth_getTransactionReceipt", params: [tx.txHash] },
    ]);
    expect(sent).to.deep.equal({ result: tx.txHash });
    expect(receipt).to.deep.equal({ result: null });
    await until(() => second.accepted.length === 1);
    expect(second.accepted[0]!.hash).to.equal(tx.txHash);
    expect(second.calls("eth_getTransactionReceipt")).to.have.length(0); // only the transactions are handed on
  });

  it("fails as unreachable when every endpoint is down, and tries them all", async function () {
    provider = make();
    await Promise.all([first.close(), second.close()]);
    const thrown = await provider.send("eth_blockNumber", []).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isChainUnreachable(thrown)).to.equal(true);
    expect(provider.endpoints().map((e) => e.up)).to.deep.equal([false, false]);
    expect(isError(thrown, "UNSUPPORTED_OPERATION")).to.equal(false);
  });

  it("never puts an endpoint's path or query (where API keys live) in what it reports", async function () {
    const firstUrl = first.url;
    provider = new RpcProvider([`${firstUrl}/v3/secret-project-key?key=abc`, second.url], {
      chainId: 31337n,
      restMs: 60_000,
    });
    await first.close();
    await provider.send("eth_blockNumber", []);
    const text = JSON.stringify(provider.endpoints());
    expect(text).to.not.include("secret-project-key");
    expect(text).to.not.include("abc");
    expect(provider.endpoints()[0]!.url).to.equal(`${firstUrl}/…`);
  });
});
