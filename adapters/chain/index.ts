/** The chain adapter: TradePort and PricePort on an EVM chain through ethers v6. */
export {
  createChainAdapter,
  createRpcProvider,
  type ChainAdapter,
  type ChainAdapterOptions,
  type DeploymentAddresses,
} from "./chain.adapter.js";
export { SWAP_ABI, ERC20_ABI, AGGREGATOR_ABI } from "./abi.js";
export { MemoryNonceStore, type NonceStore } from "./nonce-store.js";
export { RpcProvider, type RpcProviderOptions } from "./rpc-provider.js";
