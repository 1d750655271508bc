/**
 * Formats an ethers receipt exactly as web3.js 1.x `contract.methods.x().send()`
 * resolves it when the logs are not in the contract's ABI (SPEC 2.2 and 2.3):
 * numbers as JSON numbers, `from`/`to` lowercase, `events` keyed "0", "1", ...,
 * and no `logs` field. Fields a newer node adds (e.g. `blockTimestamp`) are dropped.
 */
import { getAddress, type TransactionReceipt as EthersReceipt } from "ethers";

import { web3LogId, type EventLog, type TransactionReceipt } from "../../core/index.js";

export function toWeb3Receipt(receipt: EthersReceipt): TransactionReceipt {
  const events: Record<string, EventLog> = {};
  receipt.logs.forEach((log, i) => {
    events[String(i)] = {
      address: getAddress(log.address),
      blockHash: log.blockHash,
      blockNumber: log.blockNumber,
      logIndex: log.index,
      removed: log.removed === true, // some nodes omit the field for live logs
      transactionHash: log.transactionHash,
      transactionIndex: log.transactionIndex,
      id: web3LogId(log.blockHash, log.transactionHash, log.index),
      returnValues: {},
      signature: null,
      raw: { data: log.data, topics: [...log.topics] },
    };
  });
  return {
    blockHash: receipt.blockHash,
    blockNumber: receipt.blockNumber,
    contractAddress: null,
    cumulativeGasUsed: safeNumber(receipt.cumulativeGasUsed, "cumulativeGasUsed"),
    effectiveGasPrice: safeNumber(receipt.gasPrice, "effectiveGasPrice"),
    from: receipt.from.toLowerCase(),
    gasUsed: safeNumber(receipt.gasUsed, "gasUsed"),
    logsBloom: receipt.logsBloom,
    status: receipt.status === 1,
    to: (receipt.to ?? "").toLowerCase(),
    transactionHash: receipt.hash,
    transactionIndex: receipt.index,
    type: `0x${receipt.type.toString(16)}`,
    events,
  };
}

/** web3.js 1.x turns these quantities into numbers; refuse to lose precision silently. */
function safeNumber(value: bigint, field: string): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`${field} ${value} exceeds a safe JSON number`);
  return Number(value);
}
