/** The request headers (gRPC metadata keys) the service reads, named once for every protocol. */

/** The caller's key, as the SPEC names it (with an underscore: nginx drops it unless `underscores_in_headers on;`). */
export const API_KEY_HEADER = "api_key";

/** What makes a trade safe to retry: the same key and request answer the first outcome. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";

/** The quote a trade executes under (POST /api/v1/token/quote's quoteId): its minOut and expiry bind the trade. */
export const QUOTE_ID_HEADER = "quote-id";
