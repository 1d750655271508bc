/**
 * The exchange wallets' nonces: who may use the next one (NonceStore), and what the service
 * sent at each one until it is final (NonceLedger). The journals implement both, in the same
 * storage as the trades, so that a trade and its transactions are written together.
 */
import type { AuditEntry } from "./audit.port.js";

/** How many nonces a `withNonce` send used (from its nonce on), or null to resync from the chain. */
export type NoncesConsumed<T> = (result: T) => number | null;

/** Nonce assignment: one sender per wallet at a time (across every instance sharing the store). */
export interface NonceStore {
  /**
   * Runs `send(nonce)` holding the wallet's nonce lock. The nonce is the stored next nonce, or
   * `chainNonce()` when none is stored. When `send` resolves, the stored next nonce becomes
   * nonce + 1; when it throws, the stored nonce is cleared, so the next call resyncs from the
   * chain. Nothing is ever skipped.
   *
   * A `send` that broadcasts several transactions (nonce, nonce + 1, …) says how many it
   * used through `consumed(result)`: the stored next nonce becomes nonce + that count, or is
   * cleared when it answers null (some went out and some did not: only the chain knows).
   */
  withNonce<T>(
    wallet: string,
    chainNonce: () => Promise<number>,
    send: (nonce: number) => Promise<T>,
    consumed?: NoncesConsumed<T>,
  ): Promise<T>;
}

/** One transaction broadcast at a nonce: the first, a re-priced replacement, or a no-op. */
export interface Broadcast {
  hash: string;
  /** The signed transaction, hex: sent again, byte for byte, when a node has forgotten it. */
  rawTx: string;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  /** A 0-value transfer to the wallet itself, sent to free the nonce: it pays for nothing. */
  noop: boolean;
  sentAt: Date;
}

/**
 * What a transaction holds back of an account's asset until it is final, in base units: a
 * trade's spend from its wallet (the token for a sell, the stable coin for a buy), and a sell's
 * payout from the swap's reserves. A balance read on chain does not show it while the
 * transaction is unmined, so the trades that come after count it (the chain adapter's allowances).
 */
export interface Reservation {
  /** Lower-case address of the account that pays: the wallet, or the swap. */
  holder: string;
  /** Lower-case address of the ERC-20. */
  asset: string;
  amount: bigint;
}

/** A reservation, with the slot that holds it (lower-case wallet, and nonce) and the hash of the slot's first transaction. */
export interface SlotReservation extends Reservation {
  wallet: string;
  nonce: number;
  /** Lower-case: the transaction the slot was written with, which the process that signed it knows it by. */
  tx: string;
}

/** What a nonce is used for. */
export type SlotPurpose = "trade" | "approval" | "filler";

/**
 * - `pending`: nothing of it is mined (or a reorg removed what was);
 * - `mined`: one of its broadcasts is mined, and is watched for reorgs;
 * - `final`: mined deep enough that the service stops watching it;
 * - `lost`: the nonce was used by a transaction the service did not sign for it.
 */
export type SlotState = "pending" | "mined" | "final" | "lost";

export interface MinedTx {
  hash: string;
  blockNumber: number;
  blockHash: string;
}

/** A nonce of an exchange wallet the service used, with everything it broadcast there. */
export interface NonceSlot {
  /** Lower-case address. */
  wallet: string;
  nonce: number;
  purpose: SlotPurpose;
  /** The trade it carries (purpose `trade`), else null. */
  tradeId: string | null;
  /** Unix seconds after which its call reverts on chain (a trade's deadline); null: none. */
  deadline: number | null;
  state: SlotState;
  /** Oldest first. Never empty. */
  broadcasts: Broadcast[];
  mined: MinedTx | null;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * What the service sent at each nonce of its wallets, and what became of it: the record the
 * lifecycle monitor works from (re-send, replace, no-op, reorg). A journalled trade's slot is
 * written by TradeJournal.markSigned; every other transaction's by `recordSlot`.
 */
export interface NonceLedger {
  /**
   * Records a new slot with its first broadcast, durable before the broadcast. Refused if the
   * nonce has a slot. (A journalled trade's slot is written by TradeJournal.markSigned, with
   * its trade; this one has none.)
   */
  recordSlot(
    slot: {
      wallet: string;
      nonce: number;
      purpose: SlotPurpose;
      deadline: number | null;
      reserves?: readonly Reservation[];
    },
    first: Broadcast,
  ): Promise<void>;
  /**
   * What the transactions that may still spend hold back, across every wallet and every instance
   * sharing the journal: the reservations of the slots that are `pending`, and of those mined in
   * a block after `minedAfter` (a balance read at that block does not show their spend yet). A
   * slot that is lost, released or mined at or before `minedAfter` holds nothing back.
   */
  reservations(minedAfter: number): Promise<SlotReservation[]>;
  /**
   * Records another broadcast at a slot's nonce (a replacement or a no-op), durable before it is
   * broadcast, in place of `replaces`: the hash of the slot's last broadcast, as its signer read
   * the slot. Checked and appended as one write: refused (false, nothing recorded) when the slot is
   * gone, no longer `pending`, or its last broadcast is another (released and used by another
   * trade, or replaced meanwhile), so that no transaction is ever recorded in a slot it was not
   * signed for. The signer then broadcasts nothing. With `audit` (a speed-up asked by a key), its
   * record is appended in the same write, only when the broadcast is recorded.
   */
  recordBroadcast(
    wallet: string,
    nonce: number,
    broadcast: Broadcast,
    replaces: string,
    audit?: AuditEntry,
  ): Promise<boolean>;
  /** The slot of a wallet's nonce, in any state. */
  slot(wallet: string, nonce: number): Promise<NonceSlot | undefined>;
  /**
   * The highest nonce of the wallet that has a slot, in any state (pending, mined, final or
   * lost), or undefined when none has: the next nonce is never at or below it.
   */
  highestNonce(wallet: string): Promise<number | undefined>;
  /** The wallet's slots that are `pending` or `mined`, by nonce. */
  openSlots(wallet: string): Promise<NonceSlot[]>;
  /** Sets a slot's state, with the mined transaction for `mined` and `final` (else null). */
  markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null): Promise<void>;
  /** Marks `final` every `mined` slot of the wallet mined at or below `blockNumber`; returns how many. */
  finalizeSlots(wallet: string, blockNumber: number): Promise<number>;
  /**
   * Forgets a slot whose only broadcast can never be mined (never sent, refused and known to
   * no endpoint, or its nonce taken by another transaction), so its nonce is free again. A
   * slot with several broadcasts, another hash, or a state other than `pending` is kept. A trade
   * the slot carried, if still `signed`, goes back to `accepted` in the same write (never `signed`
   * without a transaction; TRADE_TRANSITIONS.releaseSlot, core/trade-states.ts): it is signed
   * again, or fails, or is forgotten as unsigned if its process is gone.
   * @returns whether the slot was released (false: kept, and its transactions must be seen through)
   */
  releaseSlot(wallet: string, nonce: number, hash: string): Promise<boolean>;
  /**
   * Takes or renews the lease `name` for `holder` for `ttlMs`: true when `holder` holds it now.
   * Of several holders asking, one holds it until it stops renewing and the lease runs out.
   */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up, if `holder` holds it. */
  releaseLease(name: string, holder: string): Promise<void>;
}
