/**
 * One reading of the wallet watch: each exchange wallet's native balance (through the call
 * simulator's nativeBalance), its token and stable-coin balances, and the swap's reserves of each
 * coin, as reads that ride the call batcher's next eth_call (call-batcher.ts: the one a trade's
 * proof goes out in), or go out alone when nothing else does. With the wallets' nonces when
 * asked: eth_getTransactionCount each, sent in the same tick, so the provider puts them in the
 * same JSON-RPC batch as the eth_call. A node without state overrides (no simulator) gets the
 * plain calls instead: eth_getBalance and eth_calls of balanceOf.
 */
import { Interface, type JsonRpcApiProvider } from "ethers";

import { callSimulatorAbi } from "../../../gen/abi/index.js";
import { type CallBatcher, type ReadAnswer, SIMULATOR_ADDRESS } from "../rpc/index.js";
import { ERC20_ABI } from "../tx/index.js";
import type { WatchedAsset } from "./options.js";

const erc20 = new Interface(ERC20_ABI);
const simulator = new Interface(callSimulatorAbi);

/** What a reading found, at the block its eth_call ran on (undefined when it was plain calls). */
export interface Reading {
  block: number | undefined;
  /** By lower-case wallet, by asset symbol ("native" too): base units. */
  wallets: Map<string, Map<string, bigint>>;
  /** The swap's reserves, by coin symbol: base units. */
  reserves: Map<string, bigint>;
  /** By lower-case wallet: the nonce of its next transaction, as of the latest block; when asked. */
  nonces: Map<string, number>;
}

export interface ReadingPlan {
  provider: JsonRpcApiProvider;
  calls: CallBatcher;
  /** Lower-case addresses. */
  wallets: readonly string[];
  /** The native coin, the token and the coins: what each wallet is read for. */
  walletAssets: readonly WatchedAsset[];
  swap: string;
  /** The coins whose reserves the swap is read for. */
  reserveAssets: readonly WatchedAsset[];
}

interface Read {
  wallet: string | undefined;
  asset: WatchedAsset;
  answer: Promise<ReadAnswer>;
}

/**
 * A reading: its reads ride the call batcher's next eth_call (`alone`: sent now, in a batch of
 * their own unless one is going out), and the nonces are asked with them when `nonces`.
 */
export async function read(plan: ReadingPlan, alone: boolean, nonces: boolean): Promise<Reading> {
  const { calls } = plan;
  const reads: Read[] = [];
  const ride = (wallet: string | undefined, holder: string, asset: WatchedAsset) => {
    const answer =
      asset.address === undefined
        ? calls.batching
          ? calls.ride(SIMULATOR_ADDRESS, simulator.encodeFunctionData("nativeBalance", [holder]))
          : plan.provider
              .getBalance(holder)
              .then((wei): ReadAnswer => ({ data: `0x${wei.toString(16).padStart(64, "0")}` }))
        : calls.ride(asset.address, erc20.encodeFunctionData("balanceOf", [holder]));
    reads.push({ wallet, asset, answer });
  };
  for (const wallet of plan.wallets) for (const asset of plan.walletAssets) ride(wallet, wallet, asset);
  for (const asset of plan.reserveAssets) ride(undefined, plan.swap, asset);
  const counts = nonces ? plan.wallets.map((wallet) => plan.provider.getTransactionCount(wallet, "latest")) : [];
  if (alone) calls.flushRiders();
  const [answers, counted] = await Promise.all([Promise.all(reads.map((r) => r.answer)), Promise.all(counts)]);
  const reading: Reading = { block: undefined, wallets: new Map(), reserves: new Map(), nonces: new Map() };
  answers.forEach((answer, i) => {
    const { wallet, asset } = reads[i]!;
    const units = BigInt(answer.data === "0x" ? 0 : answer.data.slice(0, 66));
    if (answer.block !== undefined) reading.block = Math.max(reading.block ?? 0, answer.block);
    if (wallet === undefined) reading.reserves.set(asset.symbol, units);
    else {
      const balances = reading.wallets.get(wallet) ?? new Map<string, bigint>();
      balances.set(asset.symbol, units);
      reading.wallets.set(wallet, balances);
    }
  });
  counted.forEach((nonce, i) => {
    reading.nonces.set(plan.wallets[i]!, nonce);
  });
  return reading;
}
