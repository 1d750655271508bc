/**
 * Domain errors. Each has a stable `code` that the transports map to a Connect/gRPC
 * code and an HTTP status (adapters/transport/rpc/error-map.ts). Messages name the
 * field or the condition and never carry secrets.
 */
export type DomainErrorCode =
  | "invalid_argument"
  | "unknown_wallet"
  | "insufficient_funds"
  | "trade_reverted"
  | "price_unavailable"
  | "chain_unavailable"
  | "idempotency_mismatch"
  | "idempotency_in_flight"
  | "trade_pending"
  | "trade_expired"
  | "trade_cancelled"
  | "trade_not_replaceable"
  | "trade_dropped"
  | "trade_not_found"
  | "fees_too_high"
  | "transaction_refused"
  | "quote_not_found"
  | "quote_expired"
  | "quote_used"
  | "quote_mismatch"
  | "quote_slippage"
  | "webhook_delivery_not_found"
  | "webhook_delivery_not_failed"
  | "permission_denied"
  | "spending_limit_exceeded"
  | "wallet_paused"
  | "wallet_not_paused"
  | "approval_pending"
  | "approval_conflict"
  | "approval_expired"
  | "approval_interrupted"
  | "trade_rejected";

export abstract class DomainError extends Error {
  abstract readonly code: DomainErrorCode;
}

/** The request is malformed; `field` names the offending field. */
export class InvalidArgumentError extends DomainError {
  readonly code = "invalid_argument";
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = "InvalidArgumentError";
  }
}

/** The service holds no signing key for `userAddress`. */
export class UnknownWalletError extends DomainError {
  readonly code = "unknown_wallet";
  constructor(readonly wallet: string) {
    super(`userAddress: the service does not sign for ${wallet}`);
    this.name = "UnknownWalletError";
  }
}

/** A balance or allowance (the wallet's or the swap's reserves) cannot cover the trade. */
export class InsufficientFundsError extends DomainError {
  readonly code = "insufficient_funds";
  constructor(message: string) {
    super(message);
    this.name = "InsufficientFundsError";
  }
}

/** The chain would revert the trade; `reason` is the contract's reason. */
export class TradeRevertedError extends DomainError {
  readonly code = "trade_reverted";
  constructor(readonly reason: string) {
    super(`trade would revert: ${reason}`);
    this.name = "TradeRevertedError";
  }
}

/** The price feed is stale, broken or non-positive. */
export class PriceUnavailableError extends DomainError {
  readonly code = "price_unavailable";
  constructor(reason: string) {
    super(`price unavailable: ${reason}`);
    this.name = "PriceUnavailableError";
  }
}

/** The chain (its JSON-RPC endpoint) cannot be reached. */
export class ChainUnavailableError extends DomainError {
  readonly code = "chain_unavailable";
  constructor(reason: string) {
    super(`chain unavailable: ${reason}`);
    this.name = "ChainUnavailableError";
  }
}

/** An Idempotency-Key was reused with a different request. */
export class IdempotencyKeyReusedError extends DomainError {
  readonly code = "idempotency_mismatch";
  constructor() {
    super("Idempotency-Key: was already used with a different request");
    this.name = "IdempotencyKeyReusedError";
  }
}

/** The first request with this Idempotency-Key is still running; retry later. */
export class IdempotencyInFlightError extends DomainError {
  readonly code = "idempotency_in_flight";
  constructor() {
    super("Idempotency-Key: a request with this key is still in flight; retry later for its result");
    this.name = "IdempotencyInFlightError";
  }
}

/**
 * The trade's transaction was broadcast but no receipt came in time. The service sees it
 * through in the background (the same signed bytes again if a node forgets it, higher fees at
 * the same nonce if it is slow, a no-op at its deadline): it ends confirmed, or expired with
 * nothing paid, never paid twice. A retry with the same Idempotency-Key returns its outcome.
 */
export class TradePendingError extends DomainError {
  readonly code = "trade_pending";
  constructor(readonly txHash: string) {
    super(
      `trade pending: transaction ${txHash} was broadcast and is not mined yet; the service sees it through ` +
        "to a receipt, or to its deadline with nothing paid; retry with the same Idempotency-Key for the outcome",
    );
    this.name = "TradePendingError";
  }
}

/**
 * The trade's transaction was not mined before its deadline. The deadline is in its calldata,
 * so it can never execute later; its nonce was taken by a no-op. Nothing was paid.
 */
export class TradeExpiredError extends DomainError {
  readonly code = "trade_expired";
  constructor(
    readonly deadline: number,
    readonly nonce: number,
  ) {
    super(
      `trade expired: not mined before its deadline ${new Date(deadline * 1000).toISOString()}; ` +
        `a no-op took its nonce ${nonce}, so it can never execute; nothing was paid`,
    );
    this.name = "TradeExpiredError";
  }
}

/** The trade's nonce was used by a transaction the service did not sign for it: it can never be mined. */
export class TradeDroppedError extends DomainError {
  readonly code = "trade_dropped";
  constructor(
    readonly wallet: string,
    readonly nonce: number,
  ) {
    super(
      `trade dropped: nonce ${nonce} of ${wallet} was used by a transaction not signed for this trade; nothing was paid`,
    );
    this.name = "TradeDroppedError";
  }
}

