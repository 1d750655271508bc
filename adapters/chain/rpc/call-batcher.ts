/**
 * Everything a tick asks of the latest block, in one eth_call: the reads (balances, allowances,
 * reserves, feeds) and the trades' proofs (an eth_call of the swap call from its wallet, with the
 * gas limit it will be signed with). A hosted node bills per call, so a trade costs one eth_call
 * instead of four or five, and a burst of them a handful.
 *
 * How: contracts/simulation/CallSimulator.sol, never deployed. Its runtime code is placed by the
 * eth_call's state override (the third parameter, which geth documents and anvil and Hardhat's
 * EDR take: the tests run on both) at a made-up address, SIMULATOR_ADDRESS, and at each wallet
 * with a proof in the call; then SIMULATOR.simulate(reads, proofs) runs:
 * - a read is a static call from SIMULATOR: the same bytes an eth_call of it returns;
 * - a proof is `wallet.forward(target, data, gas)`, so that the swap sees the wallet as msg.sender,
 *   inside a call that always reverts and carries the outcome out: each proof runs on the
 *   block's state as an eth_call of its own would, and no proof sees another's effects. Its call
 *   gets exactly the transaction's gas limit less the intrinsic cost (21,000 plus the calldata's),
 *   which is what an eth_call with `gas: limit` gives it: "it succeeds within the limit" means
 *   what it meant there.
 *
 * Batching: calls made while no batch is in flight go out together at the next macrotask (the
 * calls a trade makes in one tick, and those of every trade arriving with it); calls made while
 * one is in flight wait for it and go in the next, so each is answered by a call sent after it
 * was made (never by an answer older than the call). At most `maxEntries` (64) a batch; identical
 * reads in a batch are asked once. Reads that ride (`ride`: the wallet watch's balances) send
 * nothing of their own: they wait for the next batch that goes out anyway, in the room it has
 * left, or for `flushRiders`.
 *
 * What a batch cannot answer as an eth_call of its own would is asked on its own, exactly as
 * before this class: a read that fails (its error, and a feed whose access rule looks at the
 * caller, are then the node's own), a proof the simulation could not give all of its gas, and
 * every call of a batch the node refused for a reason other than the network. A node that says
 * it does not take state overrides (JSON-RPC -32602 or -32601, or a message naming overrides), or
 * that ignores them (the answer does not decode), or that refuses batches three times running,
 * gets plain eth_calls from then on. A network failure, a timeout or a rate limit fails every
 * call of the batch with that error, as it would have failed each of them.
 */
import {
  Interface,
  type JsonRpcApiProvider,
  dataLength,
  dataSlice,
  getAddress,
  getBytes,
  isError,
  keccak256,
  toQuantity,
  toUtf8Bytes,
} from "ethers";

import { callSimulatorAbi, callSimulatorRuntime } from "../../../gen/abi/index.js";
import { isChainUnreachable } from "./chain-errors.js";

const simulator = new Interface(callSimulatorAbi);

/** Where the simulator's code is placed: the address CallSimulator.sol's SIMULATOR derives, nothing deployed there. */
export const SIMULATOR_ADDRESS = getAddress(dataSlice(keccak256(toUtf8Bytes("token-service.CallSimulator")), 12));

/** Default most reads and proofs in one batch. */
export const DEFAULT_MAX_ENTRIES = 64;

/** Batches the node refused in a row (not for the network) before plain eth_calls are used for good. */
const REFUSALS_BEFORE_GIVING_UP = 3;

/** A proof's status, as CallSimulator.sol returns it. */
const FAILED = 0n;
const SUCCEEDED = 1n;

/**
 * A proof's outcome. `ok`: the call returns `output` within the gas limit (with `gasUsed`, as the
 * simulation measured it around the call, and `block`, the number of the block it ran on, when it
 * was proven in a batch). Otherwise it reverted, or ran out of the gas, with `revertData` ("0x"
 * when it carries none).
 */
export type ProofOutcome =
  | { ok: true; output: string; gasUsed?: bigint; block?: number }
  | { ok: false; revertData: string };

/** A read's answer, and the number of the block it was read at when it was read in a batch. */
export interface ReadAnswer {
  data: string;
  block?: number;
}

export interface CallBatcherOptions {
  provider: JsonRpcApiProvider;
  /** Most reads and proofs in one eth_call. Default DEFAULT_MAX_ENTRIES. */
  maxEntries?: number;
}

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

