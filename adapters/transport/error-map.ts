import { Code, ConnectError } from "@connectrpc/connect";

import { DomainError, type DomainErrorCode } from "../../core/index.js";

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
};

/** The message a client sees for a bug; the error itself is only logged. */
export const INTERNAL_MESSAGE = "internal error";

/** A thrown value turned into what the client is told. */
export interface MappedError {
  error: ConnectError;
  /** True for anything that is neither a DomainError nor a ConnectError: a bug, logged with its stack. */
  internal: boolean;
}

/**
 * Maps anything a handler throws to a ConnectError:
 * - a ConnectError (e.g. unauthenticated) is kept;
 * - a DomainError gets its code from DOMAIN_TO_CONNECT_CODE and keeps its message,
 *   which names the field or the condition and never carries secrets;
 * - anything else becomes `internal` with a generic message, hiding the details.
 */
export function toConnectError(thrown: unknown): MappedError {
  if (thrown instanceof ConnectError) return { error: thrown, internal: false };
  if (thrown instanceof DomainError) {
    const code = DOMAIN_TO_CONNECT_CODE[thrown.code] as Code | undefined;
    if (code !== undefined) {
      return { error: new ConnectError(thrown.message, code, undefined, undefined, thrown), internal: false };
    }
  }
  return { error: new ConnectError(INTERNAL_MESSAGE, Code.Internal, undefined, undefined, thrown), internal: true };
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
