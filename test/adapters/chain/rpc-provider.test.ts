/** RpcProvider (adapters/chain/rpc-provider.ts) against a scripted JSON-RPC node. */
import { expect } from "chai";
import { isError } from "ethers";

import { RpcProvider } from "../../../adapters/chain/index.js";
import { isChainUnreachable } from "../../../adapters/chain/chain-errors.js";
import { FakeRpcNode } from "../../helpers/fake-rpc.js";

describe("RpcProvider", function () {
  let node: FakeRpcNode;
  let provider: RpcProvider | undefined;

  beforeEach(async function () {
    node = await FakeRpcNode.start();
  });

  afterEach(async function () {
    provider?.destroy();
    await node.close();
  });

  it("sends calls made together in one request and gives each its own answer", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n });
    node.pendingNonce = 5;
    const answers = await Promise.all([
      provider.send("eth_blockNumber", []),
      provider.send("eth_getTransactionCount", ["0x0000000000000000000000000000000000000001", "pending"]),
      provider.send("eth_blockNumber", []),
    ]);
    expect(answers).to.deep.equal(["0x10", "0x5", "0x10"]);
    expect(node.requests).to.have.length(1);
    expect(node.requests[0]!.map((c) => c.method)).to.deep.equal([
      "eth_blockNumber",
      "eth_getTransactionCount",
      "eth_blockNumber",
    ]);
  });

  it("matches answers to calls by id, whatever their order, and fails only a call left unanswered", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n });
    node.pendingNonce = 9;
    node.shapeAnswers = (answers) => answers.reverse().slice(1); // the last call's answer is missing
    const outcomes = await Promise.allSettled([
      provider.send("eth_chainId", []),
      provider.send("eth_getTransactionCount", ["0x0000000000000000000000000000000000000001", "pending"]),
      provider.send("eth_unscripted", []),
      provider.send("eth_blockNumber", []),
    ]);
    expect(node.requests).to.have.length(1);
    expect(outcomes.slice(0, 2)).to.deep.equal([
      { status: "fulfilled", value: "0x7a69" },
      { status: "fulfilled", value: "0x9" },
    ]);
    expect(String((outcomes[2] as PromiseRejectedResult).reason)).to.match(/eth_unscripted is not scripted/);
    expect(isError((outcomes[3] as PromiseRejectedResult).reason, "BAD_DATA")).to.equal(true);
  });

  it("splits a burst into requests of at most batchMaxCount calls", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, batchMaxCount: 2 });
    const answers = await Promise.all(Array.from({ length: 5 }, () => provider!.send("eth_blockNumber", [])));
    expect(answers).to.deep.equal(Array.from({ length: 5 }, () => "0x10"));
    expect(node.requests.map((calls) => calls.length)).to.deep.equal([2, 2, 1]);
  });

  it("refuses calls, queued or new, once destroyed", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, batchStallMs: 50 });
    const queued = provider.send("eth_blockNumber", []);
    provider.destroy();
    for (const call of [queued, provider.send("eth_blockNumber", [])]) {
      expect(
        isError(
          await call.then(
            () => undefined,
            (error: unknown) => error,
          ),
          "UNSUPPORTED_OPERATION",
        ),
      ).to.equal(true);
    }
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(node.requests).to.have.length(0);
    provider = undefined;
  });

  it("sends one call per request when batching is off", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, batchMaxCount: 1 });
    await Promise.all([provider.send("eth_blockNumber", []), provider.send("eth_blockNumber", [])]);
    expect(node.requests.map((calls) => calls.length)).to.deep.equal([1, 1]);
  });

  it("sendBatch keeps the order and answers each call with its result or its error", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n });
    const outcomes = await provider.sendBatch([
      { method: "eth_blockNumber", params: [] },
      { method: "eth_unscripted", params: [] },
      { method: "eth_chainId", params: [] },
    ]);
    expect(node.requests).to.have.length(1);
    expect(outcomes[0]).to.deep.equal({ result: "0x10" });
    expect("error" in outcomes[1]! && outcomes[1].error.message).to.match(/eth_unscripted is not scripted/);
    expect(outcomes[2]).to.deep.equal({ result: "0x7a69" });
    expect(await provider.sendBatch([])).to.deep.equal([]);
  });

  it("fails with a server error that counts as unreachable, and never names the URL, on a non-JSON answer", async function () {
    const secretUrl = `${node.url}/v3/secret-project-key`;
    provider = new RpcProvider(secretUrl, { chainId: 31337n });
    node.nextRaw = (res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end("<html>bad gateway</html>");
    };
    const thrown = await provider.send("eth_blockNumber", []).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isError(thrown, "SERVER_ERROR")).to.equal(true);
    expect(isChainUnreachable(thrown)).to.equal(true);
    expect(String((thrown as Error).message)).to.not.include("secret-project-key");
  });

  it("times out a node that does not answer", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, timeoutMs: 200 });
    node.nextRaw = () => {}; // never answers
    const thrown = await provider.send("eth_blockNumber", []).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isError(thrown, "TIMEOUT")).to.equal(true);
    expect(isChainUnreachable(thrown)).to.equal(true);
  });

  it("refuses a URL that is not http or https", function () {
    expect(() => new RpcProvider("ws://127.0.0.1:8545")).to.throw(TypeError, /RPC_URL/);
  });
});
