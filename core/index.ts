/** The domain's public API. Adapters import from here. */
export * from "./types.js";
export * from "./errors.js";
export * from "./access/policy.js";
export * from "./access/authorize.js";
export {
  AUDIT_ACTIONS,
  SERVICE_ACTOR,
  type AuditAction,
  type AuditEntry,
  type AuditHead,
  type AuditLog,
  type AuditNote,
  type AuditPage,
  type AuditPageQuery,
  type AuditRecord,
  type AuditValue,
} from "./ports/audit.port.js";
export {
  actorOf,
  acceptedEntry,
  refusedEntry,
  refusalDetails,
  forgottenEntry,
  deliveryRetriedEntry,
  outsideTransactionEntry,
  walletResumedEntry,
  replacementEntry,
  replacementRefusedEntry,
} from "./audit.js";
export {
  holdingRules,
  newApproval,
  decideOn,
  authorizeApprover,
  authorizeDecision,
  isRequester,
  approvalExpiredError,
  rejectedError,
  INTERRUPTED_ERROR,
  heldEntry,
  decisionEntry,
  approvalExpiredEntry,
  interruptedEntry,
  MAX_REASON_LENGTH,
  type DecisionStep,
} from "./approvals.js";
export type {
  ApprovalDecision,
  ApprovalJournal,
  ApprovalVerdict,
  DecisionOutcome,
  HeldQuote,
  TradeApproval,
} from "./ports/approval.port.js";
export {
  listApprovalsUseCase,
  decideTradeUseCase,
  type ApprovalListView,
  type ListApprovalsUseCase,
  type DecideTradeUseCase,
} from "./use-cases/approvals.use-case.js";
export type {
  ProvenTrade,
  ReservedTrade,
  SentTrade,
  SignedTrade,
  SignOptions,
  TradeOnChain,
  TradePort,
  TradeResolution,
  TradeReplacer,
  Replacement,
  ReplacementAudit,
  ReplaceTarget,
} from "./ports/trade.port.js";
export type {
  TradeJournal,
  TradeRecord,
  TradeCancel,
  NewTrade,
  SignedTradeTx,
  Spending,
  SpendingLeader,
} from "./ports/journal.port.js";
export {
  TRADE_STATUSES,
  INITIAL_STATUS,
  FINAL_STATUSES,
  SPENDING_STATUSES,
  CHAIN_VERDICTS,
  TRADE_TRANSITIONS,
  tradeVerdict,
  tradeStatusAfter,
  TradeTransitionError,
  type TradeStatus,
  type TradeOperation,
  type TradeTransition,
  type TradeVerdict,
} from "./trade-states.js";
export type {
  TradePosition,
  TradePageQuery,
  TradePage,
  TradeSummaryQuery,
  TradeTotals,
} from "./ports/journal.port.js";
export {
  GAS_USD_DECIMALS,
  NATIVE_USD_DECIMALS,
  gasUsdOf,
  nativeUsdOf,
  roundUpDecimals,
  tradeAmounts,
  type TradeAmounts,
} from "./trade-amounts.js";
export type {
  NonceStore,
  NonceLedger,
  NoncesConsumed,
  NonceSlot,
  SlotPurpose,
  SlotState,
  Broadcast,
  MinedTx,
  Reservation,
  SlotReservation,
} from "./ports/nonce.port.js";
export type { PricePort } from "./ports/price.port.js";
export {
  WATCH_EVENT_TYPES,
  type OutsideTransaction,
  type WalletPause,
  type WatchData,
  type WatchEvent,
  type WatchEventType,
  type WatchJournal,
  type WatchedNonce,
} from "./ports/watch.port.js";
export {
  WEBHOOK_EVENT_TYPES,
  WEBHOOK_DELIVERY_STATUSES,
  type WebhookEventType,
  type WebhookDeliveryStatus,
  type WebhookAttempt,
  type WebhookEvent,
  type WebhookDelivery,
  type WebhookOutcome,
  type WebhookDeliveryQuery,
  type WebhookDeliveryPage,
  type WebhookOutboxStats,
  type WebhookOutbox,
  type WebhookScopes,
} from "./ports/webhook.port.js";
export type {
  QuotePort,
  QuoteStore,
  StoredQuote,
  ChainQuote,
  QuoteIssue,
  QuoteIssueType,
} from "./ports/quote.port.js";
export {
  parseQuoteRequest,
  parseQuoteId,
  quoteMinOut,
  QUOTE_REQUEST_FIELDS,
  DEFAULT_QUOTE_SLIPPAGE_BPS,
  MAX_QUOTE_SLIPPAGE_BPS,
  type QuoteRequest,
} from "./validation/quote-request.js";
export {
  quoteUseCase,
  redeemQuote,
  DEFAULT_QUOTE_TTL_MS,
  QUOTE_MIN_LEFT_MS,
  minTimeLeftMs,
  type QuoteUseCase,
  type QuoteView,
  type QuoteAmount,
  type QuoteOptions,
} from "./use-cases/quote.use-case.js";
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
  tradeWithoutJournal,
  parseIdempotencyKey,
  type TradeUseCase,
  type TradeContext,
  type TradeJournalling,
} from "./use-cases/trade.use-case.js";
export { settle } from "./use-cases/settlement.js";
export { noopCancelledError, unsentCancelledError } from "./use-cases/cancel-errors.js";
export {
  tradeStatusUseCase,
  tradeView,
  cancelOutcome,
  TRADE_ID,
  type TradeStatusUseCase,
  type TradeView,
  type BroadcastView,
  type CancelView,
} from "./use-cases/trade-status.use-case.js";
export {
  listTradesUseCase,
  tradeSummaryUseCase,
  encodeCursor,
  decodeCursor,
  DEFAULT_PAGE_LIMIT,
  MAX_PAGE_LIMIT,
  type ListTradesUseCase,
  type TradeSummaryUseCase,
  type TradeListView,
  type TradeFigures,
  type TradeSummaryView,
  type TradeSummaryGroup,
  type AmountView,
} from "./use-cases/trade-history.use-case.js";
export { priceUseCase, type PriceUseCase } from "./use-cases/price.use-case.js";
export {
  listWebhookDeliveriesUseCase,
  retryWebhookDeliveryUseCase,
  deliveryView,
  DEFAULT_DELIVERY_PAGE,
  MAX_DELIVERY_PAGE,
  type ListWebhookDeliveriesUseCase,
  type RetryWebhookDeliveryUseCase,
  type WebhookDeliveryView,
  type WebhookDeliveryListView,
} from "./use-cases/webhook-deliveries.use-case.js";
export { createUseCases, type UseCases, type UseCaseDeps } from "./use-cases/create-use-cases.js";
export {
  resumeWalletUseCase,
  type ResumeWalletUseCase,
  type WalletResumeView,
} from "./use-cases/wallet-resume.use-case.js";
export {
  cancelTradeUseCase,
  speedUpTradeUseCase,
  parseGwei,
  type CancelTradeUseCase,
  type SpeedUpTradeUseCase,
} from "./use-cases/trade-cancel.use-case.js";
export {
  listAuditUseCase,
  DEFAULT_AUDIT_PAGE,
  MAX_AUDIT_PAGE,
  type ListAuditUseCase,
  type AuditListView,
} from "./use-cases/audit.use-case.js";
