/**
 * The node, over JSON-RPC: the provider with its endpoints and failover (HTTP or WebSocket, with
 * pushed heads), what a node's errors mean (chain-errors.ts), the ordered batch a round of sends
 * goes out in, and the batcher that asks one eth_call per tick of what trades read of the latest
 * block. It imports tx/ only (the swap's ABI, to name a revert).
 */
export { batchSenderOf, NotSentError, type BatchSender } from "./batch-sender.js";
export {
  CallBatcher,
  SIMULATOR_ADDRESS,
  executionGas,
  type CallBatcherOptions,
  type ProofOutcome,
  type ReadAnswer,
} from "./call-batcher.js";
export {
  isAlreadyKnown,
  isChainUnreachable,
  isDefiniteRefusal,
  isNonceConflict,
  isReplacementUnderpriced,
  isPlainRefusal,
  isUnderpriced,
  nodeMessage,
  revertName,
  toDomainError,
} from "./chain-errors.js";
export { redactUrl, type EndpointStatus } from "./endpoint.js";
export type { HeadBlock, PushedHead, PushedHeads } from "./head-subscription.js";
export type { RpcOutcome } from "./request.js";
export type { RpcProviderOptions } from "./provider-options.js";
export type { RpcRequestRecord } from "./request.js";
export { RpcProvider } from "./rpc-provider.js";
