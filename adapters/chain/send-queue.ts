/**
 * Broadcasting for one exchange wallet: nonce assignment, signing, journalling and sending,
 * pipelined by group commit.
 *
 * Trades that arrive while a round is on its way wait in a queue; the next round takes all
 * of them (up to `maxBatch`), holds the wallet's nonce lock once, and goes through them a
 * chunk of a few at a time: signs the chunk with consecutive nonces, lets each trade journal
 * itself (`onSigned`, all of the chunk at once, so the journal can commit them together), and
 * sends the chunk as one ordered JSON-RPC batch while the next chunk is signed. Trades that
 * arrive while the round sends join it, up to `maxBatch` in all. A lone trade
 * goes out at once; a burst costs one lock per round and one round trip per few trades
 * instead of one each, and never waits for anyone's receipt.
 *
 * No gap is left behind:
 * - a trade whose journal write fails is not sent, and takes no nonce;
 * - the stored next nonce moves on by the number sent only when every send was accepted;
 *   otherwise it is dropped, and the next round re-reads the chain's pending count;
 * - a send refused for its nonce (someone else used the wallet, or one before it failed) is
 *   signed again once, in a later round;
 * - if a send failed and one after it was accepted, the failed nonce is filled with an empty
 *   transfer to the wallet itself, so the accepted ones do not wait behind it.
 */
import type { JsonRpcApiProvider, Wallet } from "ethers";

import type { SignedTrade } from "../../core/index.js";
import { signEip1559, type SignedTransaction } from "./eip1559.js";
import type { NonceStore } from "./nonce-store.js";
import { isNonceConflict } from "./nonce-store.js";
import { RpcProvider } from "./rpc-provider.js";
import type { RpcReceipt } from "./web3-receipt.js";

export interface Fees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

export interface Outgoing {
  to: string;
  data: string;
  gasLimit: bigint;
  /** Sees the signed transaction before it is broadcast (the journal); if it throws, nothing is sent. */
  onSigned?: ((tx: SignedTrade) => Promise<void>) | undefined;
}

export interface SendQueueOptions {
  signer: Wallet;
  chainId: bigint;
  provider: JsonRpcApiProvider;
  nonces: NonceStore;
  fees: () => Promise<Fees>;
  /** Most transactions in one round (and one JSON-RPC batch). 1 sends them one request each. */
  maxBatch: number;
}

/** A transaction the node accepted. */
export interface Sent {
  hash: string;
  /**
   * Its receipt, when the node had mined it by the end of the send's batch (automine, or a
   * block that closed meanwhile); null otherwise: then it is polled for.
   */
  receipt: RpcReceipt | null;
}

interface Queued {
  tx: Outgoing;
  resolve: (sent: Sent) => void;
  reject: (error: unknown) => void;
  /** Signed again already after a nonce conflict (a second conflict fails the trade). */
  retried: boolean;
}

interface Signed {
  item: Queued;
  nonce: number;
  rawTx: string;
  txHash: string;
}

/** An outcome of one send in a round; `unsent`: not tried, because one before it failed. */
type Outcome = { accepted: true; receipt: RpcReceipt | null } | { error: Error } | { unsent: true };

const FILLER_GAS = 21_000n;
/** Transactions per request within a round (see #round). */
const SEND_CHUNK = 8;

export class SendQueue {
  readonly #opts: SendQueueOptions;
  readonly #queue: Queued[] = [];
  #running = false;

  constructor(options: SendQueueOptions) {
    if (!Number.isSafeInteger(options.maxBatch) || options.maxBatch < 1) throw new RangeError("maxBatch: must be a positive integer");
    this.#opts = options;
  }

