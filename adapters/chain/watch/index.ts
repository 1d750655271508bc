/**
 * The wallet watch: each exchange wallet's balances and the swap's reserves against their
 * thresholds, at most once a block and riding the trades' own eth_call while they run; every
 * transaction mined from a wallet matched against the journal, one the service never signed
 * recorded at once (and the wallet paused, with OUTSIDE_TX_POLICY=pause). It builds on tx/, rpc/
 * and blocks/; the assembly hands the send queues and the trade adapter its pauses.
 */
export { WalletPauses, amountView, clearsAt } from "./alarms.js";
export {
  DEFAULT_WATCH_SETTINGS,
  WatchSettingsError,
  resolveThresholds,
  type OutsideTxPolicy,
  type Threshold,
  type WalletWatchOptions,
  type WatchLog,
  type WatchObserver,
  type WatchSettings,
  type WatchThresholdSettings,
  type WatchThresholds,
} from "./options.js";
export { OutsideDetector, type OutsideContext } from "./outside.js";
export { WalletWatch, type WatchState } from "./wallet-watch.js";
