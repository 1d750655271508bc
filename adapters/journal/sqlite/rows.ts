/**
 * The SQLite journal's rows: how a row becomes a trade, a broadcast or a nonce slot. The trades
 * and the nonces (trades.ts, nonces.ts) both read broadcasts: a trade's transactions are its
 * nonce slot's.
 */
import type { SQLOutputValue } from "node:sqlite";

import type {
  Broadcast,
  NonceSlot,
  SlotPurpose,
  SlotState,
  TradeApproval,
  TradeCancel,
  TradeRecord,
  TradeStatus,
  TransactionReceipt,
} from "../../../core/index.js";
import { tradeAmounts } from "../../../core/index.js";

export type Row = Record<string, SQLOutputValue>;

export function toRecord(row: Row, broadcasts: Broadcast[]): TradeRecord {
  return {
    id: row.id as string,
    scope: row.scope as string,
    keyName: (row.key_name as string | null | undefined) ?? null,
    idempotencyKey: row.idempotency_key as string | null,
    requestHash: row.request_hash as string,
    kind: row.kind as TradeRecord["kind"],
    request: JSON.parse(row.request as string) as TradeRecord["request"],
    status: row.status as TradeRecord["status"],
    wallet: row.wallet as string | null,
    nonce: row.nonce === null ? null : Number(row.nonce),
    txHash: row.tx_hash as string | null,
    rawTx: broadcasts.at(-1)?.rawTx ?? (row.raw_tx as string | null),
    deadline: row.deadline === null ? null : Number(row.deadline),
    broadcasts,
    receipt: row.receipt === null ? null : (JSON.parse(row.receipt as string) as TransactionReceipt),
    error: row.error === null ? null : (JSON.parse(row.error as string) as TradeRecord["error"]),
    ...(typeof row.approval === "string" && { approval: JSON.parse(row.approval) as TradeApproval }),
    ...(typeof row.cancel === "string" && { cancel: JSON.parse(row.cancel) as TradeCancel }),
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
  };
}

export function toBroadcast(row: Row): Broadcast {
  return {
    hash: row.hash as string,
    rawTx: row.raw_tx as string,
    maxFeePerGas: BigInt(row.max_fee_per_gas as string),
    maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas as string),
    noop: Number(row.noop) === 1,
    sentAt: new Date(Number(row.sent_at)),
  };
}

export function toSlot(row: Row, broadcasts: Broadcast[]): NonceSlot {
  return {
    wallet: row.wallet as string,
    nonce: Number(row.nonce),
    purpose: row.purpose as SlotPurpose,
    tradeId: row.trade_id as string | null,
    deadline: row.deadline === null ? null : Number(row.deadline),
    state: row.state as SlotState,
    broadcasts,
    mined:
      row.mined_hash === null
        ? null
        : {
            hash: row.mined_hash as string,
            blockNumber: Number(row.block_number),
            blockHash: row.block_hash as string,
          },
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
  };
}

/** amount_in, amount_out and gas_wei of a receipt, as decimal text or NULL. */
export function amountColumns(receipt: TransactionReceipt): [string | null, string | null, string | null] {
  const { amountIn, amountOut, gasWei } = tradeAmounts(receipt);
  return [amountIn?.toString() ?? null, amountOut?.toString() ?? null, gasWei?.toString() ?? null];
}

/** Where a trade stands, as the trade model reads it, from its row's status and tx_hash. */
export function tradeState(row: Row): { status: TradeStatus; txHash: string | null } {
  return { status: row.status as TradeStatus, txHash: row.tx_hash as string | null };
}
