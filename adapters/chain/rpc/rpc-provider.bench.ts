/**
 * Decision 0004 (docs/decisions/0004-json-rpc-provider.md): the event loop's CPU per JSON-RPC call,
 * `RpcProvider` against ethers' `JsonRpcProvider` (`FetchRequest` over Node's keep-alive agent),
 * on the same local node:
 * - single: one `eth_blockNumber` on a keep-alive connection, each awaited, through the transport
 *   (`_send`): what a lone call costs after both have held it for the same stall;
 * - burst: 50 `eth_call`s (a sell's preflight each) made at once through `send`, with the same
 *   batching settings (a 1 ms stall, at most 100 calls a request), so one request each.
 * Remove the provider when ethers' costs within 10 % of it in both: a single call, and a call of
 * the burst, where ethers' batch is quadratic (it re-serializes the growing batch per call added
 * and finds each answer by a linear scan).
 *
 * The node is a stub in a worker thread that answers at once, so no chain is needed and its
 * work is not counted: the clock is the main thread's CPU time, which also leaves out the
 * batching stall's wait. Singles are timed at `_send`, below the stall, because a thread woken
 * from the stall's sleep on a busy machine runs cold, which costs more CPU than the call itself
 * and hides the difference.
 * `npm run bench:micro -- rpc-provider`.
 */
import { Worker } from "node:worker_threads";

import { Interface, JsonRpcProvider, Network } from "ethers";

import { compare, formatNs } from "../../shared/micro-bench.js";
import { SWAP_ABI } from "../tx/index.js";
import { RpcProvider } from "./rpc-provider.js";

const BURST = 50;
const SINGLES = 400;

/** A JSON-RPC node that answers every call at once, with a word of zeros (CommonJS, for an eval'd worker). */
const NODE = `
const http = require("node:http");
const { parentPort } = require("node:worker_threads");
const RESULT = "0x" + "0".repeat(64);
const answer = (call) => ({ jsonrpc: "2.0", id: call.id, result: RESULT });
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const text = JSON.stringify(Array.isArray(body) ? body.map(answer) : answer(body));
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  });
});
server.listen(0, "127.0.0.1", () => parentPort.postMessage(server.address().port));
`;

const node = new Worker(NODE, { eval: true });
const port = await new Promise<number>((resolve, reject) => {
  node.once("message", resolve);
  node.once("error", reject);
});
const url = `http://127.0.0.1:${port}`;

const network = Network.from(1n);
const ethers = new JsonRpcProvider(url, network, {
  staticNetwork: network,
  cacheTimeout: -1,
  batchStallTime: 1,
  batchMaxCount: 100,
});
const ours = new RpcProvider(url, { chainId: 1n, batchStallMs: 1, batchMaxCount: 100 });

const BLOCK_NUMBER = { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] } as const;

/** A sell's preflight: TokenSwap.sell called on the latest block. */
const PREFLIGHT = [
  {
    to: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    data: new Interface(SWAP_ABI).encodeFunctionData("sell", [
      "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
      10n ** 21n,
      "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
      99n * 10n ** 7n,
      1_900_000_000n,
    ]),
  },
  "latest",
];
/** Single calls one after the other, 400 per sample: the CPU clock moves in steps of a few ms here, so a sample must last tens of them. */
const singles = async (provider: JsonRpcProvider | RpcProvider) => {
  for (let i = 0; i < SINGLES; i++) await provider._send(BLOCK_NUMBER);
};
const burst = (provider: JsonRpcProvider | RpcProvider) =>
  Promise.all(Array.from({ length: BURST }, () => provider.send("eth_call", PREFLIGHT)));

const perCall = (ns: number, calls: number) => formatNs(ns / calls);

try {
  await compare({
    record: "0004",
    subject: "adapters/chain/rpc/rpc-provider.ts",
    clock: "cpu",
    time: 600,
    // The single call's ratio sits nearer its threshold than the others: more rounds to pick the best from.
    rounds: 5,
    cases: {
      ethersSingle: { label: "ethers single", run: () => singles(ethers) },
      oursSingle: { label: "ours single", run: () => singles(ours) },
      ethersBurst: { label: `ethers burst of ${BURST}`, run: () => burst(ethers) },
      oursBurst: { label: `ours burst of ${BURST}`, run: () => burst(ours) },
    },
    verdict: ({ ethersSingle, oursSingle, ethersBurst, oursBurst }) => {
      const single = ethersSingle / oursSingle;
      const inBurst = ethersBurst / oursBurst;
      return {
        figure: `ethers ÷ ours = ${single.toFixed(2)} a single call, ${inBurst.toFixed(2)} a call of a burst of ${BURST}`,
        threshold: "remove at ≤ 1.10 for both",
        remove: single <= 1.1 && inBurst <= 1.1,
        detail:
          `a single call: ethers ${perCall(ethersSingle, SINGLES)}, ours ${perCall(oursSingle, SINGLES)}; ` +
          `a call of a burst: ethers ${perCall(ethersBurst, BURST)}, ours ${perCall(oursBurst, BURST)} (CPU)`,
      };
    },
  });
} finally {
  ethers.destroy();
  ours.destroy();
  await node.terminate();
}
