/**
 * The PostgreSQL journal's rows: the columns its parts read, and how a row becomes a trade, a
 * broadcast or a nonce slot. The trades and the nonces (trades.ts, nonces.ts) both read and write
 * broadcasts: a trade's transactions are its nonce slot's.
 */
import type pg from "pg";

import type {
  Broadcast,
  NonceSlot,
  SlotPurpose,
  SlotState,
  TradeApproval,
  TradeCancel,
  TradeRecord,
  TransactionReceipt,
  Visibility,
} from "../../../core/index.js";
import { tradeAmounts } from "../../../core/index.js";

export const COLUMNS =
  "id, scope, key_name, idempotency_key, request_hash, kind, request, status, wallet, nonce, tx_hash, raw_tx, deadline, receipt, error, approval, cancel, created_at, updated_at";
export const BROADCAST_COLUMNS =
  "b.hash, b.wallet, b.nonce, b.raw_tx, b.max_fee_per_gas::text AS max_fee_per_gas, b.max_priority_fee_per_gas::text AS max_priority_fee_per_gas, b.noop, b.sent_at";

export interface Row {
  id: string;
  scope: string;
  key_name: string | null;
  idempotency_key: string | null;
  request_hash: string;
  kind: TradeRecord["kind"];
  request: TradeRecord["request"];
  status: TradeRecord["status"];
  wallet: string | null;
  nonce: string | null; // BIGINT arrives as a string
  tx_hash: string | null;
  raw_tx: string | null;
  deadline: string | null;
  receipt: TransactionReceipt | null; // json arrives parsed, keys in stored order
  error: TradeRecord["error"];
  /** json, parsed; null on a trade never held (and absent from a row read before migration 15's columns). */
  approval?: TradeApproval | null;
  /** json, parsed; null without a cancel asked (and absent from a row read before migration 17's column). */
  cancel?: TradeCancel | null;
  created_at: Date;
  updated_at: Date;
}

export interface BroadcastRow {
  hash: string;
  wallet: string;
  nonce: string;
  raw_tx: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  noop: boolean;
  sent_at: Date;
}

export interface SlotRow {
  wallet: string;
  nonce: string;
  purpose: SlotPurpose;
  trade_id: string | null;
  deadline: string | null;
  state: SlotState;
  mined_hash: string | null;
  block_number: string | null;
  block_hash: string | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Deletes the slots a trade's record holds (signed again at another nonce), the slot's row first,
 * as recordBroadcast and releaseSlot lock it, then its broadcasts in a statement of their own,
 * which sees one recorded while it waited for that row: none is left without its slot.
 */
export async function dropSlotsOf(client: pg.PoolClient, tradeId: string): Promise<void> {
  const old = await client.query<{ wallet: string; nonce: string }>(
    "DELETE FROM nonce_slots WHERE trade_id = $1 RETURNING wallet, nonce",
    [tradeId],
  );
  for (const { wallet, nonce } of old.rows)
    await client.query("DELETE FROM broadcasts WHERE wallet = $1 AND nonce = $2", [wallet, nonce]);
}

export async function insertBroadcast(
  client: pg.PoolClient,
  wallet: string,
  nonce: number,
  b: Broadcast,
): Promise<void> {
  await client.query(
    `INSERT INTO broadcasts (hash, wallet, nonce, raw_tx, max_fee_per_gas, max_priority_fee_per_gas, noop, sent_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      b.hash.toLowerCase(),
      wallet,
      nonce,
      b.rawTx,
      b.maxFeePerGas.toString(),
      b.maxPriorityFeePerGas.toString(),
      b.noop,
      b.sentAt,
    ],
  );
}

export function toRecord(row: Row, broadcasts: Broadcast[]): TradeRecord {
  return {
    id: row.id,
    scope: row.scope,
    keyName: row.key_name,
    idempotencyKey: row.idempotency_key,
    requestHash: row.request_hash,
    kind: row.kind,
    request: row.request,
    status: row.status,
    wallet: row.wallet,
    nonce: row.nonce === null ? null : Number(row.nonce),
    txHash: row.tx_hash,
    rawTx: row.raw_tx,
    deadline: row.deadline === null ? null : Number(row.deadline),
    broadcasts,
    receipt: row.receipt,
    error: row.error,
    ...(row.approval != null && { approval: row.approval }),
    ...(row.cancel != null && { cancel: row.cancel }),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toBroadcast(row: BroadcastRow): Broadcast {
  return {
    hash: row.hash,
    rawTx: row.raw_tx,
    maxFeePerGas: BigInt(row.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas),
    noop: row.noop,
    sentAt: row.sent_at,
  };
}

export function toSlot(row: SlotRow, broadcasts: Broadcast[]): NonceSlot {
  return {
    wallet: row.wallet,
    nonce: Number(row.nonce),
    purpose: row.purpose,
    tradeId: row.trade_id,
    deadline: row.deadline === null ? null : Number(row.deadline),
    state: row.state,
    broadcasts,
    mined:
      row.mined_hash === null
        ? null
        : { hash: row.mined_hash, blockNumber: Number(row.block_number), blockHash: row.block_hash ?? "" },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** amount_in, amount_out and gas_wei of a receipt, as decimal text or null. */
export function amountColumns(receipt: TransactionReceipt): [string | null, string | null, string | null] {
  const { amountIn, amountOut, gasWei } = tradeAmounts(receipt);
  return [amountIn?.toString() ?? null, amountOut?.toString() ?? null, gasWei?.toString() ?? null];
}

/**
 * The condition on `trades` for the trades a caller sees, its values pushed with `param`: its own
 * scope alone when it names no key (the history indexes' leading column), else by name or scope.
 */
export function visibleWhere(visible: Visibility, param: (value: unknown) => string): string {
  if (visible === "all") return "TRUE";
  if (visible.names.length === 0 && visible.ids.length === 1) return `scope = ${param(visible.ids[0])}`;
  return `(scope = ANY(${param(visible.ids)}) OR key_name = ANY(${param(visible.names)}))`;
}