/** The chain's base fee is above the service's fee cap: no trade is sent until it falls. */
export class FeesTooHighError extends DomainError {
  readonly code = "fees_too_high";
  constructor(message: string) {
    super(message);
    this.name = "FeesTooHighError";
  }
}

/**
 * A node refused the trade's signed transaction for a reason that is not the trade's own (its
 * gas, a gateway's error), and no endpoint knows it: nothing was, or can be, paid. Retry later.
 */
export class TransactionRefusedError extends DomainError {
  readonly code = "transaction_refused";
  constructor(reason: string) {
    super(`the JSON-RPC node refused the signed transaction (${reason}); nothing was paid`);
    this.name = "TransactionRefusedError";
  }
}

/** No trade sent with the caller's key (or one it sees) broadcast this transaction, or has this id. */
export class TradeNotFoundError extends DomainError {
  readonly code = "trade_not_found";
  constructor(reference: string, by: "transactionHash" | "id" = "transactionHash") {
    super(
      by === "id"
        ? `id: no trade of yours is ${reference}`
        : `transactionHash: no trade of yours broadcast ${reference}`,
    );
    this.name = "TradeNotFoundError";
  }
}

/** No webhook delivery of the caller's has this id. */
export class WebhookDeliveryNotFoundError extends DomainError {
  readonly code = "webhook_delivery_not_found";
  constructor(id: string) {
    super(`id: no webhook delivery of yours is ${id}`);
    this.name = "WebhookDeliveryNotFoundError";
  }
}

/** Only a failed webhook delivery can be retried: a pending one is being retried already, a delivered one was delivered. */
export class WebhookDeliveryNotFailedError extends DomainError {
  readonly code = "webhook_delivery_not_failed";
  constructor(id: string) {
    super(`id: webhook delivery ${id} is not failed (only a failed one can be retried)`);
    this.name = "WebhookDeliveryNotFailedError";
  }
}

/** No quote of the caller's has this Quote-Id (never issued, issued to another api key, or swept). */
export class QuoteNotFoundError extends DomainError {
  readonly code = "quote_not_found";
  constructor(quoteId: string) {
    super(`Quote-Id: no quote of yours is ${quoteId} (quote_not_found); ask for a new one`);
    this.name = "QuoteNotFoundError";
  }
}

/**
 * The quote the trade names expired before the trade, or has too little time left for the trade
 * to be mined before it (`neededMs`, at `now`): nothing was sent.
 */
export class QuoteExpiredError extends DomainError {
  readonly code = "quote_expired";
  constructor(
    quoteId: string,
    readonly expiresAt: Date,
    tooSoon?: { now: number; neededMs: number },
  ) {
    super(
      tooSoon === undefined || expiresAt.getTime() <= tooSoon.now
        ? `Quote-Id: quote ${quoteId} expired at ${expiresAt.toISOString()} (quote_expired); ask for a new one`
        : `Quote-Id: quote ${quoteId} expires at ${expiresAt.toISOString()}, ` +
            `${((expiresAt.getTime() - tooSoon.now) / 1000).toFixed(1)} s from now: a trade needs at least ` +
            `${(tooSoon.neededMs / 1000).toFixed(1)} s to be mined before it (two of the chain's blocks, and never ` +
            "less than 3 s) (quote_expired); ask for a new one",
    );
    this.name = "QuoteExpiredError";
  }
}

/** The quote the trade names was used by another trade already: a quote is used at most once. */
export class QuoteUsedError extends DomainError {
  readonly code = "quote_used";
  constructor(quoteId: string) {
    super(`Quote-Id: quote ${quoteId} was used by another trade (quote_used); ask for a new one`);
    this.name = "QuoteUsedError";
  }
}

/** The trade is not the one quoted: `field` names the first difference (kind, amount, coin, wallet, destinatary). */
export class QuoteMismatchError extends DomainError {
  readonly code = "quote_mismatch";
  constructor(
    readonly field: string,
    quoteId: string,
    quoted: string,
  ) {
    super(`Quote-Id: quote ${quoteId} is for ${field} ${quoted}, not this trade's (quote_mismatch)`);
    this.name = "QuoteMismatchError";
  }
}

/**
 * The trade would pay out less than its quote's minOut at the current price (it moved beyond the
 * quote's slippage): refused before anything was signed. Ask for a new quote.
 */
export class QuoteSlippageError extends DomainError {
  readonly code = "quote_slippage";
  constructor(
    readonly output: bigint,
    readonly minOut: bigint,
  ) {
    super(
      `Quote-Id: the trade would pay out ${output} base units now, less than the quote's minOut ${minOut} ` +
        "(quote_slippage); nothing was sent; ask for a new quote",
    );
    this.name = "QuoteSlippageError";
  }
}

/** A failure recorded in the trade journal, answered again to a retry with the same key. */
export class RecordedTradeError extends DomainError {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "RecordedTradeError";
  }
}

/**
 * The access policy refuses the caller this (ACCESS_FILE): a role or a scope it lacks, or a
 * destinatary on the denylist. The message names the key's name and what it may not do.
 */