interface ReadEntry {
  kind: "read";
  key: string;
  to: string;
  data: string;
  /** Every caller of the same read in the batch. */
  waiters: Waiter<ReadAnswer>[];
}

interface ProofEntry extends Waiter<ProofOutcome> {
  kind: "proof";
  from: string;
  to: string;
  data: string;
  gasLimit: bigint;
}

type Entry = ReadEntry | ProofEntry;

export class CallBatcher {
  readonly #provider: JsonRpcApiProvider;
  readonly #maxEntries: number;
  /** Calls waiting for the next batch, in the order they were made. */
  readonly #queue: Entry[] = [];
  /** The reads in the queue, by target and calldata: a second caller joins the first. */
  readonly #queuedReads = new Map<string, ReadEntry>();
  /** Reads waiting for a batch that goes out anyway (ride), by target and calldata, in the order asked. */
  readonly #riders = new Map<string, ReadEntry>();
  /** flushRiders asked: the next batch goes out even with only riders in it. */
  #forced = false;
  #timer: NodeJS.Timeout | undefined;
  #inFlight = false;
  /** The node takes no state overrides: every call is a plain eth_call. */
  #plain = false;
  /** Batches the node refused in a row. */
  #refusals = 0;

  constructor(options: CallBatcherOptions) {
    this.#provider = options.provider;
    this.#maxEntries = Math.max(1, options.maxEntries ?? DEFAULT_MAX_ENTRIES);
  }

  /** Whether calls still go out in batches (false once the node has shown it takes no state overrides). */
  get batching(): boolean {
    return !this.#plain;
  }

  /** What `data` returns from `to` at the latest block: an eth_call's answer. Rejects as an eth_call of it would. */
  read(to: string, data: string): Promise<string> {
    return this.readAt(to, data).then((answer) => answer.data);
  }

