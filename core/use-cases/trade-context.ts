import type { Caller } from "../access/policy.js";

/** Who is asking, and the key that makes a retry safe. */
export interface TradeContext {
  /** The caller's identity (a hash of its api key): idempotency keys are scoped by it. */
  scope?: string;
  /** The caller with its access-file entry (the authorize step's subject); without it, `scope` alone. */
  caller?: Caller;
  /** The Idempotency-Key header (gRPC metadata `idempotency-key`), when sent. */
  idempotencyKey?: string | undefined;
  /** The Quote-Id header (gRPC metadata `quote-id`): the quote the trade executes under, when sent. */
  quoteId?: string | undefined;
}
