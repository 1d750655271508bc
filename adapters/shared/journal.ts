/**
 * A journal: the trade journal, the wallets' nonces and their leases, the quotes and the webhook
 * outbox, each its own port over one storage (`ports`), and `close`, which closes that storage.
 * Each storage (adapters/journal/: memory/, sqlite/, postgres/) has one class per port and a
 * journal class that holds one of each; what wraps a journal (the metrics, the webhook
 * deliverer's wake: journal-wrappers.ts) wraps each port.
 *
 * A journal is also every port in one object, each method forwarded to its port, for whoever
 * takes several ports at once (the chain adapter: trades, nonces and leases) or is handed the
 * journal for one of them. Written out, not generated: go-to-definition finds each, and a method a
 * port adds that is not forwarded here fails to compile (`implements`).
 *
 * Here rather than in adapters/journal/ because the webhooks area wraps a journal too, and the
 * adapter areas meet only in shared/.
 */
import type {
  ApprovalDecision,
  ApprovalJournal,
  ApprovalVerdict,
  AuditEntry,
  AuditLog,
  AuditNote,
  AuditPageQuery,
  Broadcast,
  LimitCheck,
  LimitPer,
  MinedTx,
  NewTrade,
  NonceLedger,
  NonceStore,
  NoncesConsumed,
  QuoteStore,
  Reservation,
  SignedTradeTx,
  Spending,
  SlotPurpose,
  SlotState,
  StoredQuote,
  TradeJournal,
  TradePageQuery,
  TradeSummaryQuery,
  TradeApproval,
  TransactionReceipt,
  TradeCancel,
  OutsideTransaction,
  WatchEvent,
  WatchJournal,
  WatchedNonce,
  WebhookAttempt,
  WebhookDeliveryQuery,
  WebhookScopes,
  WebhookOutbox,
  WebhookOutcome,
} from "../../core/index.js";

type LeaseMethod = "acquireLease" | "releaseLease";

/** The wallets' nonces: who sends at which (NonceStore) and what was sent there (NonceLedger), but the leases. */
export type NoncePort = NonceStore & Omit<NonceLedger, LeaseMethod>;

/** The leases of the NonceLedger: which instance monitors a wallet, which instances are alive. */
export type LeasePort = Pick<NonceLedger, LeaseMethod>;

/** A journal's ports, each its own object over the storage they share. */
export interface JournalPorts {
  readonly trades: TradeJournal;
  readonly nonces: NoncePort;
  readonly leases: LeasePort;
  readonly quotes: QuoteStore;
  readonly webhooks: WebhookOutbox;
  /** The audit log, whose records the other ports' writes append in their own transactions. */
  readonly audit: AuditLog;
  /** The held trades' approvals, on the trades' own rows. */
  readonly approvals: ApprovalJournal;
  /** What the watch keeps: outside transactions, paused wallets, alarms (their events in the outbox). */
  readonly watch: WatchJournal;
}

