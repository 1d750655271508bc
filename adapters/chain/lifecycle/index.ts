/**
 * The lifecycle monitor of each exchange wallet: every nonce the service used, seen through to a
 * definite end (re-sent, re-priced, replaced by a no-op, filled, watched for reorgs). It builds
 * on tx/, rpc/, blocks/ and send/; the trade adapter starts one per wallet.
 */
export type { LifecycleLog, LifecycleSettings, WalletMonitorOptions } from "./options.js";
export { WalletMonitor } from "./monitor.js";
