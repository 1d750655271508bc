/**
 * Domain errors. Each has a stable `code` that the transports map to a Connect/gRPC
 * code and an HTTP status (adapters/transport/error-map.ts). Messages name the
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
  | "trade_pending";

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
 * The trade's transaction was broadcast but no receipt came in time. It is not resent:
 * it may still be mined. A retry with the same Idempotency-Key returns its outcome.
 */
export class TradePendingError extends DomainError {
  readonly code = "trade_pending";
  constructor(readonly txHash: string) {
    super(`trade pending: transaction ${txHash} was broadcast and is not mined yet; it will not be resent`);
    this.name = "TradePendingError";
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
