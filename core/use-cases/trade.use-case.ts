import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

import {
  ChainUnavailableError,
  DomainError,
  IdempotencyInFlightError,
  IdempotencyKeyReusedError,
  InvalidArgumentError,
  RecordedTradeError,
  TradePendingError,
} from "../errors.js";
import type { TradeJournal, TradeRecord } from "../ports/journal.port.js";
import type { SignedTrade, TradePort } from "../ports/trade.port.js";
import type { TradeKind, TradeOrder, TradeRequest, TransactionReceipt } from "../types.js";
import { parseTradeRequest, type TradeConfig } from "../validation/trade-request.js";
import type { TradeSettlement } from "./settlement.js";

/** Who is asking, and the key that makes a retry safe. */
export interface TradeContext {
  /** The caller's identity (a hash of its api key): idempotency keys are scoped by it. */
  scope?: string;
  /** The Idempotency-Key header (gRPC metadata `idempotency-key`), when sent. */
  idempotencyKey?: string | undefined;
}

/** A trade operation as the transports call it: raw body in, receipt out. */
export type TradeUseCase = (input: unknown, context?: TradeContext) => Promise<TransactionReceipt>;

export interface TradeJournalling {
  journal: TradeJournal;
  settlement: TradeSettlement;
  /** How long a retry waits for the first request with its key before answering 409 (or pending). */
  inFlightWaitMs: number;
}

/** Idempotency keys: 1 to 255 visible ASCII characters, as the IETF draft suggests. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export function parseIdempotencyKey(value: string): string {
  if (!IDEMPOTENCY_KEY.test(value)) {
    throw new InvalidArgumentError("Idempotency-Key", "must be 1 to 255 visible ASCII characters");
  }
  return value;
}

/** Identifies a request by what it asks for: the same trade in other spellings ("1.0", lowercase) hashes the same. */
function requestHash(order: TradeOrder): string {
  const canonical = JSON.stringify([order.kind, order.wallet, order.destinatary, order.amount.toString(), order.stable.address]);
  return bytesToHex(sha256(utf8ToBytes(canonical)));
}

/**
 * Builds the use case for one trade operation (sell, buy or remittance).
 *
 * Without a journal: validate, then hand the order to the port.
 * With a journal, every accepted trade is recorded before its transaction is broadcast,
 * and an Idempotency-Key makes a retry safe: the same key with the same request returns the
 * first outcome and never sends a second transaction; with a different request it is refused
 * (IdempotencyKeyReusedError); while the first is in flight a retry waits for it, then gets
 * IdempotencyInFlightError (or TradePendingError once its transaction is out).
 * A trade refused before signing leaves no record, so its key can be retried.
 */
export function tradeUseCase(kind: TradeKind, trade: TradePort, config: TradeConfig, journalling?: TradeJournalling): TradeUseCase {
  return async (input, context = {}) => {
    const order = parseTradeRequest(kind, input, config);
    const key = context.idempotencyKey === undefined ? null : parseIdempotencyKey(context.idempotencyKey);
    if (!journalling) {
      if (key !== null) throw new InvalidArgumentError("Idempotency-Key", "is not supported: this service runs without a trade journal");
      return trade[kind](order);
    }

    const { journal } = journalling;
    const hash = requestHash(order);
    const request = pickRequest(input as TradeRequest);
    for (;;) {
      const { created, record } = await journal.open({ scope: context.scope ?? "", idempotencyKey: key, requestHash: hash, kind, request });
      if (created) return execute(trade, journalling, order, record.id);
      if (record.requestHash !== hash) throw new IdempotencyKeyReusedError();
      const outcome = await awaitOutcome(journalling, record);
      if (outcome !== "discarded") return outcome;
      // The first attempt was refused before signing and left no record: run this one afresh.
    }
  };
}

async function execute(trade: TradePort, journalling: TradeJournalling, order: TradeOrder, id: string): Promise<TransactionReceipt> {
  const { journal, settlement } = journalling;
  let signed: SignedTrade | undefined;
  try {
    const receipt = await trade[order.kind](order, {
      async onSigned(tx) {
        await journal.markSigned(id, tx);
        signed = tx;
      },
    });
    // The money moved: answer with the receipt even if the journal cannot be written now;
    // the settlement records it once the journal is back.
    await journal.markConfirmed(id, receipt).catch(() => settlement.watch(id, signed!));
    return receipt;
  } catch (error) {
    if (signed === undefined) {
      // Nothing was signed, so nothing can be mined: forget the attempt.
      await journal.discard(id).catch(() => {});
      throw error;
    }
    if (error instanceof TradePendingError) {
      settlement.watch(id, signed);
      throw error;
    }
    if (error instanceof DomainError && !(error instanceof ChainUnavailableError)) {
      // A definite answer: the node refused the transaction, or it reverted when mined.
      await journal.markFailed(id, { code: error.code, message: error.message }).catch(() => settlement.watch(id, signed!));
      throw error;
    }
    // Signed, then the node stopped answering (or a bug): only the chain knows whether it went out.
    const settled = await settlement.settleOnce(id, signed).catch(() => false);
    if (!settled) {
      settlement.watch(id, signed);
      throw new TradePendingError(signed.txHash);
    }
    const record = await journal.get(id);
    if (record?.status === "confirmed" && record.receipt) return record.receipt;
    if (record?.status === "failed" && record.error && error instanceof DomainError) throw error;
    throw recorded(record) ?? error;
  }
}

/** Waits for the first request with a key to finish, polling the shared journal. */
async function awaitOutcome(journalling: TradeJournalling, first: TradeRecord): Promise<TransactionReceipt | "discarded"> {
  const until = Date.now() + journalling.inFlightWaitMs;
  let record: TradeRecord | undefined = first;
  for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
    if (record === undefined) return "discarded";
    if (record.status === "confirmed" && record.receipt) return record.receipt;
    const failure = recorded(record);
    if (failure) throw failure;
    const tx = signedTrade(record);
    if (tx) {
      // Broadcast already: the chain may know the outcome before whoever is watching it does.
      const settled = await journalling.settlement.settleOnce(record.id, tx).catch(() => false);
      if (settled) {
        record = await journalling.journal.get(first.id);
        continue;
      }
    }
    if (Date.now() >= until) throw tx ? new TradePendingError(tx.txHash) : new IdempotencyInFlightError();
    await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, until - Date.now()))));
    record = await journalling.journal.get(first.id);
  }
}

function recorded(record: TradeRecord | undefined): DomainError | undefined {
  if (record?.status !== "failed" || !record.error) return undefined;
  return new RecordedTradeError(record.error.code as DomainError["code"], record.error.message);
}

function signedTrade(record: TradeRecord): SignedTrade | undefined {
  if (record.status !== "signed" || record.wallet === null || record.nonce === null || record.txHash === null || record.rawTx === null) {
    return undefined;
  }
  return { wallet: record.wallet, nonce: record.nonce, txHash: record.txHash, rawTx: record.rawTx };
}

function pickRequest(input: TradeRequest): TradeRequest {
  return { userAddress: input.userAddress, destinatary: input.destinatary, amount: input.amount, usdAddress: input.usdAddress };
}