/** Every port a journal implements, in one object: its ports' methods, each forwarded to its port. */
export abstract class Journal
  implements TradeJournal, NonceStore, NonceLedger, QuoteStore, WebhookOutbox, AuditLog, ApprovalJournal, WatchJournal
{
  abstract readonly ports: JournalPorts;

  /** Closes the storage every port is over. */
  abstract close(): Promise<void>;

  // TradeJournal
  open(trade: NewTrade, spending?: Spending, audit?: AuditNote) {
    return this.ports.trades.open(trade, spending, audit);
  }
  respend(id: string, usd: bigint, checks: readonly LimitCheck[]) {
    return this.ports.trades.respend(id, usd, checks);
  }
  spendingUse(checks: readonly LimitCheck[]) {
    return this.ports.trades.spendingUse(checks);
  }
  spendingLeaders(per: LimitPer, windowMs: number, by: "usd" | "trades", count: number) {
    return this.ports.trades.spendingLeaders(per, windowMs, by, count);
  }
  markSigned(id: string, tx: SignedTradeTx) {
    return this.ports.trades.markSigned(id, tx);
  }
  markSubmitted(id: string) {
    return this.ports.trades.markSubmitted(id);
  }
  markReorged(id: string) {
    return this.ports.trades.markReorged(id);
  }
  markMined(id: string, receipt: TransactionReceipt) {
    return this.ports.trades.markMined(id, receipt);
  }
  markConfirmed(id: string, receipt: TransactionReceipt) {
    return this.ports.trades.markConfirmed(id, receipt);
  }
  markFailed(id: string, error: { code: string; message: string }, audit?: AuditEntry) {
    return this.ports.trades.markFailed(id, error, audit);
  }
  markExpired(id: string, error: { code: string; message: string }) {
    return this.ports.trades.markExpired(id, error);
  }
  requestCancel(id: string, cancel: TradeCancel, audit?: AuditEntry) {
    return this.ports.trades.requestCancel(id, cancel, audit);
  }
  markCancelled(id: string, error: { code: string; message: string }, cancel?: TradeCancel, audit?: AuditEntry) {
    return this.ports.trades.markCancelled(id, error, cancel, audit);
  }
  discard(id: string, audit?: AuditEntry) {
    return this.ports.trades.discard(id, audit);
  }
  forgetUnsigned(staleAfterMs?: number) {
    return this.ports.trades.forgetUnsigned(staleAfterMs);
  }
  get(id: string) {
    return this.ports.trades.get(id);
  }
  findByHash(txHash: string) {
    return this.ports.trades.findByHash(txHash);
  }
  page(query: TradePageQuery) {
    return this.ports.trades.page(query);
  }
  summary(query: TradeSummaryQuery) {
    return this.ports.trades.summary(query);
  }

  // NonceStore and NonceLedger, but the leases
  withNonce<T>(
    wallet: string,
    chainNonce: () => Promise<number>,
    send: (nonce: number) => Promise<T>,
    consumed?: NoncesConsumed<T>,
  ): Promise<T> {
    return this.ports.nonces.withNonce(wallet, chainNonce, send, consumed);
  }
  recordSlot(
    slot: {
      wallet: string;
      nonce: number;
      purpose: SlotPurpose;
      deadline: number | null;
      reserves?: readonly Reservation[];
    },
    first: Broadcast,
  ) {
    return this.ports.nonces.recordSlot(slot, first);
  }
  reservations(minedAfter: number) {
    return this.ports.nonces.reservations(minedAfter);
  }
  recordBroadcast(wallet: string, nonce: number, broadcast: Broadcast, replaces: string, audit?: AuditEntry) {
    return this.ports.nonces.recordBroadcast(wallet, nonce, broadcast, replaces, audit);
  }
  slot(wallet: string, nonce: number) {
    return this.ports.nonces.slot(wallet, nonce);
  }
  highestNonce(wallet: string) {
    return this.ports.nonces.highestNonce(wallet);
  }
  openSlots(wallet: string) {
    return this.ports.nonces.openSlots(wallet);
  }
  markSlot(wallet: string, nonce: number, state: SlotState, mined: MinedTx | null) {
    return this.ports.nonces.markSlot(wallet, nonce, state, mined);
  }
  finalizeSlots(wallet: string, blockNumber: number) {
    return this.ports.nonces.finalizeSlots(wallet, blockNumber);
  }
  releaseSlot(wallet: string, nonce: number, hash: string) {
    return this.ports.nonces.releaseSlot(wallet, nonce, hash);
  }

  // The NonceLedger's leases
  acquireLease(name: string, holder: string, ttlMs: number) {
    return this.ports.leases.acquireLease(name, holder, ttlMs);
  }
  releaseLease(name: string, holder: string) {
    return this.ports.leases.releaseLease(name, holder);
  }

  // QuoteStore
  saveQuote(quote: StoredQuote) {
    return this.ports.quotes.saveQuote(quote);
  }
  getQuote(id: string) {
    return this.ports.quotes.getQuote(id);
  }
  consumeQuote(id: string, scope: string, tradeId: string, now: Date) {
    return this.ports.quotes.consumeQuote(id, scope, tradeId, now);
  }
  releaseQuote(id: string, tradeId: string) {
    return this.ports.quotes.releaseQuote(id, tradeId);
  }
  sweepQuotes(before: Date) {
    return this.ports.quotes.sweepQuotes(before);
  }

  // WebhookOutbox
  registerWebhookScopes(holder: string, scopes: readonly string[], ttlMs: number, watchers?: readonly string[]) {
    return this.ports.webhooks.registerWebhookScopes(holder, scopes, ttlMs, watchers);
  }
  failOrphanedWebhookEvents(windowStartBefore: Date, limit: number) {
    return this.ports.webhooks.failOrphanedWebhookEvents(windowStartBefore, limit);
  }
  claimWebhookEvents(holder: string, limits: ReadonlyMap<string, number>, leaseMs: number) {
    return this.ports.webhooks.claimWebhookEvents(holder, limits, leaseMs);
  }
  recordWebhookAttempt(id: string, holder: string, attempt: WebhookAttempt, outcome: WebhookOutcome) {
    return this.ports.webhooks.recordWebhookAttempt(id, holder, attempt, outcome);
  }
  listWebhookDeliveries(query: WebhookDeliveryQuery) {
    return this.ports.webhooks.listWebhookDeliveries(query);
  }
  retryWebhookDelivery(scopes: WebhookScopes, id: string, now: Date, audit?: AuditEntry) {
    return this.ports.webhooks.retryWebhookDelivery(scopes, id, now, audit);
  }
  webhookStats() {
    return this.ports.webhooks.webhookStats();
  }
  sweepWebhookEvents(finishedBefore: Date, limit: number) {
    return this.ports.webhooks.sweepWebhookEvents(finishedBefore, limit);
  }

  // AuditLog
  appendAudit(entry: AuditEntry) {
    return this.ports.audit.appendAudit(entry);
  }
  auditHead() {
    return this.ports.audit.auditHead();
  }
  auditPage(query: AuditPageQuery) {
    return this.ports.audit.auditPage(query);
  }

  // ApprovalJournal
  hold(id: string, approval: TradeApproval, audit: AuditEntry) {
    return this.ports.approvals.hold(id, approval, audit);
  }
  decideApproval(id: string, verdict: ApprovalVerdict, decision: ApprovalDecision) {
    return this.ports.approvals.decideApproval(id, verdict, decision);
  }
  expireApprovals(now: Date, staleBefore: Date) {
    return this.ports.approvals.expireApprovals(now, staleBefore);
  }

  // WatchJournal
  recordOutsideTransaction(tx: OutsideTransaction, event: WatchEvent, audit: AuditEntry, pause: boolean) {
    return this.ports.watch.recordOutsideTransaction(tx, event, audit, pause);
  }
  setWatchAlarm(name: string, raised: boolean, event: WatchEvent) {
    return this.ports.watch.setWatchAlarm(name, raised, event);
  }
  watchAlarms() {
    return this.ports.watch.watchAlarms();
  }
  unknownTransactions(wallet: string, hashes: readonly string[]) {
    return this.ports.watch.unknownTransactions(wallet, hashes);
  }
  walletPauses() {
    return this.ports.watch.walletPauses();
  }
  resumeWallet(wallet: string, audit: AuditEntry) {
    return this.ports.watch.resumeWallet(wallet, audit);
  }
  watchedNonce(wallet: string, chainId: number) {
    return this.ports.watch.watchedNonce(wallet, chainId);
  }
  saveWatchedNonce(wallet: string, at: WatchedNonce, back?: boolean) {
    return this.ports.watch.saveWatchedNonce(wallet, at, back);
  }
}

/** The journal of `ports`, closed by `close`: what a wrapper of each port gives back. */
export function journalOf(ports: JournalPorts, close: () => Promise<void>): Journal {
  return new PortsJournal(ports, close);
}

class PortsJournal extends Journal {
  readonly ports: JournalPorts;
  readonly #close: () => Promise<void>;

  constructor(ports: JournalPorts, close: () => Promise<void>) {
    super();
    this.ports = ports;
    this.#close = close;
  }

  close(): Promise<void> {
    return this.#close();
  }
}