  /**
   * `read`, with the number of the block it was read at when the batch's eth_call told it (the
   * simulator returns it); without it when the read was a plain eth_call of its own.
   */
  readAt(to: string, data: string): Promise<ReadAnswer> {
    if (this.#plain) return this.#readAlone(to, data).then((answer) => ({ data: answer }));
    return new Promise((resolve, reject) => {
      const key = `${to}:${data}`.toLowerCase();
      let entry = this.#queuedReads.get(key);
      if (entry === undefined) {
        entry = { kind: "read", key, to, data, waiters: [] };
        this.#queuedReads.set(key, entry);
        this.#queue.push(entry);
      }
      entry.waiters.push({ resolve, reject });
      this.#schedule();
    });
  }

  /**
   * `readAt`, but sending nothing of its own: the read goes out with the next batch that goes out
   * anyway (a trade's proof and reads), in the room it has left, or with `flushRiders`. Without
   * batching (a node that takes no state overrides) it is a plain eth_call at once.
   */
  ride(to: string, data: string): Promise<ReadAnswer> {
    if (this.#plain) return this.readAt(to, data);
    return new Promise((resolve, reject) => {
      const key = `${to}:${data}`.toLowerCase();
      let entry = this.#riders.get(key);
      if (entry === undefined) {
        entry = { kind: "read", key, to, data, waiters: [] };
        this.#riders.set(key, entry);
      }
      entry.waiters.push({ resolve, reject });
    });
  }

  /** Reads waiting to ride (ride). */
  get riders(): number {
    return this.#riders.size;
  }

  /** Sends the riding reads now, in a batch of their own unless one is about to go out. */
  flushRiders(): void {
    if (this.#riders.size === 0) return;
    this.#forced = true;
    this.#schedule();
  }

  /**
   * Whether `from` calling `to` with `data`, in a transaction of gas limit `gasLimit`, succeeds at
   * the latest block, and what it returns: what an eth_call of it with `gas: gasLimit` says.
   * Rejects only when the node cannot be reached.
   */
  prove(from: string, to: string, data: string, gasLimit: bigint): Promise<ProofOutcome> {
    if (this.#plain) return this.#proveAlone(from, to, data, gasLimit);
    return new Promise((resolve, reject) => {
      this.#queue.push({ kind: "proof", from, to, data, gasLimit, resolve, reject });
      this.#schedule();
    });
  }

  /** The next batch goes out at the next macrotask, unless one is in flight (then when it is answered). */
  #schedule(): void {
    if (this.#inFlight || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#flush();
    }, 0);
  }

  async #flush(): Promise<void> {
    const forced = this.#forced;
    this.#forced = false;
    if (this.#queue.length === 0 && !(forced && this.#riders.size > 0)) return;
    const batch = this.#queue.splice(0, this.#maxEntries);
    const reads = new Map<string, ReadEntry>();
    for (const entry of batch) {
      if (entry.kind !== "read") continue;
      this.#queuedReads.delete(entry.key);
      reads.set(entry.key, entry);
    }
    // The riders, in the room left: one the batch asks already joins it.
    for (const [key, rider] of this.#riders) {
      const same = reads.get(key);
      if (same === undefined && batch.length >= this.#maxEntries) break;
      this.#riders.delete(key);
      if (same !== undefined) same.waiters.push(...rider.waiters);
      else batch.push(rider);
    }
    this.#inFlight = true;
    try {
      await this.#run(batch);
    } catch {
      // A call the simulator's calldata cannot carry (calldata that is not hex): each call on its
      // own gets the node's answer to it. A promise already settled stays as it was.
      this.#runAlone(batch);
    } finally {
      this.#inFlight = false;
      if (this.#queue.length > 0 || (this.#forced && this.#riders.size > 0)) this.#schedule();
    }
  }

  /** One batch: one eth_call of the simulator, or each call on its own when that cannot serve. */
  async #run(batch: Entry[]): Promise<void> {
    if (this.#plain) return this.#runAlone(batch);
    const reads = batch.filter((entry): entry is ReadEntry => entry.kind === "read");
    const proofs: Array<{ entry: ProofEntry; gas: bigint }> = [];
    for (const entry of batch) {
      if (entry.kind !== "proof") continue;
      const gas = executionGas(entry.data, entry.gasLimit);
      // A limit below the transaction's own cost: the eth_call of its own says what the node makes of it.
      if (gas === undefined)
        this.#settleProof(entry, this.#proveAlone(entry.from, entry.to, entry.data, entry.gasLimit));
      else proofs.push({ entry, gas });
    }
    if (reads.length === 0 && proofs.length === 0) return;

    const code = { code: callSimulatorRuntime };
    const overrides: Record<string, { code: string }> = { [SIMULATOR_ADDRESS.toLowerCase()]: code };
    for (const { entry } of proofs) overrides[entry.from.toLowerCase()] = code;
    const data = simulator.encodeFunctionData("simulate", [
      reads.map(({ to, data }) => ({ target: to, data })),
      proofs.map(({ entry, gas }) => ({ from: entry.from, target: entry.to, data: entry.data, gas })),
    ]);

    let answer: string;
    try {
      answer = (await this.#provider.send("eth_call", [
        { to: SIMULATOR_ADDRESS, data },
        "latest",
        overrides,
      ])) as string;
    } catch (error) {
      if (isChainUnreachable(error) || isRateLimited(error)) {
        // Each call would have failed alike on its own: each fails with this error.
        for (const read of reads) for (const waiter of read.waiters) waiter.reject(error);
        for (const { entry } of proofs) entry.reject(error);
        return;
      }
      this.#refused(refusesOverrides(error));
      return this.#runAlone([...reads, ...proofs.map(({ entry }) => entry)]);
    }

    let readResults: Array<{ success: boolean; returnData: string }>;
    let proofResults: Array<{ status: bigint; returnData: string; gasUsed: bigint }>;
    let blockNumber: bigint;
    try {
      [readResults, proofResults, blockNumber] = simulator.decodeFunctionResult("simulate", answer) as unknown as [
        typeof readResults,
        typeof proofResults,
        bigint,
      ];
      if (readResults.length !== reads.length || proofResults.length !== proofs.length) throw new Error("miscounted");
    } catch {
      // No simulator answered: the node ignored the overrides.
      this.#refused(true);
      return this.#runAlone([...reads, ...proofs.map(({ entry }) => entry)]);
    }
    this.#refusals = 0;

    reads.forEach((read, i) => {
      const { success, returnData } = readResults[i]!;
      if (success) for (const waiter of read.waiters) waiter.resolve({ data: returnData, block: Number(blockNumber) });
      else this.#runAlone([read]); // its error is the node's own, as an eth_call of it would give
    });
    proofs.forEach(({ entry }, i) => {
      const { returnData, gasUsed } = proofResults[i]!;
      const status = BigInt(proofResults[i]!.status);
      if (status === SUCCEEDED) entry.resolve({ ok: true, output: returnData, gasUsed, block: Number(blockNumber) });
      else if (status === FAILED) entry.resolve({ ok: false, revertData: returnData });
      // UNPROVEN: the simulation could not give it all of its gas; an eth_call of its own can.
      else this.#settleProof(entry, this.#proveAlone(entry.from, entry.to, entry.data, entry.gasLimit));
    });
  }

  /** A batch the node refused: after `forGood` (it takes no overrides) or a few in a row, plain eth_calls from now on. */
  #refused(forGood: boolean): void {
    this.#refusals += 1;
    if (forGood || this.#refusals >= REFUSALS_BEFORE_GIVING_UP) this.#plain = true;
  }

  /** Each call of `batch` as an eth_call of its own, all at once. */
  #runAlone(batch: Entry[]): void {
    for (const entry of batch) {
      if (entry.kind === "proof") {
        this.#settleProof(entry, this.#proveAlone(entry.from, entry.to, entry.data, entry.gasLimit));
        continue;
      }
      const answer = this.#readAlone(entry.to, entry.data).then((data): ReadAnswer => ({ data }));
      for (const waiter of entry.waiters) answer.then(waiter.resolve, waiter.reject);
    }
  }

  #settleProof(entry: ProofEntry, outcome: Promise<ProofOutcome>): void {
    outcome.then(entry.resolve, entry.reject);
  }

