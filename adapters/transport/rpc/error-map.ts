import { Code, ConnectError } from "@connectrpc/connect";

import { DomainError, type DomainErrorCode, SpendingLimitError, TradeHeldError } from "../../../core/index.js";

/**
 * Domain error code → Connect (gRPC) code. The single table every transport uses,
 * so the same domain error gives the same code over gRPC, Connect, gRPC-Web and
 * the JSON routes.
 */
export const DOMAIN_TO_CONNECT_CODE: Readonly<Record<DomainErrorCode, Code>> = {
  // The request itself is wrong (shape, address, amount, stable coin): fix and resend.
  invalid_argument: Code.InvalidArgument,
  // The service does not sign for userAddress: the caller may not use that wallet.
  unknown_wallet: Code.PermissionDenied,
  // The wallet's balance or allowance, or the swap's reserves, cannot cover the trade now.
  insufficient_funds: Code.FailedPrecondition,
  // The chain would revert the trade (checked before sending); the state must change first.
  trade_reverted: Code.FailedPrecondition,
  // The price feed is stale or broken: retry later.
  price_unavailable: Code.Unavailable,
  // The JSON-RPC endpoint cannot be reached: retry later.
  chain_unavailable: Code.Unavailable,
  // An Idempotency-Key reused with a different request (HTTP 422, see DOMAIN_HTTP_STATUS).
  idempotency_mismatch: Code.FailedPrecondition,
  // The first request with this Idempotency-Key is still running: retry later (HTTP 409).
  idempotency_in_flight: Code.Aborted,
  // Broadcast, not mined in time; seen through in the background: retry with the same key for the outcome.
  trade_pending: Code.DeadlineExceeded,
  // Not mined before its deadline; a no-op took its nonce and nothing was paid: a new trade is needed.
  trade_expired: Code.FailedPrecondition,
  // Its nonce was taken by a transaction not signed for it (someone else used the wallet); nothing paid.
  trade_dropped: Code.FailedPrecondition,
  // No trade of the caller's broadcast that hash (another caller's trade is not shown either).
  trade_not_found: Code.NotFound,
  // The chain's base fee is above the service's fee cap: nothing was sent; retry once fees fall.
  fees_too_high: Code.Unavailable,
  // A node refused the signed transaction (not for the trade's own reasons) and none knows it; nothing paid: retry later.
  transaction_refused: Code.Unavailable,
  // The Quote-Id names no quote of the caller's (never issued, another key's, or swept long after expiry).
  quote_not_found: Code.NotFound,
  // The quote expired before the trade: nothing sent; ask for a new quote (HTTP 410 Gone).
  quote_expired: Code.FailedPrecondition,
  // The quote was used by another trade: a quote is used once (HTTP 409).
  quote_used: Code.AlreadyExists,
  // The trade is not the one quoted (kind, amount, coin, wallet or destinatary; HTTP 422, as a reused Idempotency-Key).
  quote_mismatch: Code.FailedPrecondition,
  // The price moved: the trade would pay less than the quote's minOut; nothing sent; quote again (HTTP 409).
  quote_slippage: Code.Aborted,
  // No webhook delivery of the caller's has that id.
  webhook_delivery_not_found: Code.NotFound,
  // A retry asked for a delivery that is not failed (pending ones are retried already; HTTP 409).
  webhook_delivery_not_failed: Code.FailedPrecondition,
  // The access policy refuses the caller this: a role, a scope, or a denied destinatary (ACCESS_FILE).
  permission_denied: Code.PermissionDenied,
  // A spending limit has no room for the trade (ACCESS_FILE); Retry-After says when the window frees enough.
  spending_limit_exceeded: Code.ResourceExhausted,
  // Held for an approval (ACCESS_FILE approvals), nothing signed: not `unavailable`, which clients
  // retry by themselves; metadata trade-id and trade-status say which trade and where it stands.
  // JSON answers 202 with the trade instead (route-table.ts).
  approval_pending: Code.FailedPrecondition,
  // A decision on a trade already decided (approved, rejected, expired): HTTP 409.
  approval_conflict: Code.Aborted,
  // Held and not approved in time: nothing paid; a new trade is needed (HTTP 410 Gone, as a quote's expiry).
  approval_expired: Code.FailedPrecondition,
  // Approved, then the service running it stopped before it was signed: nothing paid; send it again (HTTP 409).
  approval_interrupted: Code.Aborted,
  // An approver rejected it: final, nothing paid (HTTP 409).
  trade_rejected: Code.FailedPrecondition,
  // The wallet is paused after a transaction the service never signed (OUTSIDE_TX_POLICY=pause): nothing sent; an admin resumes it.
  wallet_paused: Code.Unavailable,
  // A resume asked for a wallet that is not paused (HTTP 409).
  wallet_not_paused: Code.FailedPrecondition,
  // Cancelled by its sender or an admin: nothing paid (HTTP 409).
  trade_cancelled: Code.FailedPrecondition,
  // A cancel or a speed-up of a trade with nothing to replace: final, mined, or being cancelled (HTTP 409).
  trade_not_replaceable: Code.FailedPrecondition,
};

