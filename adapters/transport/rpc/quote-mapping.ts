/** Quote's messages: the request as the use case validates it, and the answer as protobuf. */
import { create } from "@bufbuild/protobuf";

import type { QuoteView } from "../../../core/index.js";
import {
  QuoteResponseSchema,
  type QuoteRequest as QuoteRequestMessage,
  type QuoteResponse as QuoteResponseMessage,
} from "../../../gen/tokentrade/v1/token_pb.js";

/**
 * The quote body the use case validates, built from the protobuf request. The required strings
 * pass "" as absent ("<field>: is required", as for JSON); the optional fields are absent when unset.
 */
export function quoteInputFromMessage(message: QuoteRequestMessage): Record<string, string | number | undefined> {
  const orAbsent = (value: string) => (value === "" ? undefined : value);
  return {
    kind: orAbsent(message.kind),
    userAddress: message.userAddress,
    destinatary: message.destinatary,
    amount: orAbsent(message.amount),
    usdAddress: orAbsent(message.usdAddress),
    slippageBps: message.slippageBps,
  };
}

export function quoteMessage(quote: QuoteView): QuoteResponseMessage {
  return create(QuoteResponseSchema, {
    quoteId: quote.quoteId,
    expiresAt: quote.expiresAt,
    kind: quote.kind,
    userAddress: quote.userAddress,
    ...(quote.destinatary === null ? {} : { destinatary: quote.destinatary }),
    usdAddress: quote.usdAddress,
    slippageBps: quote.slippageBps,
    amountIn: quote.amountIn,
    expectedOut: quote.expectedOut,
    minOut: quote.minOut,
    price: quote.price,
    gas: quote.gas,
    networkFee: { wei: quote.networkFee.wei, ...(quote.networkFee.usd === null ? {} : { usd: quote.networkFee.usd }) },
    issues: quote.issues,
  });
}