  /** A read as a plain eth_call against the latest block. */
  #readAlone(to: string, data: string): Promise<string> {
    return this.#provider.send("eth_call", [{ to, data }, "latest"]) as Promise<string>;
  }

  /** A proof as a plain eth_call with the gas limit, against the latest block. */
  async #proveAlone(from: string, to: string, data: string, gasLimit: bigint): Promise<ProofOutcome> {
    try {
      const output = (await this.#provider.send("eth_call", [
        { from, to, data, gas: toQuantity(gasLimit) },
        "latest",
      ])) as string;
      return { ok: true, output };
    } catch (error) {
      if (isChainUnreachable(error)) throw error;
      return { ok: false, revertData: revertDataOf(error) };
    }
  }
}

/**
 * The gas a transaction of limit `gasLimit` carrying `data` leaves its call: the limit less the
 * intrinsic cost (21,000, and 4 per zero byte and 16 per other byte of calldata). Undefined when
 * the limit does not cover that cost, or the calldata floor of EIP-7623 (21,000 and 10 per token,
 * a zero byte one token, another byte four), which a node refuses before running anything.
 */
export function executionGas(data: string, gasLimit: bigint): bigint | undefined {
  const bytes = getBytes(data);
  let zeros = 0n;
  for (const byte of bytes) if (byte === 0) zeros += 1n;
  const others = BigInt(dataLength(data)) - zeros;
  const intrinsic = 21_000n + 4n * zeros + 16n * others;
  const floor = 21_000n + 10n * (zeros + 4n * others);
  if (gasLimit < intrinsic || gasLimit < floor) return undefined;
  return gasLimit - intrinsic;
}

/** The revert data a failed eth_call carries, as ethers reports it ("0x" when there is none). */
function revertDataOf(error: unknown): string {
  if (isError(error, "CALL_EXCEPTION") && typeof error.data === "string") return error.data;
  return "0x";
}

/** Whether the node (or its gateway) turned the call away for load: it says nothing about the call itself. */
function isRateLimited(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth += 1) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (code === -32005 || code === 429) return true;
    if (typeof message === "string" && /rate limit|too many requests|request limit|capacity exceeded/i.test(message))
      return true;
    current = (current as { info?: { error?: unknown } }).info?.error ?? (current as { error?: unknown }).error;
  }
  return false;
}

/** Whether the node's refusal says it does not take the call's parameters: no state overrides. */
function refusesOverrides(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth += 1) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (code === -32602 || code === -32601) return true;
    if (typeof message === "string" && /override/i.test(message)) return true;
    current = (current as { info?: { error?: unknown } }).info?.error ?? (current as { error?: unknown }).error;
  }
  return false;
}
