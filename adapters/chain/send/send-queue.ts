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
 * - its nonce held in the pools by another transaction (a first broadcast refused as an
 *   underpriced replacement, which no endpoint knows): the trade keeps its slot, out of the
 *   lifecycle monitor's way, until that transaction is mined; then the slot goes and the trade is
 *   signed again past it, within a block or two, never while its own bytes may be mined. If it is
 *   not mined within `heldWaitMs`, the trade waits for its receipt like any other, and the
 *   monitor sees it through;
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

import type { NonceLedger, NonceStore } from "../../../core/index.js";
import type { Fees } from "../blocks/index.js";
import type { TransactionSigner } from "../tx/index.js";
import { Broadcaster } from "./broadcast.js";
import { sendFiller } from "./filler.js";
import { prepare } from "./prepare.js";
import type { Outcome, Outgoing, Queued, Sent, Signed } from "./queued.js";
import { lookUpOwn } from "./tx-evidence.js";
import { verify, type Verified } from "./verify.js";

export interface SendQueueOptions {
  signer: TransactionSigner;
  chainId: bigint;
  provider: JsonRpcApiProvider;
  nonces: NonceStore;
  /** Where every transaction's slot is (fillers), or is released (a refused send). */
  ledger: NonceLedger;
  /** Most transactions in one round (and one JSON-RPC batch). 1 sends them one request each. */
  maxBatch: number;
  /**
   * How long a transaction whose nonce someone else's transaction holds in the pools waits for
   * that one to be mined before it is left to the lifecycle monitor, in ms. Default 120,000.
   */
  heldWaitMs?: number;
  /**
   * Told of each transaction before it is broadcast, so the blocks that may hold it are read
   * (block-watcher.ts); and of those nobody will wait for (refused, never sent, signed again),
   * so it stops reading blocks for them. An accepted one is released by its waiter.
   */
  watcher?: { expect(hash: string): void; release(hashes: readonly string[]): void };
  /**
   * Why the wallet may not send now (its pause: a transaction the service never signed was mined
   * from it), or undefined. Asked before a round takes the nonce and before each chunk is signed:
   * a refused transaction is signed at no nonce, and its sender gets the error.
   */
  paused?: () => Error | undefined;
}

/** Transactions per request within a round (see #signAndSend). */
const SEND_CHUNK = 8;

/** How often a transaction whose nonce someone else's holds looks again whether that one was mined, in ms. */
const HELD_LOOK_MS = 1_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Answers a queued transaction's sender, once: sent, or failed. */
type Settle = (item: Queued, outcome: { sent: Sent } | { error: unknown }) => void;

export class SendQueue {
  readonly #opts: SendQueueOptions;
  readonly #queue: Queued[] = [];
  #running = false;
  /** The lowest nonce not known to be taken by another transaction (raised when one is found taken). */
  #floor = 0;
  /** Per nonce sent by this queue: null while its send is on its way, else when it was answered (ms). */
  readonly #sends = new Map<number, number | null>();
  /** How each chunk goes out (broadcast.ts). */
  readonly #broadcaster: Broadcaster;

