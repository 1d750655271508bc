/**
 * A scripted JSON-RPC node on node:http, for the transport-level tests of RpcProvider and
 * SendQueue: it records every HTTP request and every call, keeps a wallet's pending nonce,
 * and answers eth_sendRawTransaction by `onSend` (accept by default, when the nonce is next).
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { Transaction } from "ethers";

export interface Call {
  method: string;
  params: unknown[];
}

export type SendAnswer = { accept: true } | { error: { code: number; message: string } };

export class FakeRpcNode {
  /** Each HTTP request's calls (one entry per request; a batch has several calls). */
  readonly requests: Call[][] = [];
  /** Accepted transactions, in the order the node took them. */
  readonly accepted: Transaction[] = [];
  /** The wallet's pending nonce: the first one not taken (eth_getTransactionCount answers it). */
  pendingNonce = 0;
  /** The wallet's mined nonce count (eth_getTransactionCount "latest"); unset: the pending one. */
  latestNonce: number | undefined;
  /** Decides each eth_sendRawTransaction; the default takes the next nonce only. */
  onSend: (tx: Transaction, node: FakeRpcNode) => SendAnswer = (tx, node) =>
    tx.nonce === node.pendingNonce
      ? { accept: true }
      : { error: { code: -32000, message: `nonce too ${tx.nonce < node.pendingNonce ? "low" : "high"}` } };
  /** Mines each accepted transaction at once: eth_getTransactionReceipt then answers it (else null). */
  automine = false;
  /** Rewrites the answers to each batch before they are sent (reordered, some left out…). */
  shapeAnswers: ((answers: object[]) => object[]) | undefined;
  /** Replaces the whole answer to the next request (a broken node). */
  nextRaw: ((res: http.ServerResponse) => void) | undefined;
  readonly #server: http.Server;
  readonly #taken = new Set<number>();

  private constructor(server: http.Server) {
    this.#server = server;
  }

  static async start(): Promise<FakeRpcNode> {
    let node!: FakeRpcNode;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => node.#answer(JSON.parse(Buffer.concat(chunks).toString("utf8")), res));
    });
    node = new FakeRpcNode(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return node;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Every call of a method, across requests. */
  calls(method: string): Call[] {
    return this.requests.flat().filter((call) => call.method === method);
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #answer(body: unknown, res: http.ServerResponse): void {
    const batch = Array.isArray(body);
    const payloads = (batch ? body : [body]) as Array<{ id: number; method: string; params: unknown[] }>;
    this.requests.push(payloads.map(({ method, params }) => ({ method, params })));
    if (this.nextRaw) {
      const raw = this.nextRaw;
      this.nextRaw = undefined;
      raw(res);
      return;
    }
    const answers = payloads.map(({ id, method, params }) => {
      const reply = (result: unknown) => ({ jsonrpc: "2.0", id, result });
      switch (method) {
        case "eth_chainId":
          return reply("0x7a69");
        case "eth_blockNumber":
          return reply("0x10");
        case "eth_getTransactionCount": {
          const count = params[1] === "latest" ? (this.latestNonce ?? this.pendingNonce) : this.pendingNonce;
          return reply(`0x${count.toString(16)}`);
        }
        case "eth_getTransactionByHash": {
          const tx = this.accepted.find((accepted) => accepted.hash === params[0]);
          return reply(tx === undefined ? null : { hash: tx.hash, nonce: `0x${tx.nonce.toString(16)}` });
        }
        case "eth_sendRawTransaction": {
          const tx = Transaction.from(params[0] as string);
          const answer = this.onSend(tx, this);
          if ("error" in answer) return { jsonrpc: "2.0", id, error: answer.error };
          this.accepted.push(tx);
          // Like a mempool: the pending count stops at the first missing nonce.
          this.#taken.add(tx.nonce);
          while (this.#taken.has(this.pendingNonce)) this.pendingNonce += 1;
          return reply(tx.hash);
        }
        case "eth_getTransactionReceipt": {
          const mined = this.automine && this.accepted.some((tx) => tx.hash === params[0]);
          return reply(
            mined
              ? {
                  transactionHash: params[0],
                  status: "0x1",
                  logs: [],
                  blockNumber: "0x10",
                  blockHash: `0x${"b1".repeat(32)}`,
                }
              : null,
          );
        }
        default:
          return { jsonrpc: "2.0", id, error: { code: -32601, message: `${method} is not scripted` } };
      }
    });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(batch ? (this.shapeAnswers?.(answers) ?? answers) : answers[0]));
  }
}
