/** What the block watcher (block-watcher.ts) is built with, and what a waiter learns at a look. */
import type { JsonRpcApiProvider } from "ethers";

import { RpcProvider, type PushedHeads } from "../rpc/index.js";
import type { BlockTimes } from "./block-times.js";
import type { ReceiptReaderOptions } from "./receipt-reader.js";
import type { RpcReceipt } from "./web3-receipt.js";

export interface BlockWatcherOptions {
  provider: JsonRpcApiProvider;
  /** The least time between two asks for the head, in ms, and the block time until one is seen. Default 1000. */
  intervalMs?: number;
  /** How long an expected transaction nobody waits for is kept, in ms. Default 10 minutes. */
  keepMs?: number;
  /** Heads pushed by the node (RpcProvider.heads with a WebSocket endpoint; `headsOf`); unset: polled. */
  heads?: PushedHeads | undefined;
  /** While subscribed, how long without a pushed header before the head is asked for, in ms. Default 30,000. */
  safetyPollMs?: number;
  /** Where each head looked at is recorded, for the chain's block time (block-times.ts). */
  times?: BlockTimes;
  /** Told of each block a look read all the receipts of, with them (the wallet watch: no call of its own). */
  onBlock?: ReceiptReaderOptions["onBlock"];
}

/** The heads `provider` pushes: RpcProvider's with a WebSocket endpoint, else none (the watcher polls). */
export function headsOf(provider: JsonRpcApiProvider): PushedHeads | undefined {
  return provider instanceof RpcProvider ? provider.heads : undefined;
}

/** What a waiter learns at a look: the head's number, and the receipts of its transactions found so far. */
export interface Look {
  head: number;
  receipts: Map<string, RpcReceipt>;
}