  constructor(options: SendQueueOptions) {
    if (!Number.isSafeInteger(options.maxBatch) || options.maxBatch < 1)
      throw new RangeError("maxBatch: must be a positive integer");
    this.#opts = options;
    this.#broadcaster = new Broadcaster(options.provider);
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
    const paused = this.#opts.paused?.();
    if (paused !== undefined) throw paused; // nothing signed, the nonce untouched
    const settle: Settle = (item, outcome) => {
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
        const { signed, answers, kept } = await this.#signAndSend(round, first, settled, settle);
        const outcomes = await this.#verify(signed, answers);
        const concluded = await this.#conclude(wallet, signed, outcomes, settled, settle);
        if (kept === undefined) return concluded;
        // A nonce kept past a failed write: the next round resyncs past the ledger's highest
        // slot, and the nonces left empty below the kept one are filled.
        await this.#fillGaps(kept.nonce, kept.item.tx.fees);
        return { ...concluded, clean: false };
      },
      (result) => (result.clean ? result.sent : null),
    );
  }

  /**
   * Signs, journals and sends the round's transactions from nonce `first` on, a chunk at a time;
   * answers them signed, and what each send answered (its failures not looked up yet).
   */
  async #signAndSend(
    round: Queued[],
    first: number,
    settled: Set<Queued>,
    settle: Settle,
  ): Promise<{ signed: Signed[]; answers: Outcome[]; kept?: Signed }> {
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
        .then(() => this.#broadcaster.broadcast(batch))
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
    // Each chunk is signed and journalled (prepare.ts), then sent. The round rolls on: trades that arrive while its last chunk is on its way join it
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
      const paused = this.#opts.paused?.();
      if (paused !== undefined) {
        // Paused in the middle of the round: what is not signed yet is refused, unsigned.
        for (const item of pending.splice(0)) settle(item, { error: paused });
        for (const item of this.#queue.splice(0)) settle(item, { error: paused });
        break;
      }
      const { ready, again, kept } = await prepare(
        this.#opts,
        pending.splice(0, SEND_CHUNK),
        first + signed.length,
        (item, error) => settle(item, { error }),
      );
      signed.push(...ready);
      if (kept.length > 0) {
        // Its slot holds more than this queue signed (another instance's replacement): it keeps
        // its nonce and is answered as sent, nobody having seen it taken, for the monitor to see
        // through. The nonces from here on are not this round's to count: what is left goes back
        // to the queue, for a round that resyncs past the ledger's highest slot.
        const now = Date.now();
        for (const { item, nonce, txHash } of kept) {
          this.#sends.set(nonce, now);
          // Never signed at again by this queue, even should its slot be gone after all.
          this.#floor = Math.max(this.#floor, nonce + 1);
          settle(item, { sent: { hash: txHash, nonce, receipt: null, known: false } });
        }
        const left = [...again, ...pending.splice(0)];
        for (const item of left) settled.add(item);
        this.#queue.unshift(...left);
        sendChunk();
        return { signed, answers: (await Promise.all(answers)).flat(), kept: kept.at(-1)! };
      }
      pending.unshift(...again);
      sendChunk();
    }
    return { signed, answers: (await Promise.all(answers)).flat() };
  }

  /**
   * Settles the round once its failures were looked up: frees the slots nothing can be mined
   * at, answers each sender or queues its transaction again, and fills the gaps a failed send
   * left below an accepted one. Whether every send was accepted, and how many were signed.
   */
  async #conclude(
    wallet: string,
    signed: Signed[],
    outcomes: Verified[],
    settled: Set<Queued>,
    settle: Settle,
  ): Promise<{ clean: boolean; sent: number }> {
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
        if (!settled.has(item)) settle(item, { sent: { hash: txHash, nonce, receipt: outcome.receipt, known: true } });
        return;
      }
      if (firstFailure < 0) firstFailure = index;
      if ("held" in outcome) {
        // Out of the round, and of the lifecycle monitor's way (a send on its way is its sender's).
        settled.add(item);
        this.#sends.set(nonce, null);
        void this.#awaitHeld(item, nonce, txHash);
        return;
      }
      if (freed[index]) {
        this.#sends.delete(nonce);
        if ("refused" in outcome) settle(item, { error: outcome.error });
        else if ("taken" in outcome) {
          item.retried = true;
          this.#forget(item); // signed again with another nonce: this hash is nobody's
          settled.add(item);
          void this.#again(item); // proven again first: someone else's transaction took its nonce
        } else {
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
      // At the fees the accepted one behind the gap was signed with: what the market was then.
      await this.#fillGaps(signed[lastAccepted]!.nonce, signed[lastAccepted]!.item.tx.fees);
    }
    return { clean: firstFailure < 0, sent: signed.length };
  }

  /**
   * A transaction whose nonce someone else's holds in the pools: looked up every HELD_LOOK_MS
   * until that one is mined (taken, on every endpoint, on two looks a second apart), then its slot
   * goes and it is queued again, to be signed past it. Its own hash found after all: it is the
   * send it is. Neither within `heldWaitMs`: answered as sent, unknown to the nodes, for the
   * lifecycle monitor to see through.
   */
  async #awaitHeld(item: Queued, nonce: number, hash: string): Promise<void> {
    const { provider, signer, ledger } = this.#opts;
    const wallet = signer.address;
    const look = () => lookUpOwn(provider, wallet, nonce, [hash]);
    const until = Date.now() + (this.#opts.heldWaitMs ?? 120_000);
    let known = false;
    while (Date.now() < until) {
      await sleep(HELD_LOOK_MS);
      const evidence = await look();
      if (evidence.state === "mined" || evidence.state === "known") {
        known = true;
        break;
      }
      if (evidence.state !== "taken") continue;
      await sleep(HELD_LOOK_MS);
      const again = await look();
      if (again.state !== "taken") continue;
      this.#floor = Math.max(this.#floor, nonce + 1);
      if (await ledger.releaseSlot(wallet, nonce, hash).catch(() => false)) {
        this.#sends.delete(nonce);
        item.retried = true; // found taken: a second time, the monitor decides
        this.#forget(item); // signed again with another nonce: this hash is nobody's
        await this.#again(item);
        return;
      }
      break; // the ledger holds more at the nonce by now: seen through like any other
    }
    this.#sends.set(nonce, Date.now());
    item.expected = []; // its waiter releases it (receipts.ts)
    item.resolve({ hash, nonce, receipt: null, known });
  }

  /**
   * A transaction whose nonce someone else's took, queued to be signed again past it, at the
   * front: once its `recheck` passes (that transaction may have spent what it counted on, or left
   * it too little time). If it does not, its sender gets the error, and nothing more is sent.
   */
  async #again(item: Queued): Promise<void> {
    try {
      const fees = await item.tx.recheck?.();
      if (fees !== undefined) item.tx = { ...item.tx, fees };
    } catch (error) {
      item.reject(error);
      return;
    }
    this.#queue.unshift(item);
    if (!this.#running) void this.#run();
  }

  /** What each failed send means (verify.ts); a nonce found taken moves the floor past it. */
  #verify(signed: readonly Signed[], outcomes: readonly Outcome[]): Promise<Verified[]> {
    return verify(this.#opts, signed, outcomes, (nonce) => {
      this.#floor = Math.max(this.#floor, nonce + 1);
    });
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
}
