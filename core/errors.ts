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
  | "chain_unavailable";

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