export class PermissionDeniedError extends DomainError {
  readonly code = "permission_denied";
  /**
   * @param rule - what refused: the key's roles, one of its scopes (kinds, wallets, coins,
   *   destinataries), the denylist (metrics count refusals by it), or, deciding on a held trade,
   *   that the key sent it
   */
  constructor(
    message: string,
    readonly rule: "role" | "scope" | "denylist" | "requester" = "role",
  ) {
    super(message);
    this.name = "PermissionDeniedError";
  }
}

/**
 * A spending limit of the access policy has no room for the trade: nothing was reserved or sent.
 * Not the rate limiter's refusal: the message says it is a spending limit and names the limit, its
 * window, what is used and the maximum. `retryAfterMs`: when the rolling window frees enough room
 * (absent when the trade alone is over the maximum, so waiting never helps).
 */
export class SpendingLimitError extends DomainError {
  readonly code = "spending_limit_exceeded";
  constructor(
    message: string,
    readonly limit: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = "SpendingLimitError";
  }
}

/**
 * The exchange wallet is paused: a transaction this service never signed was mined from it
 * (OUTSIDE_TX_POLICY=pause), so its key may be in other hands. Nothing is signed from it until an
 * admin resumes it (POST /api/v1/wallets/{address}/resume); nothing was sent.
 */
export class WalletPausedError extends DomainError {
  readonly code = "wallet_paused";
  constructor(
    readonly wallet: string,
    readonly pausedAt: Date,
    readonly outside: { nonce: number; hash: string | null },
  ) {
    super(
      `exchange wallet ${wallet} is paused since ${pausedAt.toISOString()}: a transaction this service did not sign ` +
        `(${outside.hash ?? "hash unknown"}, nonce ${outside.nonce}) was mined from it (OUTSIDE_TX_POLICY=pause); ` +
        `nothing was sent; an admin resumes it with POST /api/v1/wallets/${wallet}/resume`,
    );
    this.name = "WalletPausedError";
  }
}

/** A resume asked for an exchange wallet that is not paused: nothing changed. */
export class WalletNotPausedError extends DomainError {
  readonly code = "wallet_not_paused";
  constructor(wallet: string) {
    super(`address: exchange wallet ${wallet} is not paused`);
    this.name = "WalletNotPausedError";
  }
}

/**
 * The trade is held for an approval (ACCESS_FILE `approvals`), or approved and not signed yet:
 * nothing was signed. Not a failure: JSON answers 202 with `trade` (the trade as GET
 * /api/v1/trades/{id} shows it, with its approval), gRPC failed_precondition with the metadata
 * `trade-id` and `trade-status`. A retry with the same Idempotency-Key answers the same while it
 * waits, then its outcome.
 */
export class TradeHeldError extends DomainError {
  readonly code = "approval_pending";
  constructor(
    readonly tradeId: string,
    readonly status: "pending_approval" | "approved",
    /** The trade as the trade views show it (TradeView). */
    readonly trade: unknown,
  ) {
    super(
      status === "pending_approval"
        ? `trade ${tradeId} is held for approval (pending_approval): nothing was signed; it runs once approved, ` +
            "and a retry with the same Idempotency-Key answers its outcome"
        : `trade ${tradeId} is approved and about to be signed: a retry with the same Idempotency-Key answers its outcome`,
    );
    this.name = "TradeHeldError";
  }
}

/** A decision on a trade already decided (approved, rejected, expired), or an approver going back on its own. */
export class ApprovalConflictError extends DomainError {
  readonly code = "approval_conflict";
  constructor(tradeId: string, status: string, detail?: string) {
    super(
      `id: trade ${tradeId} is ${status.replace("_", " ")}${detail === undefined ? "" : `, ${detail}`}: ` +
        "it takes no other decision (the same approver repeating its own decision gets the same answer)",
    );
    this.name = "ApprovalConflictError";
  }
}

/**
 * The trade was cancelled by its sender or an admin: nothing was signed, or the no-op at its nonce
 * was mined in place of its transaction. Nothing was paid (HTTP 409).
 */
export class TradeCancelledError extends DomainError {
  readonly code = "trade_cancelled";
  constructor(message = "the trade was cancelled: nothing was paid") {
    super(message);
    this.name = "TradeCancelledError";
  }
}

/**
 * A cancel or a speed-up asked of a trade that has nothing to replace: it is final (confirmed,
 * failed, expired, rejected, cancelled), already mined, or (a speed-up) being cancelled or freed
 * by a no-op. The message names its state (HTTP 409).
 */
export class TradeNotReplaceableError extends DomainError {
  readonly code = "trade_not_replaceable";
  constructor(
    readonly tradeId: string,
    readonly status: string,
    what: "cancel" | "speed-up",
    why?: string,
  ) {
    super(
      `id: trade ${tradeId} is ${status.replace("_", " ")}${why === undefined ? "" : ` (${why})`}: ` +
        `there is nothing to ${what === "cancel" ? "cancel" : "speed up"}`,
    );
    this.name = "TradeNotReplaceableError";
  }
}