  /** Signs and broadcasts `tx`; resolves once the node accepted it. */
  send(tx: Outgoing): Promise<Sent> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ tx, resolve, reject, retried: false });
      if (!this.#running) void this.#run();
    });
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      while (this.#queue.length > 0) {
        const round = this.#queue.splice(0, this.#opts.maxBatch);
        const settled = new Set<Queued>();
        try {
          await this.#round(round, settled);
        } catch (error) {
          // The nonce, the fees or the lock could not be had: nothing of this round was sent.
          for (const item of round) if (!settled.has(item)) item.reject(error);
        }
      }
    } finally {
      this.#running = false;
    }
  }

  async #round(round: Queued[], settled: Set<Queued>): Promise<void> {
    const { signer, nonces, provider } = this.#opts;
    const wallet = signer.address;
    const chainNonce = () => provider.getTransactionCount(wallet, "pending");
    const settle = (item: Queued, outcome: { sent: Sent } | { error: unknown }) => {
      settled.add(item);
      if ("sent" in outcome) item.resolve(outcome.sent);
      else item.reject(outcome.error);
    };

    await nonces.withNonce(
      wallet,
      chainNonce,
      async (first) => {
        const fees = await this.#opts.fees();
        const signed: Signed[] = [];
        // Sent in chunks while the rest is still being signed: a chunk goes out once the one
        // before it was answered, so the node sees the nonces in order, and the chain mines
        // one chunk while this thread signs the next. Accepted trades are answered as soon as
        // their chunk is; failures are dealt with once the round is over.
        const answers: Array<Promise<Outcome[]>> = [];
        let sending: Promise<unknown> = Promise.resolve();
        let refused = false;
        let unsent = 0;
        const sendChunk = () => {
          const batch = signed.slice(unsent);
          unsent = signed.length;
          if (batch.length === 0) return;
          // A request that fails as a whole may have reached the node, or not: each of its
          // transactions fails with that error. The journal knows them; the chain will tell.
          const answered = sending.then(() => this.#broadcast(batch)).catch((error: unknown) => batch.map((): Outcome => ({ error: error as Error })));
          sending = answered;
          answers.push(
            answered.then((outcomes) => {
              outcomes.forEach((outcome, i) => {
                if ("accepted" in outcome) settle(batch[i]!.item, { sent: { hash: batch[i]!.txHash, receipt: outcome.receipt } });
                else refused = true;
              });
              return outcomes;
            }),
          );
        };
        // Each chunk is signed and journalled (#prepare), then sent. The round rolls on: trades that arrive while its last chunk is on its way join it
        // (up to `maxBatch` in all), so the next chunk is ready when the node answers, and
        // the node always has sends to work on. It stops taking trades once a send failed.
        const pending = [...round];
        for (;;) {
          if (pending.length === 0) {
            if (this.#queue.length === 0) await sending;
            if (refused) break; // the rest waits for the next round, which first deals with the failure
            const more = this.#queue.splice(0, this.#opts.maxBatch - round.length);
            if (more.length === 0) break;
            round.push(...more);
            pending.push(...more);
          }
          const { ready, again } = await this.#prepare(pending.splice(0, SEND_CHUNK), first + signed.length, fees, (item, error) => settle(item, { error }));
          signed.push(...ready);
          pending.unshift(...again);
          sendChunk();
        }
        const outcomes = (await Promise.all(answers)).flat();

        const requeue: Queued[] = [];
        let firstFailure = -1;
        let lastAccepted = -1;
        outcomes.forEach((outcome, index) => {
          const { item } = signed[index]!;
          if ("accepted" in outcome) {
            lastAccepted = index; // answered already, with its chunk
            return;
          }
          if (firstFailure < 0) firstFailure = index;
          if ("unsent" in outcome) requeue.push(item);
          else if (!item.retried && isNonceConflict(outcome.error)) {
            item.retried = true;
            requeue.push(item);
          } else settle(item, { error: outcome.error });
        });
        // Back to the front, in order: they go out in the next round, with fresh nonces. This
        // round is done with them (they must not be failed if what follows throws).
        for (const item of requeue) settled.add(item);
        this.#queue.unshift(...requeue);

        if (firstFailure >= 0 && lastAccepted > firstFailure) {
          await this.#fillGaps(signed[lastAccepted]!.nonce, fees, chainNonce);
        }
        return { clean: firstFailure < 0, sent: signed.length };
      },
      (result) => (result.clean ? result.sent : null),
    );
  }

  /**
   * Signs `items` with consecutive nonces from `first`, then lets them all journal themselves
   * at once (one group commit in the journal). A trade whose signing or journal write fails is
   * refused and takes no nonce: those signed after a failed write come back in `again`, to be
   * signed with the next nonces (their records are rewritten before anything of theirs is sent).
   */
  async #prepare(
    items: readonly Queued[],
    first: number,
    fees: Fees,
    refuse: (item: Queued, error: unknown) => void,
  ): Promise<{ ready: Signed[]; again: Queued[] }> {
    const wallet = this.#opts.signer.address;
    const chunk: Signed[] = [];
    for (const item of items) {
      try {
        const nonce = first + chunk.length;
        const { rawTx, txHash } = this.#sign({ to: item.tx.to, data: item.tx.data, gasLimit: item.tx.gasLimit, value: 0n }, nonce, fees);
        chunk.push({ item, nonce, rawTx, txHash });
      } catch (error) {
        refuse(item, error); // not sent, and its nonce goes to the next one
      }
    }
    const written = await Promise.allSettled(chunk.map(({ item, nonce, txHash, rawTx }) => item.tx.onSigned?.({ wallet, nonce, txHash, rawTx })));
    const failed = written.findIndex((result) => result.status === "rejected");
    if (failed < 0) return { ready: chunk, again: [] };
    refuse(chunk[failed]!.item, (written[failed] as PromiseRejectedResult).reason);
    return { ready: chunk.slice(0, failed), again: chunk.slice(failed + 1).map((s) => s.item) };
  }

  /**
   * Sends the signed transactions in order: one JSON-RPC batch on the service's provider,
   * else one at a time, stopping at the first refusal (the rest are `unsent`). Either way a
   * bare eth_sendRawTransaction: ethers' broadcastTransaction would first recover the sender
   * from the signature (a millisecond of secp256k1 per trade) to build a response unused here.
   *
   * The batch asks for the transactions' receipts after the sends: a node that mines on
   * arrival (automine) has them by then, which saves a poll per trade and its wait. A null
   * or failed receipt call costs nothing more than that call: the trade polls as usual.
   */
  async #broadcast(batch: readonly Signed[]): Promise<Outcome[]> {
    const { provider, maxBatch } = this.#opts;
    if (batch.length === 0) return [];
    if (provider instanceof RpcProvider && maxBatch > 1) {
      const answers = await provider.sendBatch([
        ...batch.map(({ rawTx }) => ({ method: "eth_sendRawTransaction", params: [rawTx] })),
        ...batch.map(({ txHash }) => ({ method: "eth_getTransactionReceipt", params: [txHash] })),
      ]);
      return batch.map((_, i): Outcome => {
        const answer = answers[i]!;
        if ("error" in answer) return answer;
        const receipt = answers[batch.length + i]!;
        return { accepted: true, receipt: "result" in receipt ? (receipt.result as RpcReceipt | null) : null };
      });
    }
    const outcomes: Outcome[] = [];
    let refused = false;
    for (const { rawTx } of batch) {
      if (refused) {
        outcomes.push({ unsent: true });
        continue;
      }
      try {
        await provider.send("eth_sendRawTransaction", [rawTx]);
        outcomes.push({ accepted: true, receipt: null });
      } catch (error) {
        outcomes.push({ error: error as Error });
        refused = true;
      }
    }
    return outcomes;
  }

  /**
   * A send failed and one after it was accepted: nodes hold the later one until the nonce
   * below it is used. Fills each nonce the chain is still missing, up to the last accepted
   * one, with an empty transfer to the wallet itself (21,000 gas, no value).
   */
  async #fillGaps(lastAcceptedNonce: number, fees: Fees, chainNonce: () => Promise<number>): Promise<void> {
    const wallet = this.#opts.signer.address;
    for (let attempts = 0; attempts < 16; attempts += 1) {
      const missing = await chainNonce().catch(() => Number.POSITIVE_INFINITY);
      if (missing >= lastAcceptedNonce) return;
      const { rawTx } = this.#sign({ to: wallet, data: "0x", gasLimit: FILLER_GAS, value: 0n }, missing, fees);
      const sent = await this.#opts.provider.send("eth_sendRawTransaction", [rawTx]).then(
        () => true,
        () => false,
      );
      if (!sent) return; // the next round resyncs from the chain and fills it with a trade
    }
  }

  #sign(tx: { to: string; data: string; gasLimit: bigint; value: bigint }, nonce: number, fees: Fees): SignedTransaction {
    return signEip1559(this.#opts.signer.signingKey, { ...tx, ...fees, chainId: this.#opts.chainId, nonce });
  }
}
