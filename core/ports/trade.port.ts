import type { AuditEntry } from "./audit.port.js";
import type { TradeOrder, TransactionReceipt } from "../types.js";
import type { SignedTradeTx } from "./journal.port.js";
import type { Broadcast } from "./nonce.port.js";

/**
 * A trade priced and proven on the chain: the fees under the cap, the feed policy, and the call
 * it will be signed with succeeding on the latest block with its gas limit. Opaque to the core
 * beyond these fields; it goes back to the port that made it.
 */
export interface ProvenTrade {
  readonly order: TradeOrder;
  /** What it pays out on the block it was proven on, in the output's base units. */
  readonly output: bigint;
}

/**
 * A proven trade with what it spends (and a sell's payout) reserved on top of the trades not yet
 * final: held until `release`, then by its journalled slot until it is final.
 */
export interface ReservedTrade {
  readonly proven: ProvenTrade;
}

/** A reserved trade's transaction, signed at its wallet's next nonce: journalled, then sent (or abandoned). */
export interface SignedTrade {
  readonly tx: SignedTradeTx;
}

/** A signed trade a node took (or one nobody can say went nowhere): its receipt is waited for by `settle`. */
export interface SentTrade {
  readonly tx: SignedTradeTx;
  /** A node holds it, not mined yet: the trade is `submitted`. */
  readonly submitted: boolean;
}

export interface SignOptions {
  /**
   * The caller keeps no record of the trade (a service without a trade journal): the port records
   * the transaction's nonce slot in its own ledger before it is broadcast, so that the lifecycle
   * monitor sees it through, and `send` follows at once.
   */
  unjournalled?: boolean;
}

/** A journalled trade's transactions, as `resolve` looks them up. */
export interface TradeOnChain {
  wallet: string;
  nonce: number;
  broadcasts: ReadonlyArray<Pick<Broadcast, "hash" | "noop">>;
}

/** What the chain says about a journalled trade now. */
export type TradeResolution =
  /**
   * One of its transactions is mined in the canonical chain (`receipt`, fetched now), with
   * `confirmations` (1 in the head block); `confirmed` once that is as many as the service requires.
   */
  | { state: "mined"; receipt: TransactionReceipt; confirmations: number; confirmed: boolean }
  /** Nothing of it is mined (yet). */
  | { state: "pending" }
  /** Its no-op took the nonce after its deadline: nothing was paid. */
  | { state: "expired" }
  /** A transaction the service did not sign for it took the nonce: nothing was paid. */
  | { state: "dropped" };

/**
 * Executes validated trades on a chain, a step at a time, each asked for by the trade use case
 * (core/use-cases/trade.use-case.ts), which journals between them:
 * prove → reserve → sign → (journal) → send → settle, and release once the send is answered.
 *
 * A step refuses a trade that would fail (unknown wallet, missing funds, a revert in the proof,
 * fees above the cap) with a DomainError, sending nothing. `settle` rejects with
 * TradePendingError when the receipt does not come in time (the trade's lifecycle goes on in the
 * background), TradeExpiredError when its deadline passed, TradeRevertedError when it reverted.
 */
export interface TradePort {
  /** Prices and proves the trade: the fees and the cap, the feed policy, its call on the latest block. */
  prove(order: TradeOrder): Promise<ProvenTrade>;
  /**
   * Reserves what the trade spends from its wallet (and a sell's payout from the swap's reserves)
   * on top of what the trades not yet final hold, topping the swap's allowance up first when it
   * falls short (and proving the trade again after it). Refused: nothing is held.
   */
  reserve(trade: ProvenTrade): Promise<ReservedTrade>;
  /**
   * Signs the trade's transaction at its wallet's next nonce. Nothing is broadcast, and the
   * wallet's next nonces wait, until the caller has journalled it and calls `send`, or `abandon`.
   */
  sign(trade: ReservedTrade, options?: SignOptions): Promise<SignedTrade>;
  /**
   * Broadcasts a signed trade the caller journalled. Resolves once a node took it (or nobody can
   * say it went nowhere: it keeps its nonce), or with `again`: its nonce was taken by someone
   * else's transaction and it was signed again at a later one, which the caller journals and
   * sends in turn. Refused (nothing of it can be mined): rejects.
   */
  send(trade: SignedTrade): Promise<SentTrade | { again: SignedTrade }>;
  /** The caller could not journal the signed trade: it is never broadcast, and its nonce goes to the next. */
  abandon(trade: SignedTrade, error: unknown): void;
  /** What is mined at the sent trade's nonce, with the confirmations required: its receipt. */
  settle(trade: SentTrade): Promise<TransactionReceipt>;
  /**
   * The send was answered (or the trade was refused before it): what it reserved is held from
   * now on by its journalled slot, until it is final, if it has one. Once per reserved trade.
   */
  release(trade: ReservedTrade): void;
  /** Looks a journalled trade's transactions up on the chain, without sending anything. */
  resolve(trade: TradeOnChain): Promise<TradeResolution>;
  /**
   * The chain's block time as measured lately, in ms (undefined while unknown): a trade under a
   * quote needs two of them left before the quote's expiry (minTimeLeftMs).
   */
  blockTimeMs(): number | undefined;
}

/** A trade's open nonce, as a cancel or a speed-up asks the chain to replace what it broadcast there. */
export interface ReplaceTarget {
  tradeId: string;
  wallet: string;
  nonce: number;
}

/**
 * What a cancel or a speed-up did on the chain:
 * - `replaced`: a new transaction at the trade's nonce (the no-op, or the call re-priced) was signed,
 *   recorded in the ledger, then broadcast; `hash` is its hash;
 * - `deferred`: nothing was signed now (the trade's send is still on its way, or the fee cap leaves
 *   no room yet); for a cancel, the lifecycle monitor signs the no-op as soon as it may;
 * - `taken`: the nonce is used on chain already (the trade's own transaction, most likely): nothing
 *   was signed, and the monitor records what took it;
 * - `unchanged` (a speed-up): the fees leave no room for a higher bid; nothing was signed.
 */
export type Replacement =
  | { state: "replaced"; hash: string; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }
  | { state: "deferred"; reason: string }
  | { state: "taken" }
  | { state: "unchanged"; reason: string };

/** The audit record of a replacement, once its hash and fees are known (core/audit.ts builds it). */
export type ReplacementAudit = (replaced: Extract<Replacement, { state: "replaced" }>) => AuditEntry;

/**
 * Replaces what a trade broadcast at its nonce (the lifecycle monitor of its wallet does it, one
 * action at a time with its own looks): never at another nonce, always recorded before it is
 * broadcast, and never while the trade's own send is still on its way.
 */
export interface TradeReplacer {
  /**
   * Replaces the trade's pending transaction with a no-op (a 0-value transfer to the wallet itself)
   * at fees the nodes take in its place (at least +10 % on both fees, the market's when higher),
   * never above the fee cap.
   */
  cancel(target: ReplaceTarget): Promise<Replacement>;
  /**
   * Re-prices the trade's pending transaction (the same call, replacement fees), or, with
   * `maxFeePerGas`, at that maximum fee.
   * `audit` gives the record of the replacement, appended with it in the ledger's write
   * (NonceLedger.recordBroadcast) when it is signed.
   * @throws InvalidArgumentError naming `maxFeePerGasGwei` and the cap, or the least a replacement needs
   */
  speedUp(target: ReplaceTarget, maxFeePerGas?: bigint, audit?: ReplacementAudit): Promise<Replacement>;
}
