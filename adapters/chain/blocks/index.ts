/**
 * What each block tells: its head (the block watcher, one look per block), its fees (the fee
 * oracle and the fee rules), and the receipts in it (Receipts; toWeb3Receipt for web3.js 1.x's
 * shape). The send queue, the price and quote adapters, the lifecycle monitor and the trade
 * adapter read the chain through it; it reads the node through rpc/.
 */
export { BlockTimes, measureBlockTime } from "./block-times.js";
export { BlockWatcher, headsOf, type BlockWatcherOptions, type Look } from "./block-watcher.js";
export {
  FeeOracle,
  bumped,
  gwei,
  marketFees,
  nextBaseFee,
  noopFees,
  replacementFees,
  tradeFees,
  type ChainState,
  type FeeOracleOptions,
  type Fees,
  type HeadSource,
  type Market,
} from "./fees.js";
export { isUnsupported } from "./receipt-reader.js";
export { Receipts, type NonceLookup, type Outcome, type ReceiptsOptions } from "./receipts.js";
export { toWeb3Receipt, type RpcLog, type RpcReceipt } from "./web3-receipt.js";
