/**
 * The memory journal's part of the watch (core/ports/watch.port.ts): the outside transactions
 * recorded, the wallets paused and the alarms raised, each change written with its event and its
 * audit record in the same synchronous step (which is what a transaction is in memory).
 */
import type {
  AuditEntry,
  OutsideTransaction,
  WalletPause,
  WatchEvent,
  WatchJournal,
  WatchedNonce,
} from "../../../core/index.js";
import type { MemoryStore } from "./store.js";

export class MemoryWatch implements WatchJournal {
  readonly #store: MemoryStore;
  /** By wallet and nonce: each outside transaction recorded once. */
  readonly #outside = new Map<string, OutsideTransaction>();
  readonly #pauses = new Map<string, WalletPause>();
  readonly #alarms = new Set<string>();
  /** By wallet and chain id. */
  readonly #watched = new Map<string, WatchedNonce>();

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  async recordOutsideTransaction(
    tx: OutsideTransaction,
    event: WatchEvent,
    audit: AuditEntry,
    pause: boolean,
  ): Promise<boolean> {
    const wallet = tx.wallet.toLowerCase();
    const key = `${wallet}:${tx.nonce}`;
    if (this.#outside.has(key)) return false;
    this.#outside.set(key, { ...tx, wallet });
    if (pause && !this.#pauses.has(wallet))
      this.#pauses.set(wallet, { wallet, since: new Date(), nonce: tx.nonce, hash: tx.hash });
    this.#store.events.emitWatch(event);
    this.#store.audit.appendNow(audit);
    return true;
  }

  async setWatchAlarm(name: string, raised: boolean, event: WatchEvent): Promise<boolean> {
    if (this.#alarms.has(name) === raised) return false;
    if (raised) this.#alarms.add(name);
    else this.#alarms.delete(name);
    this.#store.events.emitWatch(event);
    return true;
  }

  async watchAlarms(): Promise<string[]> {
    return [...this.#alarms].sort();
  }

  async unknownTransactions(wallet: string, hashes: readonly string[]): Promise<string[]> {
    const lower = wallet.toLowerCase();
    return hashes.filter((hash) => {
      const slot = this.#store.hashes.get(hash.toLowerCase());
      return slot === undefined || this.#store.slots.get(slot)?.wallet !== lower;
    });
  }

  async walletPauses(): Promise<WalletPause[]> {
    return [...this.#pauses.values()].map((pause) => ({ ...pause }));
  }

  async resumeWallet(wallet: string, audit: AuditEntry): Promise<WalletPause | undefined> {
    const lower = wallet.toLowerCase();
    const pause = this.#pauses.get(lower);
    if (pause === undefined) return undefined;
    this.#pauses.delete(lower);
    this.#store.audit.appendNow(audit);
    return { ...pause };
  }

  async watchedNonce(wallet: string, chainId: number): Promise<WatchedNonce | undefined> {
    const kept = this.#watched.get(`${wallet.toLowerCase()}:${chainId}`);
    return kept === undefined ? undefined : { ...kept };
  }

  async saveWatchedNonce(wallet: string, at: WatchedNonce, back = false): Promise<void> {
    const key = `${wallet.toLowerCase()}:${at.chainId}`;
    const kept = this.#watched.get(key);
    if (kept === undefined || back || at.nonce > kept.nonce) this.#watched.set(key, { ...at });
  }
}
