/**
 * RpcProvider (adapters/chain/rpc/rpc-provider.ts) against ethers' own JsonRpcProvider, on the same
 * node, for every call the service makes: the same results and the same errors, called one at a
 * time, all at once (one batch each), and through ethers' methods. On Hardhat's EDR (the
 * embedded chain, served over HTTP) and on an independent node, Foundry's anvil; on anvil also
 * with RpcProvider over anvil's WebSocket (ethers' provider stays on HTTP).
 */
import { expect } from "chai";
import { Interface, JsonRpcProvider, Wallet, type JsonRpcApiProvider } from "ethers";
import { pino } from "pino";

import { ERC20_ABI, RpcProvider, type DeploymentAddresses } from "../../../adapters/chain/index.js";
import { signEip1559 } from "../../../adapters/chain/tx/index.js";
import { EXCHANGE_ACCOUNT, hardhatAccount, startEmbeddedChain } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil } from "../../helpers/anvil.js";

interface Node {
  url: string;
  /** Where RpcProvider connects, when not `url` (a ws:// URL of the same node). */
  oursUrl?: string;
  addresses: DeploymentAddresses;
  close(): Promise<void>;
}

const NODES: Array<[string, () => Promise<Node>]> = [
  [
    "Hardhat's EDR",
    async () => {
      const chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
      return { url: chain.rpcUrl, addresses: chain.addresses, close: () => chain.close() };
    },
  ],
  [
    "anvil",
    async () => {
      const anvil = await startAnvil();
      const addresses = await deployOnAnvil(anvil, 0); // 0: no interval mining…
      await anvil.rpc("evm_setAutomine", [true]); // …a block per transaction, as on EDR
      return { url: anvil.url, addresses, close: () => anvil.stop() };
    },
  ],
  [
    "anvil, RpcProvider over its WebSocket",
    async () => {
      const anvil = await startAnvil();
      const addresses = await deployOnAnvil(anvil, 0);
      await anvil.rpc("evm_setAutomine", [true]);
      return { url: anvil.url, oursUrl: `ws://127.0.0.1:${anvil.port}`, addresses, close: () => anvil.stop() };
    },
  ],
];

const token = new Interface([...ERC20_ABI, "function transfer(address to, uint256 value) returns (bool)"]);
const exchange = new Wallet(hardhatAccount(EXCHANGE_ACCOUNT).privateKey);
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

/** What a call came to, comparable across providers: its result, or its error without the request ids. */
async function outcome(call: Promise<unknown>): Promise<unknown> {
  try {
    const result = await call;
    return {
      result:
        typeof (result as { toJSON?: unknown })?.toJSON === "function"
          ? (result as { toJSON(): unknown }).toJSON()
          : result,
    };
  } catch (error) {
    const { code, shortMessage, data, reason } = error as {
      code?: unknown;
      shortMessage?: unknown;
      data?: unknown;
      reason?: unknown;
    };
    return { error: { code, shortMessage, data, reason } };
  }
}

