/** RpcProvider (adapters/chain/rpc/rpc-provider.ts) against a scripted JSON-RPC node. */
import { expect } from "chai";
import { isError } from "ethers";

import { RpcProvider } from "../../../adapters/chain/index.js";
import { isChainUnreachable } from "../../../adapters/chain/rpc/index.js";
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

  it("refuses a URL that is not http, https, ws or wss", function () {
    expect(() => new RpcProvider("ftp://127.0.0.1:8545")).to.throw(TypeError, /RPC_URL/);
  });

  /** How `call` ended: its error, "answered", or "still waiting" after `ms`. */
  const within = (call: Promise<unknown>, ms: number) =>
    Promise.race([
      call.then(
        () => "answered",
        (error: unknown) => error,
      ),
      new Promise((resolve) => setTimeout(() => resolve("still waiting"), ms).unref()),
    ]);

  it("times out a node that trickles its answer a byte at a time: the deadline is the whole request's", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, timeoutMs: 500 });
    node.nextRaw = (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const trickle = setInterval(() => res.write(" "), 100); // JSON whitespace, never the answer
      res.on("close", () => clearInterval(trickle));
    };
    const started = Date.now();
    const thrown = await within(provider.send("eth_blockNumber", []), 3_000);
    expect(thrown).to.not.equal("still waiting");
    expect(isError(thrown, "TIMEOUT")).to.equal(true);
    expect(isChainUnreachable(thrown)).to.equal(true);
    expect(Date.now() - started).to.be.lessThan(1_500);
  });

  it("refuses an answer over maxAnswerBytes as a failure of the endpoint, whether its length is declared or not", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, maxAnswerBytes: 64 * 1024 });
    const big = JSON.stringify({ jsonrpc: "2.0", id: 1, result: `0x${"ab".repeat(40_000)}` });
    for (const declared of [true, false]) {
      node.nextRaw = (res) => {
        res.writeHead(200, {
          "content-type": "application/json",
          ...(declared ? { "content-length": big.length } : {}),
        });
        res.end(big);
      };
      const thrown = await within(provider.send("eth_blockNumber", []), 3_000);
      expect(isError(thrown, "SERVER_ERROR"), String(thrown)).to.equal(true);
      expect(isChainUnreachable(thrown)).to.equal(true);
      expect((thrown as Error).message).to.include("more than 65536 bytes");
    }
    // Just under the cap, it is an answer.
    node.nextRaw = (res) => res.end(JSON.stringify({ jsonrpc: "2.0", id: 3, result: `0x${"ab".repeat(32_000)}` }));
    expect(await provider.send("eth_blockNumber", [])).to.have.length(64_002);
  });

  it("stops reading an endless answer at the default cap (a few MiB), long before the deadline", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, timeoutMs: 60_000 });
    node.nextRaw = (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"jsonrpc":"2.0","id":1,"result":"0x');
      const chunk = "ab".repeat(32 * 1024);
      const flood = setInterval(() => res.write(chunk), 1);
      res.on("close", () => clearInterval(flood));
    };
    const thrown = await within(provider.send("eth_blockNumber", []), 10_000);
    expect(isError(thrown, "SERVER_ERROR"), String(thrown)).to.equal(true);
    expect((thrown as Error).message).to.match(/more than \d+ bytes/);
  });

  describe("when the node answers an error for the whole request instead of an answer per call", function () {
    const batchError = { jsonrpc: "2.0", id: null, error: { code: -32005, message: "batch size limit exceeded" } };
    beforeEach(function () {
      node.nextRaw = (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(batchError));
      };
    });

    it("fails each call of the batch with that error, as the transport's failure", async function () {
      provider = new RpcProvider(node.url, { chainId: 31337n });
      const outcomes = await Promise.allSettled([
        provider.send("eth_blockNumber", []),
        provider.send("eth_chainId", []),
        provider.send("eth_getTransactionCount", ["0x0000000000000000000000000000000000000001", "pending"]),
      ]);
      expect(node.requests.map((calls) => calls.length)).to.deep.equal([3]);
      for (const outcome of outcomes) {
        expect(outcome.status).to.equal("rejected");
        const reason = (outcome as PromiseRejectedResult).reason as Error;
        expect(reason.message).to.include("batch size limit exceeded");
        expect(reason.message).to.include("-32005");
        expect(isChainUnreachable(reason)).to.equal(true);
      }
    });

    it("fails sendBatch with that error", async function () {
      provider = new RpcProvider(node.url, { chainId: 31337n });
      const thrown = await provider
        .sendBatch([
          { method: "eth_blockNumber", params: [] },
          { method: "eth_chainId", params: [] },
        ])
        .then(
          () => undefined,
          (error: unknown) => error as Error,
        );
      expect(thrown?.message).to.include("batch size limit exceeded");
    });

    it("fails a lone call with it too (a node that could not read the request answers id null)", async function () {
      provider = new RpcProvider(node.url, { chainId: 31337n });
      node.nextRaw = (res) =>
        res.end(JSON.stringify({ ...batchError, error: { code: -32700, message: "parse error" } }));
      const thrown = await provider.send("eth_blockNumber", []).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      expect(thrown?.message).to.include("parse error");
      expect(isError(thrown, "BAD_DATA")).to.equal(false);
    });
  });

  it("sendBatch splits its calls into requests of at most batchMaxCount, in order, one after the other", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, batchMaxCount: 2 });
    node.pendingNonce = 3;
    const outcomes = await provider.sendBatch([
      { method: "eth_blockNumber", params: [] },
      { method: "eth_chainId", params: [] },
      { method: "eth_getTransactionCount", params: ["0x0000000000000000000000000000000000000001", "pending"] },
      { method: "eth_unscripted", params: [] },
      { method: "eth_chainId", params: [] },
    ]);
    expect(node.requests.map((calls) => calls.map((call) => call.method))).to.deep.equal([
      ["eth_blockNumber", "eth_chainId"],
      ["eth_getTransactionCount", "eth_unscripted"],
      ["eth_chainId"],
    ]);
    expect(outcomes.map((outcome) => ("result" in outcome ? outcome.result : "error"))).to.deep.equal([
      "0x10",
      "0x7a69",
      "0x3",
      "error",
      "0x7a69",
    ]);
  });

  it("sendBatch answers the calls of a later request that failed, and those after it, with that failure", async function () {
    provider = new RpcProvider(node.url, { chainId: 31337n, batchMaxCount: 2 });
    let requests = 0;
    const answer = node.shapeAnswers;
    node.shapeAnswers = (answers) => {
      requests += 1;
      if (requests === 1)
        node.nextRaw = (res) => {
          res.writeHead(502);
          res.end();
        };
      return answer?.(answers) ?? answers;
    };
    const outcomes = await provider.sendBatch([
      { method: "eth_blockNumber", params: [] },
      { method: "eth_chainId", params: [] },
      { method: "eth_blockNumber", params: [] },
      { method: "eth_chainId", params: [] },
      { method: "eth_blockNumber", params: [] },
    ]);
    expect(outcomes.slice(0, 2)).to.deep.equal([{ result: "0x10" }, { result: "0x7a69" }]);
    for (const outcome of outcomes.slice(2)) {
      expect("error" in outcome && outcome.error.message).to.include("HTTP 502");
    }
    expect(node.requests).to.have.length(3 - 1); // the third request is never sent
  });
});
