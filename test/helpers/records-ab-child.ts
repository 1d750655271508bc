/**
 * Run by test/scripts/bench-records.test.ts as the records bench runs its service process
 * (`--import tsx --import scripts/bench-records/register.ts`): it calls what the four switched
 * modules export, with each switch off and on, and prints what came back as one JSON line. The
 * scripted node below records the body of every request it is sent.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { Interface } from "ethers";

import { RpcProvider } from "../../adapters/chain/rpc/index.js";
import { SWAP_ABI, rawKeySigner, signEip1559With, staticCallEncoder } from "../../adapters/chain/tx/index.js";
import { tallied, useLibraryFor } from "../../adapters/shared/records.ab.js";

const KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const DIGEST = new Uint8Array(32).fill(7);
const TX = {
  chainId: 31337n,
  nonce: 5,
  maxPriorityFeePerGas: 1_500_000_000n,
  maxFeePerGas: 42_000_000_000n,
  gasLimit: 180_000n,
  to: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  value: 0n,
  data: "0x1234",
};
const SELL = [
  "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  10n ** 21n,
  "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
  99n,
  1_900_000_000n,
] as const;

/** A node that answers eth_blockNumber with 0x2a and every other call with an execution revert. */
const bodies: string[] = [];
const node = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    bodies.push(body);
    const parsed = JSON.parse(body) as { id: number; method: string } | Array<{ id: number; method: string }>;
    const answer = (call: { id: number; method: string }) =>
      call.method === "eth_blockNumber"
        ? { jsonrpc: "2.0", id: call.id, result: "0x2a" }
        : { jsonrpc: "2.0", id: call.id, error: { code: 3, message: "execution reverted", data: "0x" } };
    const text = JSON.stringify(Array.isArray(parsed) ? parsed.map(answer) : answer(parsed));
    res.writeHead(200, { "content-type": "application/json" }).end(text);
  });
});
await new Promise<void>((resolve) => node.listen(0, "127.0.0.1", resolve));
const provider = new RpcProvider(`http://127.0.0.1:${(node.address() as AddressInfo).port}`, { chainId: 31337n });

const signer = rawKeySigner(KEY);
const encodeSell = staticCallEncoder(new Interface(SWAP_ABI), "sell");

/** What each switched module answers in the switch's present position, and the request bodies the node saw. */
async function answers() {
  bodies.length = 0;
  const signature = await signer.signDigest(DIGEST);
  const [blockNumber, batch] = await Promise.all([
    provider.send("eth_blockNumber", []),
    provider.sendBatch([
      { method: "eth_blockNumber", params: [] },
      { method: "eth_call", params: [{ to: TX.to, data: "0x" }, "latest"] },
    ]),
  ]);
  return {
    signature: signature.serialized,
    signed: await signEip1559With(signer, TX),
    calldata: encodeSell(SELL),
    blockNumber,
    batch: batch.map((outcome) =>
      "error" in outcome ? { error: (outcome.error as { code?: string }).code } : outcome,
    ),
    bodies: [...bodies],
  };
}

const off = await answers();
useLibraryFor(["0001", "0002", "0003", "0004"]);
const on = await answers();
useLibraryFor([]);
provider.destroy();
node.close();
const counted = Object.fromEntries(Object.entries(tallied()).map(([name, { calls }]) => [name, calls]));
process.stdout.write(`${JSON.stringify({ off, on, counted })}\n`);
