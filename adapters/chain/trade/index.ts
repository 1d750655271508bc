/**
 * Trades: the trade adapter (TradePort), a trade's steps on the chain: proving each trade against
 * the latest block (preflight.ts, with each kind's gas limit from gas-limits.ts), reserving the
 * wallet's balance and the swap's allowance (allowances.ts) and topping the allowance up
 * (approvals.ts), signing it through the wallet's send queue for its caller to journal
 * (signing.ts), and its receipt. It builds on tx/, rpc/, blocks/, send/ and price/; the assembly
 * (../assembly.ts) hands it its parts.
 */
export { Allowances, type AllowancesOptions, type Asset, type Holding } from "./allowances.js";
export { Approvals, type ApprovalsOptions } from "./approvals.js";
export { GAS_LIMIT_MARGIN, SNAPSHOT_GAS_USED, tradeGasLimit } from "./gas-limits.js";
export type { TradeAdapterParts, TradeCallSettings, TradingWallet } from "./options.js";
export { Preflight, minimumOut, type PreflightOptions, type Proof } from "./preflight.js";
export { nonceLookup, recordSlotOf } from "./slots.js";
export { Signing, type SigningOptions } from "./signing.js";
export { ChainTradeAdapter } from "./trade.adapter.js";
