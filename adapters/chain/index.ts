/**
 * The chain adapter: TradePort, PricePort and QuotePort on an EVM chain through ethers v6. This
 * file is its door for everything outside adapters/chain (the composition root, config/,
 * observability/, scripts/, tests); create-chain-adapter.ts assembles it from the folders below,
 * with what it reads at start (deployment.ts) and what readiness and metrics read (readiness.ts).
 *
 * Folders, from the bottom up; each is entered only through its index.ts and imports only the
 * folders it names below (.dependency-cruiser.cjs enforces both):
 * - tx/         what is sent: the ABIs, calldata, EIP-1559 encoding and signing, the signer port.
 * - signers/    the signers whose keys stay outside the process: PKCS#11 (an HSM) and AWS KMS.
 *               Imports tx/.
 * - rpc/        the node: the provider (endpoints, failover, WebSocket, pushed heads), the chain
 *               errors, the ordered batch, the one-eth_call-per-tick batcher. Imports tx/.
 * - blocks/     what each block tells: its head (the block watcher), its fees, the receipts in it
 *               and their web3.js shape. Imports tx/, rpc/.
 * - send/       the send queue and the nonce work (what a failed send means, gap fillers).
 *               Imports tx/, rpc/, blocks/.
 * - price/      the price and quote adapters, the price cache, the feed policy. Imports tx/, rpc/,
 *               blocks/.
 * - lifecycle/  each wallet's lifecycle monitor, and the steps only it takes. Imports tx/, rpc/,
 *               blocks/, send/.
 * - trade/      the trade adapter's steps, preflight, allowances and their top-ups, gas limits.
 *               Imports tx/, rpc/, blocks/, send/, price/: not lifecycle/.
 * - watch/      the wallet watch: balances and reserves against thresholds, outside transactions,
 *               the wallets' pauses. Imports tx/, rpc/, blocks/.
 * So tx ← rpc ← blocks ← send ← lifecycle, send ← trade, blocks ← price ← trade, and blocks ← watch. Fees and
 * receipts sit in blocks/, below both the lifecycle monitors and the trades that use them, with
 * the block watcher they read. The files at the top (assembly.ts, create-chain-adapter.ts) build
 * the parts once and hand each folder's classes theirs.
 */
export {
  createChainAdapter,
  createRpcProvider,
  type ChainAdapter,
  type ChainAdapterOptions,
  DEFAULT_STUCK_AFTER_MS,
} from "./create-chain-adapter.js";
export type { DeploymentAddresses } from "./deployment.js";
export type { LifecycleLog } from "./lifecycle/index.js";
export {
  DEFAULT_FX_MAX_AGE_S,
  DEFAULT_NATIVE_USD_MAX_AGE_S,
  DEFAULT_SEQUENCER_GRACE_S,
  FEED_SETTINGS,
  SEQUENCER_SETTINGS,
  type FeedBounds,
  type FeedPolicy,
} from "./price/index.js";
export type { WalletSource } from "./readiness.js";
export {
  RpcProvider,
  redactUrl,
  type EndpointStatus,
  type RpcProviderOptions,
  type RpcRequestRecord,
} from "./rpc/index.js";
export { assembleTrades, DEFAULT_SEND_BATCH_MAX, type AssemblyOptions, type Lifecycle } from "./assembly.js";
export { DEFAULT_TRADE_SETTINGS, type TradeSettings } from "./settings.js";
export {
  DEFAULT_WATCH_SETTINGS,
  WatchSettingsError,
  type OutsideTxPolicy,
  type WatchLog,
  type WatchObserver,
  type WatchSettings,
  type WatchState,
  type WatchThresholdSettings,
} from "./watch/index.js";
export {
  AGGREGATOR_ABI,
  ERC20_ABI,
  KeystoreError,
  SWAP_ABI,
  SignatureRefusedError,
  keystoreSigner,
  rawKeySigner,
  signEip1559With,
  toSigner,
  type TransactionSigner,
} from "./tx/index.js";
export {
  SignerStartError,
  addressOfEcPoint,
  addressOfSpki,
  openKmsSigners,
  openPkcs11Signers,
  type KeyRef,
  type KmsSignerSettings,
  type OpenedSigners,
  type Pkcs11SignerSettings,
  pkcs11Modules,
} from "./signers/index.js";
