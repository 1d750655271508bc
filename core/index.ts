/** The domain's public API. Adapters import from here. */
export * from "./types.js";
export * from "./errors.js";
export type { TradePort, TradeHooks, TradeOnChain, TradeResolution } from "./ports/trade.port.js";
export type { TradeJournal, TradeRecord, TradeStatus, NewTrade, SignedTradeTx } from "./ports/journal.port.js";
export type {
  NonceStore,
  NonceLedger,
  NoncesConsumed,
  NonceSlot,
  SlotPurpose,
  SlotState,
  Broadcast,
  MinedTx,
} from "./ports/nonce.port.js";
export type { PricePort } from "./ports/price.port.js";
export { parseAddress, type ParseAddressOptions } from "./validation/address.js";
export {
  parseAmount,
  decimalToBaseUnits,
  formatUnits,
  MAX_AMOUNT_LENGTH,
  type ParseAmountOptions,
} from "./validation/amount.js";
export {
  parseTradeRequest,
  assertTradeConfig,
  maxUsdFor,
  minUsdFor,
  TOKEN_DECIMALS,
  TRADE_REQUEST_FIELDS,
  type TradeConfig,
} from "./validation/trade-request.js";
export { web3LogId } from "./receipt.js";
export {
  tradeUseCase,
  parseIdempotencyKey,
  type TradeUseCase,
  type TradeContext,
  type TradeJournalling,
} from "./use-cases/trade.use-case.js";
export { settle } from "./use-cases/settlement.js";
export {
  tradeStatusUseCase,
  type TradeStatusUseCase,
  type TradeView,
  type BroadcastView,
} from "./use-cases/trade-status.use-case.js";
export { priceUseCase, type PriceUseCase } from "./use-cases/price.use-case.js";
export { createUseCases, type UseCases, type UseCaseDeps } from "./use-cases/create-use-cases.js";
