/** The chain adapter: TradePort and PricePort on an EVM chain through ethers v6. */
export {
  createChainAdapter,
  createRpcProvider,
  type ChainAdapter,
  type ChainAdapterOptions,
  type DeploymentAddresses,
  DEFAULT_STUCK_AFTER_MS,
  type WalletSource,
} from "./create-chain-adapter.js";
export { SWAP_ABI, ERC20_ABI, AGGREGATOR_ABI } from "./abi.js";
export { DEFAULT_TRADE_SETTINGS, type TradeSettings } from "./trade.adapter.js";
export type { LifecycleLog } from "./lifecycle/monitor.js";
export {
  RpcProvider,
  redactUrl,
  type EndpointStatus,
  type RpcProviderOptions,
  type RpcRequestRecord,
} from "./rpc-provider.js";
export {
  KeystoreError,
  SignatureRefusedError,
  keystoreSigner,
  rawKeySigner,
  toSigner,
  type TransactionSigner,
} from "./signer.js";
