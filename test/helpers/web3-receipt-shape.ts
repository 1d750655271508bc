/** The keys of a trade's receipt and of its event logs, in web3.js 1.x's order (docs/SPEC.md). */
export const RECEIPT_KEYS = [
  "blockHash",
  "blockNumber",
  "contractAddress",
  "cumulativeGasUsed",
  "effectiveGasPrice",
  "from",
  "gasUsed",
  "logsBloom",
  "status",
  "to",
  "transactionHash",
  "transactionIndex",
  "type",
  "events",
];

export const LOG_KEYS = [
  "address",
  "blockHash",
  "blockNumber",
  "logIndex",
  "removed",
  "transactionHash",
  "transactionIndex",
  "id",
  "returnValues",
  "signature",
  "raw",
];
