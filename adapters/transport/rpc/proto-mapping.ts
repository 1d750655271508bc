import { create } from "@bufbuild/protobuf";

import type {
  ApprovalDecision,
  EventLog,
  PriceRecord,
  TradeApproval,
  TradeView,
  TransactionReceipt,
} from "../../../core/index.js";
import {
  EventLogSchema,
  PriceRecordSchema,
  TradeSchema,
  TransactionReceiptSchema,
  type Trade as TradeMessage,
  type EventLog as EventLogMessage,
  type PriceRecord as PriceRecordMessage,
  type TradeRequest as TradeRequestMessage,
  type TransactionReceipt as TransactionReceiptMessage,
} from "../../../gen/tokentrade/v1/token_pb.js";

/**
 * The trade body the use cases validate, built from the protobuf request. proto3
 * cannot tell an unset string from "", so "" is passed as absent and the use case
 * answers "<field>: is required", as it does for a JSON body without the field.
 */
export function tradeInputFromMessage(message: TradeRequestMessage): Record<string, string | undefined> {
  const orAbsent = (value: string) => (value === "" ? undefined : value);
  return {
    userAddress: orAbsent(message.userAddress),
    destinatary: orAbsent(message.destinatary),
    amount: orAbsent(message.amount),
    usdAddress: orAbsent(message.usdAddress),
  };
}

const UINT64_LIMIT = 2n ** 64n;
const UINT32_LIMIT = 2 ** 32;

/**
 * A quantity as a uint64 field. A value out of range (a node's answer no chain gives) would fail
 * the encoding after the handler, where Connect answers the encoder's own message: it fails
 * here instead, as a bug the error map answers "internal error" and logs.
 * @throws RangeError naming the field
 */
function uint64(value: number | string | bigint, field: string): bigint {
  const big = BigInt(value);
  if (big < 0n || big >= UINT64_LIMIT) throw new RangeError(`${field}: ${big} is out of uint64 range`);
  return big;
}

/** A count as a uint32 field (see uint64). */
function uint32(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 0 || value >= UINT32_LIMIT)
    throw new RangeError(`${field}: ${value} is out of uint32 range`);
  return value;
}

function eventLogMessage(log: EventLog): EventLogMessage {
  return create(EventLogSchema, {
    address: log.address,
    blockHash: log.blockHash,
    blockNumber: uint64(log.blockNumber, "blockNumber"),
    logIndex: uint32(log.logIndex, "logIndex"),
    removed: log.removed,
    transactionHash: log.transactionHash,
    transactionIndex: uint32(log.transactionIndex, "transactionIndex"),
    id: log.id,
    returnValues: {},
    // signature is null in every JSON log: left unset.
    raw: { data: log.raw.data, topics: [...log.raw.topics] },
  });
}

/**
 * The receipt as a protobuf message. `events` becomes a list in key order
 * ("0", "1", ... compared as numbers); `contractAddress` (always null) stays unset.
 */
export function receiptMessage(receipt: TransactionReceipt): TransactionReceiptMessage {
  const events = Object.entries(receipt.events)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([, log]) => eventLogMessage(log));
  return create(TransactionReceiptSchema, {
    blockHash: receipt.blockHash,
    blockNumber: uint64(receipt.blockNumber, "blockNumber"),
    cumulativeGasUsed: uint64(receipt.cumulativeGasUsed, "cumulativeGasUsed"),
    effectiveGasPrice: uint64(receipt.effectiveGasPrice, "effectiveGasPrice"),
    from: receipt.from,
    gasUsed: uint64(receipt.gasUsed, "gasUsed"),
    logsBloom: receipt.logsBloom,
    status: receipt.status,
    to: receipt.to,
    transactionHash: receipt.transactionHash,
    transactionIndex: uint32(receipt.transactionIndex, "transactionIndex"),
    type: receipt.type,
    events,
  });
}

/** The price record as a protobuf message; the two rate objects become maps. */
export function priceMessage(record: PriceRecord): PriceRecordMessage {
  return create(PriceRecordSchema, {
    cryptoCurrency: record.cryptoCurrency,
    rateForCashCurrency: { ...record.rateForCashCurrency },
    rateWithDiscountForCashCurrency: { ...(record.rateWithDiscountForCashCurrency as Record<string, number>) },
  });
}

/** A trade as the journal knows it, as a protobuf message; null fields stay unset. */
export function tradeMessage(trade: TradeView): TradeMessage {
  return create(TradeSchema, {
    id: trade.id,
    kind: trade.kind,
    status: trade.status,
    request: { ...trade.request },
    ...(trade.wallet === null ? {} : { wallet: trade.wallet }),
    ...(trade.nonce === null ? {} : { nonce: BigInt(trade.nonce) }),
    ...(trade.deadline === null ? {} : { deadline: BigInt(trade.deadline) }),
    ...(trade.transactionHash === null ? {} : { transactionHash: trade.transactionHash }),
    transactions: trade.transactions.map((t) => ({ ...t })),
    ...(trade.confirmations === null ? {} : { confirmations: BigInt(trade.confirmations) }),
    ...(trade.receipt === null ? {} : { receipt: receiptMessage(trade.receipt) }),
    ...(trade.error === null ? {} : { error: { ...trade.error } }),
    createdAt: trade.createdAt,
    updatedAt: trade.updatedAt,
    ...(trade.apiKeyName === null ? {} : { apiKeyName: trade.apiKeyName }),
    ...(trade.approval === undefined ? {} : { approval: approvalMessage(trade.approval) }),
    ...(trade.cancel === undefined
      ? {}
      : {
          cancel: {
            requestedBy: trade.cancel.requestedBy,
            requestedAt: trade.cancel.requestedAt,
            outcome: trade.cancel.outcome,
            ...(trade.cancel.noopHash === null ? {} : { noopHash: trade.cancel.noopHash }),
          },
        }),
  });
}

/** A held trade's approval as the Trade message carries it. */
function approvalMessage(approval: TradeApproval) {
  const decision = (d: ApprovalDecision) => ({
    by: d.by,
    at: d.at,
    ...(d.reason === null ? {} : { reason: d.reason }),
  });
  return {
    rules: [...approval.rules],
    required: approval.required,
    heldAt: approval.heldAt,
    expiresAt: approval.expiresAt,
    approvals: approval.approvals.map(decision),
    ...(approval.rejection === null ? {} : { rejection: decision(approval.rejection) }),
    ...(approval.approvedAt === null ? {} : { approvedAt: approval.approvedAt }),
    ...(approval.quote === null ? {} : { quote: { ...approval.quote } }),
  };
}