for (const [name, start] of NODES) {
  describe(`RpcProvider and ethers' JsonRpcProvider on the same node (${name})`, function () {
    this.timeout(120_000);
    let node: Node;
    let ours: RpcProvider;
    let theirs: JsonRpcProvider;
    /** Every call the service makes that reads, with its parameters as the service sends them. */
    let reads: Array<[string, unknown[]]>;

    before(async function () {
      node = await start();
      // The same provider settings (no cache, the network detected once): only the transport differs.
      ours = new RpcProvider(node.oursUrl ?? node.url);
      theirs = new JsonRpcProvider(node.url, undefined, { cacheTimeout: -1 });
      const transfer = {
        from: exchange.address,
        to: node.addresses.token,
        data: token.encodeFunctionData("transfer", [CUSTOMER, 1n]),
      };
      reads = [
        ["eth_chainId", []],
        ["eth_blockNumber", []],
        ["eth_getBlockByNumber", ["latest", false]],
        ["eth_getBlockByNumber", ["0x1", false]],
        ["eth_getBlockByNumber", ["0xffffff", false]], // not mined: null
        ["eth_getTransactionCount", [exchange.address, "latest"]],
        ["eth_getTransactionCount", [exchange.address, "pending"]],
        [
          "eth_call",
          [{ to: node.addresses.token, data: token.encodeFunctionData("balanceOf", [exchange.address]) }, "latest"],
        ],
        ["eth_call", [{ ...transfer, gas: "0x30000" }, "latest"]],
        // A transfer of more than the wallet holds: a revert, with its data.
        ["eth_call", [{ ...transfer, data: token.encodeFunctionData("transfer", [CUSTOMER, 2n ** 200n]) }, "latest"]],
        ["eth_estimateGas", [transfer, "latest"]],
        ["eth_feeHistory", ["0x5", "latest", [50]]],
        ["eth_maxPriorityFeePerGas", []],
        ["eth_getTransactionReceipt", [`0x${"00".repeat(32)}`]],
        ["eth_getTransactionByHash", [`0x${"00".repeat(32)}`]],
      ];
    });

    after(async function () {
      ours?.destroy();
      theirs?.destroy();
      await node?.close();
    });

    it("answers each read the same, one call at a time", async function () {
      for (const [method, params] of reads) {
        expect(await outcome(ours.send(method, params)), method).to.deep.equal(
          await outcome(theirs.send(method, params)),
        );
      }
    });

    it("answers the same when all of them are made at once (one batch each)", async function () {
      const all = (provider: JsonRpcApiProvider) =>
        Promise.all(reads.map(([method, params]) => outcome(provider.send(method, params))));
      const [a, b] = [await all(ours), await all(theirs)];
      expect(a).to.deep.equal(b);
      expect(a.filter((answer) => "error" in (answer as object))).to.have.length(1); // only the revert
    });

    it("answers the same through ethers' methods", async function () {
      const calls = (provider: JsonRpcApiProvider) => [
        provider.getNetwork().then((network) => network.chainId),
        provider.getBlockNumber(),
        provider.getBlock("latest"),
        provider.getTransactionCount(exchange.address, "pending"),
        provider.call({ to: node.addresses.token, data: token.encodeFunctionData("balanceOf", [exchange.address]) }),
        provider.estimateGas({
          from: exchange.address,
          to: node.addresses.token,
          data: token.encodeFunctionData("transfer", [CUSTOMER, 1n]),
        }),
        provider.call({
          from: exchange.address,
          to: node.addresses.token,
          data: token.encodeFunctionData("transfer", [CUSTOMER, 2n ** 200n]),
        }),
      ];
      const a = await Promise.all(calls(ours).map(outcome));
      const b = await Promise.all(calls(theirs).map(outcome));
      expect(a).to.deep.equal(b);
    });

    it("sends raw transactions, finds their receipts and the transactions the same, and refuses a repeat the same", async function () {
      const { chainId } = await theirs.getNetwork();
      const nonce = await theirs.getTransactionCount(exchange.address, "pending");
      const baseFee = (await theirs.getBlock("latest"))!.baseFeePerGas ?? 0n;
      const [first, second] = [0, 1].map((i) =>
        signEip1559(exchange.signingKey, {
          chainId,
          nonce: nonce + i,
          maxPriorityFeePerGas: 1_000_000_000n,
          maxFeePerGas: 2n * baseFee + 1_000_000_000n,
          gasLimit: 100_000n,
          to: node.addresses.token,
          value: 0n,
          data: token.encodeFunctionData("transfer", [CUSTOMER, 1n + BigInt(i)]),
        }),
      ) as [ReturnType<typeof signEip1559>, ReturnType<typeof signEip1559>];
      expect(await ours.send("eth_sendRawTransaction", [first.rawTx])).to.equal(first.txHash);
      expect(await theirs.send("eth_sendRawTransaction", [second.rawTx])).to.equal(second.txHash);
      for (const { txHash } of [first, second]) {
        for (const method of ["eth_getTransactionReceipt", "eth_getTransactionByHash"]) {
          const answer = await outcome(ours.send(method, [txHash]));
          expect(answer, method).to.deep.equal(await outcome(theirs.send(method, [txHash])));
          expect((answer as { result: unknown }).result, method).to.be.an("object"); // mined: automine
        }
        expect(await outcome(ours.getTransactionReceipt(txHash))).to.deep.equal(
          await outcome(theirs.getTransactionReceipt(txHash)),
        );
        expect(await outcome(ours.getTransaction(txHash))).to.deep.equal(await outcome(theirs.getTransaction(txHash)));
      }
      const repeat = await outcome(ours.send("eth_sendRawTransaction", [first.rawTx]));
      expect(repeat).to.have.property("error");
      expect(repeat).to.deep.equal(await outcome(theirs.send("eth_sendRawTransaction", [first.rawTx])));
    });
  });
}
