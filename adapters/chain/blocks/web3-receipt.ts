/**
 * Formats a JSON-RPC receipt (eth_getTransactionReceipt's answer, hex quantities) exactly as
 * web3.js 1.x `contract.methods.x().send()` resolves it when the logs are not in the
 * contract's ABI (SPEC 2.2 and 2.3): numbers as JSON numbers, `from`/`to` lowercase, log
 * addresses checksummed, `events` keyed "0", "1", ..., and no `logs` field. Fields a newer
 * node adds (e.g. `blockTimestamp`) are dropped.
 *
 * It reads the node's answer directly rather than an ethers TransactionReceipt, which would
 * build an object and checksum every address in it only for this function to read it again.
 */
import { getAddress } from "ethers";

import { web3LogId, type EventLog, type TransactionReceipt } from "../../../core/index.js";

/** A log as the node sends it. */
export interface RpcLog {
  address: string;
  blockHash: string;
  blockNumber: string;
  data: string;
  logIndex: string;
  removed?: boolean;
  topics: string[];
  transactionHash: string;
  transactionIndex: string;
}

/** A receipt as the node sends it (the fields web3.js 1.x keeps). */
export interface RpcReceipt {
  blockHash: string;
  blockNumber: string;
  cumulativeGasUsed: string;
  effectiveGasPrice: string;
  from: string;
  gasUsed: string;
  logs: RpcLog[];
  logsBloom: string;
  status: string;
  to: string | null;
  transactionHash: string;
  transactionIndex: string;
  type?: string;
}

export function toWeb3Receipt(receipt: RpcReceipt): TransactionReceipt {
  const events: Record<string, EventLog> = {};
  receipt.logs.forEach((log, i) => {
    const logIndex = quantity(log.logIndex, "logIndex");
    events[String(i)] = {
      address: checksummed(log.address),
      blockHash: log.blockHash,
      blockNumber: quantity(log.blockNumber, "blockNumber"),
      logIndex,
      removed: log.removed === true, // some nodes omit the field for live logs
      transactionHash: log.transactionHash,
      transactionIndex: quantity(log.transactionIndex, "transactionIndex"),
      id: web3LogId(log.blockHash, log.transactionHash, logIndex),
      returnValues: {},
      signature: null,
      raw: { data: log.data, topics: [...log.topics] },
    };
  });
  return {
    blockHash: receipt.blockHash,
    blockNumber: quantity(receipt.blockNumber, "blockNumber"),
    contractAddress: null,
    cumulativeGasUsed: quantity(receipt.cumulativeGasUsed, "cumulativeGasUsed"),
    effectiveGasPrice: quantity(receipt.effectiveGasPrice, "effectiveGasPrice"),
    from: receipt.from.toLowerCase(),
    gasUsed: quantity(receipt.gasUsed, "gasUsed"),
    logsBloom: receipt.logsBloom,
    status: quantity(receipt.status, "status") === 1,
    to: (receipt.to ?? "").toLowerCase(),
    transactionHash: receipt.transactionHash,
    transactionIndex: quantity(receipt.transactionIndex, "transactionIndex"),
    // Legacy receipts from old nodes carry no type.
    type: `0x${(receipt.type === undefined ? 0 : quantity(receipt.type, "type")).toString(16)}`,
    events,
  };
}

/** web3.js 1.x turns these quantities into numbers; refuse to lose precision silently. */
function quantity(hex: string, field: string): number {
  if (typeof hex !== "string" || !/^0x[0-9a-fA-F]{1,64}$/.test(hex))
    throw new TypeError(`${field}: the node sent ${String(hex)}, not a quantity`);
  const value = BigInt(hex);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`${field} ${value} exceeds a safe JSON number`);
  return Number(value);
}

/** Checksums are keccak256 each: the few contract addresses a service sees are remembered. */
const CHECKSUMS = new Map<string, string>();
const MAX_CHECKSUMS = 1024;

function checksummed(address: string): string {
  const lower = address.toLowerCase();
  let known = CHECKSUMS.get(lower);
  if (known === undefined) {
    known = getAddress(lower);
    if (CHECKSUMS.size >= MAX_CHECKSUMS) CHECKSUMS.clear();
    CHECKSUMS.set(lower, known);
  }
  return known;
}
