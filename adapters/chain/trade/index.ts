/**
 * Trades: the trade adapter (TradePort), which proves each trade against the latest block
 * (preflight.ts, with each kind's gas limit from gas-limits.ts), reserves the wallet's balance
 * and the swap's allowance (allowances.ts), sends it through the wallet's queue and waits for
 * its receipt. It is the top of the chain adapter: it builds on every other folder.
 */
export { Allowances, type AllowancesOptions, type Asset, type Holding } from "./allowances.js";
export { GAS_LIMIT_MARGIN, SNAPSHOT_GAS_USED, tradeGasLimit } from "./gas-limits.js";
export { DEFAULT_TRADE_SETTINGS, type TradeAdapterOptions, type TradeSettings } from "./options.js";
export { Preflight, minimumOut, type PreflightOptions, type Proof } from "./preflight.js";
export { ChainTradeAdapter, DEFAULT_SEND_BATCH_MAX } from "./trade.adapter.js";