/**
 * The JSON routes' HTTP status for the domain errors whose status is not Connect's for
 * their code: the Idempotency-Key draft answers a reused key with 422; a quote that expired is
 * 410 Gone, and one that does not match the trade 422, like a reused key.
 */
export const DOMAIN_HTTP_STATUS: Readonly<Partial<Record<DomainErrorCode, number>>> = {
  idempotency_mismatch: 422,
  quote_expired: 410,
  quote_mismatch: 422,
  webhook_delivery_not_failed: 409,
  wallet_not_paused: 409,
  approval_expired: 410,
  trade_rejected: 409,
  trade_cancelled: 409,
  trade_not_replaceable: 409,
};

/** The message a client sees for a bug; the error itself is only logged. */
export const INTERNAL_MESSAGE = "internal error";

/** A thrown value turned into what the client is told. */
export interface MappedError {
  error: ConnectError;
  /** True for anything that is neither a DomainError nor a ConnectError: a bug, logged with its stack. */
  internal: boolean;
  /** The HTTP status the JSON routes answer with. */
  status: number;
}

/**
 * Maps anything a handler throws to a ConnectError:
 * - a ConnectError (e.g. unauthenticated) is kept;
 * - a DomainError gets its code from DOMAIN_TO_CONNECT_CODE and keeps its message,
 *   which names the field or the condition and never carries secrets;
 * - anything else becomes `internal` with a generic message, hiding the details.
 */
export function toConnectError(thrown: unknown): MappedError {
  if (thrown instanceof ConnectError) return { error: thrown, internal: false, status: httpStatusFor(thrown.code) };
  if (thrown instanceof DomainError) {
    const code = DOMAIN_TO_CONNECT_CODE[thrown.code] as Code | undefined;
    if (code !== undefined) {
      return {
        error: new ConnectError(thrown.message, code, metadataOf(thrown), undefined, thrown),
        internal: false,
        status: DOMAIN_HTTP_STATUS[thrown.code] ?? httpStatusFor(code),
      };
    }
  }
  return {
    error: new ConnectError(INTERNAL_MESSAGE, Code.Internal, undefined, undefined, thrown),
    internal: true,
    status: 500,
  };
}

/**
 * What an error says besides its message (a header on JSON and Connect, a trailer on gRPC and
 * gRPC-Web): a spending limit's refusal when its window frees enough room, `retry-after` in
 * seconds, rounded up; a held trade its id and status, `trade-id` and `trade-status`.
 */
function metadataOf(error: DomainError): Headers | undefined {
  if (error instanceof TradeHeldError) return new Headers({ "trade-id": error.tradeId, "trade-status": error.status });
  if (!(error instanceof SpendingLimitError) || error.retryAfterMs === undefined) return undefined;
  return new Headers({ "retry-after": String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))) });
}

/**
 * Connect code → HTTP status, as the Connect protocol maps them
 * (https://connectrpc.com/docs/protocol#error-codes).
 */
export function httpStatusFor(code: Code): number {
  switch (code) {
    case Code.Canceled:
      return 499; // Client Closed Request
    case Code.Unknown:
      return 500; // Internal Server Error
    case Code.InvalidArgument:
      return 400; // Bad Request
    case Code.DeadlineExceeded:
      return 504; // Gateway Timeout
    case Code.NotFound:
      return 404; // Not Found
    case Code.AlreadyExists:
      return 409; // Conflict
    case Code.PermissionDenied:
      return 403; // Forbidden
    case Code.ResourceExhausted:
      return 429; // Too Many Requests
    case Code.FailedPrecondition:
      return 400; // Bad Request
    case Code.Aborted:
      return 409; // Conflict
    case Code.OutOfRange:
      return 400; // Bad Request
    case Code.Unimplemented:
      return 501; // Not Implemented
    case Code.Internal:
      return 500; // Internal Server Error
    case Code.Unavailable:
      return 503; // Service Unavailable
    case Code.DataLoss:
      return 500; // Internal Server Error
    case Code.Unauthenticated:
      return 401; // Unauthorized
    default:
      return 500; // not a code: treat as a bug
  }
}

/** The Connect protocol's name of a code, e.g. Code.InvalidArgument → "invalid_argument". */
export function codeName(code: Code): string {
  const name = Code[code] as string | undefined;
  if (name === undefined) return "unknown";
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}
