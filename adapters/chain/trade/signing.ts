/**
 * Where the send queue and the trade use case meet for one trade. The queue signs the trade under
 * its wallet's nonce lock and, before broadcasting, asks for it to be journalled
 * (Outgoing.onSigned); the use case journals it itself (TradeJournal.markSigned) between
 * TradePort.sign and TradePort.send. A Signing is that meeting point: `onSigned`, the queue's side,
 * hands the signed transaction to whoever waits in `next()`, and holds the queue's round until
 * `proceed` (that very transaction journalled: broadcast it) or `refuse` (not journalled: never
 * broadcast, the nonce goes to the next trade, and the trade is given up for good). A trade
 * signed again at another nonce (someone else's transaction took the first) is handed over again
 * the same way. The round waits as long as the journal takes, as it always did: a write that
 * answers late must not find its nonce given to another trade meanwhile.
 */
import type { SignedTradeTx } from "../../../core/index.js";

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export interface SigningOptions {
  /**
   * Run as each transaction is signed, before it is handed over: what is handed over (the
   * transaction with what the caller journals along); throwing refuses it (nothing sent).
   */
  beforeHandover: (tx: SignedTradeTx) => SignedTradeTx;
  /**
   * Without a journal of the caller's (SignOptions.unjournalled): how the transaction's slot is
   * recorded before it is broadcast, in place of waiting for `proceed`.
   */
  record?: (tx: SignedTradeTx) => Promise<void>;
}

export class Signing {
  readonly #opts: SigningOptions;
  /** Who waits for the next signed transaction. */
  #waiter: Deferred<SignedTradeTx> | undefined;
  /** Signed transactions handed over before anyone asked. */
  readonly #handed: SignedTradeTx[] = [];
  /** The journal's verdict on each transaction handed over, by its hash (lower-case). */
  readonly #gates = new Map<string, Deferred<void>>();
  /** Why the queue gave the trade up, or its caller did: no transaction of it goes out from then on. */
  #failure: { error: unknown } | undefined;

  constructor(options: SigningOptions) {
    this.#opts = options;
  }

  /** The queue's onSigned for this trade (Outgoing.onSigned). */
  readonly onSigned = async (signed: SignedTradeTx): Promise<void> => {
    // Given up (its caller could not journal it): nothing more of it is handed over, or waited for.
    if (this.#failure !== undefined) throw this.#failure.error;
    const tx = this.#opts.beforeHandover(signed);
    if (this.#opts.record !== undefined) {
      await this.#opts.record(tx);
      this.#handOver(tx);
      return;
    }
    const gate = deferred<void>();
    const key = tx.txHash.toLowerCase();
    this.#gates.set(key, gate);
    this.#handOver(tx);
    try {
      await gate.promise;
    } finally {
      this.#gates.delete(key);
    }
  };

  /** The next transaction signed for the trade (the queue's failure, if it gives the trade up first). */
  next(): Promise<SignedTradeTx> {
    const handed = this.#handed.shift();
    if (handed !== undefined) return Promise.resolve(handed);
    if (this.#failure !== undefined) return Promise.reject(this.#failure.error);
    this.#waiter = deferred();
    return this.#waiter.promise;
  }

  /** `txHash` is journalled: the queue broadcasts it (and nothing else of this trade's). */
  proceed(txHash: string): void {
    this.#gates.get(txHash.toLowerCase())?.resolve();
  }

  /** `txHash` could not be journalled: the queue never broadcasts it, and the trade is given up. */
  refuse(txHash: string, error: unknown): void {
    this.fail(error);
    this.#gates.get(txHash.toLowerCase())?.reject(error);
  }

  /** The queue gave the trade up (refused, or its round failed), or its caller did: whoever waits hears why. */
  fail(error: unknown): void {
    this.#failure ??= { error };
    this.#waiter?.reject(error);
    this.#waiter = undefined;
  }

  #handOver(tx: SignedTradeTx): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    if (waiter === undefined) this.#handed.push(tx);
    else waiter.resolve(tx);
  }
}
