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
 * Every transaction is recorded in the wallet's nonce ledger before it is broadcast (a trade's
 * by its own `onSigned`, which the journal writes), so the lifecycle monitor can follow it.
 *
 * A node's answer is never taken on trust (tx-evidence.ts). Before a slot is given up or a
 * trade is signed again, its hash is looked up on every endpoint that is up:
 * - found mined or known: the send counts as accepted, whatever the error said ("nonce too
 *   low" for our own mined transaction, a lost answer, a gateway's 502);
 * - its nonce used on chain by another transaction: the slot goes, and the trade is signed
 *   again once at a nonce past it (a second time, it fails with nothing paid);
 * - known nowhere after an answer that may hide a send (no answer, a timeout, "nonce too low",
 *   "underpriced", …): the trade keeps its slot and its journalled bytes, waits for its receipt
 *   like any other, and the lifecycle monitor sees it through. It is never signed again at
 *   another nonce;
 * - known nowhere after a plain refusal ("insufficient funds", "exceeds block gas limit"): the
 *   slot goes, the trade goes back to accepted in the same write, and it fails, nothing paid.
 *
 * No gap is left behind, and no nonce is used twice:
 * - a trade whose journal write fails is not sent, and takes no nonce;
 * - the stored next nonce moves on by the number sent only when every send was accepted;
 *   otherwise it is dropped, and the next round re-reads the chain's pending count, never
 *   below a nonce the ledger holds in any state, nor one found taken;
 * - if a send failed and one after it was accepted, the failed nonce (if its slot went) is
 *   filled with an empty transfer to the wallet itself, so the accepted ones do not wait behind it.
 *
 * The queue knows when each of its sends was answered (`sentAt`): the lifecycle monitor counts
 * a broadcast's age from there, and never re-sends a chunk whose first send is still on its way.
 */
import type { JsonRpcApiProvider } from "ethers";

import {
  DomainError,
  TransactionRefusedError,
  type NonceLedger,
  type NonceStore,
  type SignedTradeTx,
} from "../../core/index.js";
import { signEip1559With, type SignedTransaction } from "./eip1559.js";
import type { Fees } from "./fees.js";
import { isAlreadyKnown, isDefiniteRefusal, isPlainRefusal, nodeMessage, toDomainError } from "./chain-errors.js";
import { batchSenderOf, NotSentError, type BatchSender } from "./batch-sender.js";
import { sendFiller } from "./filler.js";
import { lookUpOwn } from "./tx-evidence.js";
import type { TransactionSigner } from "./signer.js";
import type { RpcReceipt } from "./web3-receipt.js";

export interface Outgoing {
  to: string;
  data: string;
  gasLimit: bigint;
  /** Unix seconds after which the call reverts (the calldata's deadline), recorded with it; null: none. */
  deadline: number | null;
  /**
   * Records the signed transaction before it is broadcast (a trade's journal record and slot, or
   * an approval's slot in the ledger); if it throws, nothing is sent and the nonce goes to the next.
   */
  onSigned: (tx: SignedTradeTx) => Promise<void>;
}

export interface SendQueueOptions {
  signer: TransactionSigner;
  chainId: bigint;
  provider: JsonRpcApiProvider;
  nonces: NonceStore;
  /** Where every transaction's slot is (fillers), or is released (a refused send). */
  ledger: NonceLedger;
  fees: () => Promise<Fees>;
  /** Most transactions in one round (and one JSON-RPC batch). 1 sends them one request each. */
  maxBatch: number;
  /**
   * Told of each transaction before it is broadcast, so the blocks that may hold it are read
   * (block-watcher.ts); and of those nobody will wait for (refused, never sent, signed again),
   * so it stops reading blocks for them. An accepted one is released by its waiter.
   */
  watcher?: { expect(hash: string): void; release(hashes: readonly string[]): void };
}

/** A transaction the node accepted. */
export interface Sent {
  hash: string;
  nonce: number;
  /**
   * Its receipt, when the node had mined it by the end of the send's batch (automine, or a
   * block that closed meanwhile); null otherwise: then it is waited for (receipts.ts).
   */
  receipt: RpcReceipt | null;
  /** False when no node was seen to take it (its send failed ambiguously and no endpoint knows it yet). */
  known: boolean;
}

interface Queued {
  tx: Outgoing;
  resolve: (sent: Sent) => void;
  reject: (error: unknown) => void;
  /** Signed again already after its nonce was found taken: a second time, the monitor decides. */
  retried: boolean;
  /** Its hashes the watcher was told to expect, while nobody else is to release them. */
  expected: string[];
}

interface Signed {
  item: Queued;
  nonce: number;
  rawTx: string;
  txHash: string;
}

/**
 * An outcome of one send in a round. An error is `definite` when the node answered the call
 * itself (it refused this transaction); a failed request may have reached the node, or not.
 * `unsent`: not tried, because one before it failed.
 */
type Outcome = { accepted: true; receipt: RpcReceipt | null } | { error: Error; definite: boolean } | { unsent: true };

/**
 * What a send's outcome means once a failure was looked up (#verify): accepted after all;
 * `pending` (nobody can say it went nowhere: it keeps its slot); `refused` (a plain refusal of
 * a transaction no endpoint knows); or never tried.
 */
type Verified =
  | { accepted: true; receipt: RpcReceipt | null }
  | { pending: true }
  | { taken: true }
  | { refused: true; error: Error }
  | { unsent: true };

/** How long after a nonce was found taken it is looked up again, before its trade is signed again. */
const TAKEN_RECHECK_MS = 1_000;
/** Transactions per request within a round (see #round). */
const SEND_CHUNK = 8;
/** Batches sent without asking for receipts before asking again whether the node mines on arrival. */
const RECEIPTS_PROBE_EVERY = 64;

export class SendQueue {
  readonly #opts: SendQueueOptions;
  readonly #queue: Queued[] = [];
  #running = false;
  /** The lowest nonce not known to be taken by another transaction (raised when one is found taken). */
  #floor = 0;
  /** Per nonce sent by this queue: null while its send is on its way, else when it was answered (ms). */
  readonly #sends = new Map<number, number | null>();
  /** Whether the node was last seen to mine on arrival (a receipt came back with a send). */
  #minesOnArrival = true;
  /** Batches sent since receipts were last asked for with them. */
  #withoutReceipts = 0;
  /** How a round's transactions go out in order (batch-sender.ts). */
  readonly #batches: BatchSender;

  constructor(options: SendQueueOptions) {
    if (!Number.isSafeInteger(options.maxBatch) || options.maxBatch < 1)
      throw new RangeError("maxBatch: must be a positive integer");
    this.#opts = options;
    this.#batches = batchSenderOf(options.provider);
  }

  /**
   * When the send of `nonce` was answered (ms since the epoch), null while it is still on its
   * way, undefined if this queue did not send it lately. The lifecycle monitor counts a
   * broadcast's age from here, and leaves alone a send that has not come back.
   */
  sentAt(nonce: number): number | null | undefined {
    return this.#sends.get(nonce);
  }

  /**
   * Signs and broadcasts `tx`; resolves once a node accepted it, or once nobody can tell
   * whether it went out (then it keeps its nonce, and the lifecycle monitor sees it through).
   */
  send(tx: Outgoing): Promise<Sent> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ tx, resolve, reject, retried: false, expected: [] });
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
          for (const item of round) {
            if (settled.has(item)) continue;
            this.#forget(item);
            item.reject(error);
          }
        }
      }
    } finally {
      this.#running = false;
    }
  }

  async #round(round: Queued[], settled: Set<Queued>): Promise<void> {
    const { signer, nonces, provider } = this.#opts;
    const wallet = signer.address;
    // Never a nonce the ledger holds a slot for, in any state: a transaction recorded there may
    // be on its way (or known to nodes other than this one, or mined where this endpoint has not
    // looked yet) even when the node's pending count misses it. Nor one found taken.
    const chainNonce = async () => {
      const [pending, highest] = await Promise.all([
        provider.getTransactionCount(wallet, "pending"),
        this.#opts.ledger.highestNonce(wallet),
      ]);
      return Math.max(pending, (highest ?? -1) + 1, this.#floor);
    };
    this.#prune();
    const settle = (item: Queued, outcome: { sent: Sent } | { error: unknown }) => {
      settled.add(item);
      if ("sent" in outcome) {
        item.expected = []; // its waiter releases it (receipts.ts)
        item.resolve(outcome.sent);
      } else {
        this.#forget(item);
        item.reject(outcome.error);
      }
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
          for (const { item, nonce, txHash } of batch) {
            this.#sends.set(nonce, null);
            item.expected.push(txHash);
            this.#opts.watcher?.expect(txHash);
          }
          // A request that fails as a whole may have reached the node, or not: each of its
          // transactions fails with that error. The journal knows them; the chain will tell.
          const answered = sending
            .then(() => this.#broadcast(batch))
            .catch((error: unknown) => batch.map((): Outcome => ({ error: error as Error, definite: false })));
          sending = answered;
          answers.push(
            answered.then((outcomes) => {
              const at = Date.now();
              outcomes.forEach((outcome, i) => {
                const { item, txHash, nonce } = batch[i]!;
                if ("accepted" in outcome) {
                  this.#sends.set(nonce, at);
                  settle(item, { sent: { hash: txHash, nonce, receipt: outcome.receipt, known: true } });
                } else refused = true; // on its way until the round has looked it up (#verify)
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
          const { ready, again } = await this.#prepare(
            pending.splice(0, SEND_CHUNK),
            first + signed.length,
            fees,
            (item, error) => settle(item, { error }),
          );
          signed.push(...ready);
          pending.unshift(...again);
          sendChunk();
        }
        const outcomes = await this.#verify(signed, (await Promise.all(answers)).flat());
        // Never sent, or refused and known nowhere: nothing of it can be mined, so its slot is
        // free again (its trade back to accepted), unless the ledger holds more there by now.
        const freed = await Promise.all(
          outcomes.map((outcome, index) =>
            "refused" in outcome || "unsent" in outcome || "taken" in outcome
              ? this.#opts.ledger.releaseSlot(wallet, signed[index]!.nonce, signed[index]!.txHash).catch(() => false)
              : false,
          ),
        );

        const requeue: Queued[] = [];
        let firstFailure = -1;
        let lastAccepted = -1;
        const now = Date.now();
        outcomes.forEach((outcome, index) => {
          const { item, nonce, txHash } = signed[index]!;
          if ("accepted" in outcome) {
            lastAccepted = index;
            this.#sends.set(nonce, this.#sends.get(nonce) ?? now);
            // Answered with its chunk, unless its send failed and the lookup found it after all.
            if (!settled.has(item))
              settle(item, { sent: { hash: txHash, nonce, receipt: outcome.receipt, known: true } });
            return;
          }
          if (firstFailure < 0) firstFailure = index;
          if (freed[index]) {
            this.#sends.delete(nonce);
            if ("refused" in outcome) settle(item, { error: outcome.error });
            else {
              if ("taken" in outcome) item.retried = true;
              this.#forget(item); // signed again with another nonce: this hash is nobody's
              requeue.push(item);
            }
            return;
          }
          // Nobody can say it went nowhere: it keeps its nonce and its journalled bytes, and the
          // lifecycle monitor sees it through (the same bytes again, or a no-op at the deadline;
          // a nonce another transaction took is its verdict, after several looks). The trade
          // waits for it like any other. It is never signed again at another nonce.
          this.#sends.set(nonce, now);
          settle(item, { sent: { hash: txHash, nonce, receipt: null, known: false } });
        });
        // Back to the front, in order: they go out in the next round, with fresh nonces. This
        // round is done with them (they must not be failed if what follows throws).
        for (const item of requeue) settled.add(item);
        this.#queue.unshift(...requeue);

        if (firstFailure >= 0 && lastAccepted > firstFailure) {
          await this.#fillGaps(signed[lastAccepted]!.nonce, fees);
        }
        return { clean: firstFailure < 0, sent: signed.length };
      },
      (result) => (result.clean ? result.sent : null),
    );
  }

  /**
   * What each failed send means, found out before anything of it is given up: every hash the
   * ledger holds at its nonce is looked up on every endpoint (tx-evidence.ts).
   * - Mined or known somewhere: accepted after all. The answer was lost on the way, or "nonce
   *   too low" / "already known" / "underpriced" came for this very transaction. Its receipt is
   *   then waited for from the service's own endpoint, not taken from whichever one had it.
   * - A plain refusal (isPlainRefusal: the wallet cannot pay the gas, the gas fits no block…)
   *   of a transaction that every endpoint answered it does not know: `refused`, and the trade
   *   fails with nothing paid.
   * - Anything else, its nonce taken by another transaction included: `pending`. A lagging or
   *   load-balanced endpoint can make our own mined transaction look like someone else's, so
   *   that verdict is the lifecycle monitor's, after several looks apart in time.
   */
  async #verify(signed: readonly Signed[], outcomes: readonly Outcome[]): Promise<Verified[]> {
    const { provider, signer, ledger } = this.#opts;
    return Promise.all(
      outcomes.map(async (outcome, i): Promise<Verified> => {
        if (!("error" in outcome)) return outcome;
        const { nonce, txHash } = signed[i]!;
        const slot = await ledger.slot(signer.address, nonce).catch(() => undefined);
        const hashes = slot?.broadcasts.map((b) => b.hash) ?? [txHash];
        const evidence = await lookUpOwn(provider, signer.address, nonce, hashes.length > 0 ? hashes : [txHash]);
        switch (evidence.state) {
          case "mined":
          case "known":
            return { accepted: true, receipt: null };
          case "taken":
            this.#floor = Math.max(this.#floor, nonce + 1);
            return this.#takenAgain(nonce, hashes, signed[i]!.item);
          case "absent":
            if (outcome.definite && isPlainRefusal(outcome.error))
              return { refused: true, error: refusal(outcome.error) };
            return { pending: true };
          case "unknown":
            return { pending: true };
        }
      }),
    );
  }

  /**
   * Whether a nonce found taken by another transaction is still taken on a second look a second
   * later, across every endpoint: only then may its trade be signed again, once, at a later
   * nonce (a wallet someone else used, the stored next nonce stale). A load-balanced endpoint
   * can answer the count from a node at the head and the receipt from one behind, so one look
   * could take our own mined transaction for another; a second trade found taken, or a second
   * look that says otherwise, leaves the verdict to the lifecycle monitor.
   */
  async #takenAgain(nonce: number, hashes: readonly string[], item: Queued): Promise<Verified> {
    if (item.retried) return { pending: true };
    await new Promise((resolve) => setTimeout(resolve, TAKEN_RECHECK_MS));
    const again = await lookUpOwn(this.#opts.provider, this.#opts.signer.address, nonce, hashes);
    if (again.state === "mined" || again.state === "known") return { accepted: true, receipt: null };
    return again.state === "taken" ? { taken: true } : { pending: true };
  }

  /** Tells the watcher nobody waits for the hashes `item` was sent with. */
  #forget(item: Queued): void {
    if (item.expected.length > 0) this.#opts.watcher?.release(item.expected);
    item.expected = [];
  }

  /** Forgets send times the lifecycle monitor no longer needs (older than ten minutes). */
  #prune(): void {
    const old = Date.now() - 600_000;
    for (const [nonce, at] of this.#sends) if (at !== null && at < old) this.#sends.delete(nonce);
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
        const { rawTx, txHash } = await this.#sign(
          { to: item.tx.to, data: item.tx.data, gasLimit: item.tx.gasLimit, value: 0n },
          nonce,
          fees,
        );
        chunk.push({ item, nonce, rawTx, txHash });
      } catch (error) {
        refuse(item, error); // not sent, and its nonce goes to the next one
      }
    }
    const written = await Promise.allSettled(
      chunk.map(({ item, nonce, txHash, rawTx }) =>
        item.tx.onSigned({ wallet, nonce, txHash, rawTx, ...fees, deadline: item.tx.deadline ?? 0 }),
      ),
    );
    const failed = written.findIndex((result) => result.status === "rejected");
    if (failed < 0) return { ready: chunk, again: [] };
    refuse(chunk[failed]!.item, (written[failed] as PromiseRejectedResult).reason);
    // Those after it are signed again with the next nonces: the slots they recorded go first.
    const again = chunk.slice(failed + 1);
    await Promise.all(
      again.map(({ nonce, txHash }, i) =>
        written[failed + 1 + i]!.status === "fulfilled"
          ? this.#opts.ledger.releaseSlot(wallet, nonce, txHash).catch(() => {})
          : undefined,
      ),
    );
    return { ready: chunk.slice(0, failed), again: again.map((s) => s.item) };
  }

  /**
   * Sends the signed transactions in order, in one batch (batch-sender.ts: one JSON-RPC request
   * on the service's provider; else one call at a time, and after a failed send the rest are
   * `unsent`). Either way a bare eth_sendRawTransaction: ethers' broadcastTransaction would first
   * recover the sender from the signature (a secp256k1 recovery per trade) to build a response
   * unused here.
   *
   * While the node is seen to mine on arrival (automine), the batch asks for the transactions'
   * receipts after the sends: it has them by then, which saves the trade its wait for the next
   * look at the chain. A node that answered none of them mines in blocks: receipts are then
   * asked for once every RECEIPTS_PROBE_EVERY batches only, in case that changed. A null or
   * failed receipt call costs nothing more than that call: the trade waits as usual.
   */
  async #broadcast(batch: readonly Signed[]): Promise<Outcome[]> {
    if (batch.length === 0) return [];
    const ask = this.#minesOnArrival || ++this.#withoutReceipts >= RECEIPTS_PROBE_EVERY;
    const answers = await this.#batches.sendBatch([
      ...batch.map(({ rawTx }) => ({ method: "eth_sendRawTransaction", params: [rawTx] })),
      ...(ask ? batch.map(({ txHash }) => ({ method: "eth_getTransactionReceipt", params: [txHash] })) : []),
    ]);
    if (ask) {
      this.#withoutReceipts = 0;
      // Only the null receipts of sends the node accepted tell that it mines in blocks: a
      // refused send has none anyway, and a failed receipt call tells nothing. A receipt tells
      // it mines on arrival. Nothing told: as it was.
      const told = batch.flatMap((_, i) => {
        const found = answers[batch.length + i];
        if (found === undefined || !("result" in found)) return [];
        if (found.result !== null) return [true];
        return "error" in answers[i]! ? [] : [false];
      });
      if (told.length > 0) this.#minesOnArrival = told.includes(true);
    }
    return batch.map((_, i): Outcome => {
      const answer = answers[i]!;
      if ("error" in answer && answer.error instanceof NotSentError) return { unsent: true };
      const found = answers[batch.length + i];
      const receipt = found !== undefined && "result" in found ? (found.result as RpcReceipt | null) : null;
      // A receipt beside a send error ("nonce too low" from a node that mined it): it is ours.
      // A JSON-RPC error is the node's answer about this transaction; anything else may not be.
      if ("error" in answer && !isAlreadyKnown(answer.error) && receipt === null)
        return { error: answer.error, definite: isDefiniteRefusal(answer.error) };
      return { accepted: true, receipt };
    });
  }

  /**
   * A send failed and one after it was accepted: nodes hold the later one until the nonce
   * below it is used. Fills each nonce the chain is still missing, up to the last accepted
   * one, with an empty transfer to the wallet itself (21,000 gas, no value), recorded in the
   * ledger first like every other transaction.
   */
  async #fillGaps(lastAcceptedNonce: number, fees: Fees): Promise<void> {
    const { signer, chainId, ledger, provider } = this.#opts;
    for (let attempts = 0; attempts < 16; attempts += 1) {
      const missing = await provider
        .getTransactionCount(signer.address, "pending")
        .catch(() => Number.POSITIVE_INFINITY);
      if (missing >= lastAcceptedNonce) return;
      const filler = await sendFiller({ signer, chainId, ledger, provider }, missing, fees);
      // Held by the ledger already: the lifecycle monitor deals with it. Not taken by the node:
      // the monitor sends it again, or the next round resyncs.
      if (!filler.sent) return;
    }
  }

  #sign(
    tx: { to: string; data: string; gasLimit: bigint; value: bigint },
    nonce: number,
    fees: Fees,
  ): Promise<SignedTransaction> {
    return signEip1559With(this.#opts.signer, { ...tx, ...fees, chainId: this.#opts.chainId, nonce });
  }
}

/** A node's definite refusal of a transaction no endpoint knows, as the trade's error: nothing was paid. */
function refusal(error: Error): Error {
  const mapped = toDomainError(error);
  return mapped instanceof DomainError ? mapped : new TransactionRefusedError(nodeMessage(error));
}
