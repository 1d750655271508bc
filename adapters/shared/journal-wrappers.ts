/**
 * Wrapping a journal port by port (journal.ts): each port in an object that forwards each of its
 * methods to the port itself (so the port's private fields stay its own) through `around`, which
 * the wrapper writes once (time the call, wake someone after it). Each object is typed as its
 * port: a method left out fails to compile, and so does an operation's name misspelt.
 */
import type {
  ApprovalJournal,
  AuditLog,
  NoncesConsumed,
  QuoteStore,
  TradeJournal,
  WatchJournal,
  WebhookOutbox,
} from "../../core/index.js";
import type { JournalPorts, LeasePort, NoncePort } from "./journal.js";

/** The name of a method of one of a journal's ports. */
export type JournalOperation =
  | keyof TradeJournal
  | keyof NoncePort
  | keyof LeasePort
  | keyof QuoteStore
  | keyof WebhookOutbox
  | keyof AuditLog
  | keyof ApprovalJournal
  | keyof WatchJournal;

/** Runs `call`, a call of the port method `operation`, and answers what it answers. */
export type Around = <T>(operation: JournalOperation, call: () => Promise<T>) => Promise<T>;

/** `ports`, each wrapped so that every call of its methods goes through `around`. */
export function aroundPorts(ports: JournalPorts, around: Around): JournalPorts {
  return {
    trades: aroundTrades(ports.trades, around),
    nonces: aroundNonces(ports.nonces, around),
    leases: {
      acquireLease: (name, holder, ttlMs) =>
        around("acquireLease", () => ports.leases.acquireLease(name, holder, ttlMs)),
      releaseLease: (name, holder) => around("releaseLease", () => ports.leases.releaseLease(name, holder)),
    },
    quotes: aroundQuotes(ports.quotes, around),
    webhooks: aroundWebhooks(ports.webhooks, around),
    audit: {
      appendAudit: (entry) => around("appendAudit", () => ports.audit.appendAudit(entry)),
      auditHead: () => around("auditHead", () => ports.audit.auditHead()),
      auditPage: (query) => around("auditPage", () => ports.audit.auditPage(query)),
    },
    approvals: {
      hold: (id, approval, audit) => around("hold", () => ports.approvals.hold(id, approval, audit)),
      decideApproval: (id, verdict, decision) =>
        around("decideApproval", () => ports.approvals.decideApproval(id, verdict, decision)),
      expireApprovals: (now, staleBefore) =>
        around("expireApprovals", () => ports.approvals.expireApprovals(now, staleBefore)),
    },
    watch: aroundWatch(ports.watch, around),
  };
}

function aroundWatch(port: WatchJournal, around: Around): WatchJournal {
  return {
    recordOutsideTransaction: (tx, event, audit, pause) =>
      around("recordOutsideTransaction", () => port.recordOutsideTransaction(tx, event, audit, pause)),
    setWatchAlarm: (name, raised, event) => around("setWatchAlarm", () => port.setWatchAlarm(name, raised, event)),
    watchAlarms: () => around("watchAlarms", () => port.watchAlarms()),
    unknownTransactions: (wallet, hashes) =>
      around("unknownTransactions", () => port.unknownTransactions(wallet, hashes)),
    walletPauses: () => around("walletPauses", () => port.walletPauses()),
    resumeWallet: (wallet, audit) => around("resumeWallet", () => port.resumeWallet(wallet, audit)),
    watchedNonce: (wallet, chainId) => around("watchedNonce", () => port.watchedNonce(wallet, chainId)),
    saveWatchedNonce: (wallet, at, back) => around("saveWatchedNonce", () => port.saveWatchedNonce(wallet, at, back)),
  };
}

function aroundTrades(port: TradeJournal, around: Around): TradeJournal {
  return {
    open: (trade, spending, audit) => around("open", () => port.open(trade, spending, audit)),
    respend: (id, usd, checks) => around("respend", () => port.respend(id, usd, checks)),
    spendingUse: (checks) => around("spendingUse", () => port.spendingUse(checks)),
    spendingLeaders: (per, windowMs, by, count) =>
      around("spendingLeaders", () => port.spendingLeaders(per, windowMs, by, count)),
    markSigned: (id, tx) => around("markSigned", () => port.markSigned(id, tx)),
    markSubmitted: (id) => around("markSubmitted", () => port.markSubmitted(id)),
    markReorged: (id) => around("markReorged", () => port.markReorged(id)),
    markMined: (id, receipt) => around("markMined", () => port.markMined(id, receipt)),
    markConfirmed: (id, receipt) => around("markConfirmed", () => port.markConfirmed(id, receipt)),
    markFailed: (id, error, audit) => around("markFailed", () => port.markFailed(id, error, audit)),
    markExpired: (id, error) => around("markExpired", () => port.markExpired(id, error)),
    requestCancel: (id, cancel, audit) => around("requestCancel", () => port.requestCancel(id, cancel, audit)),
    markCancelled: (id, error, cancel, audit) =>
      around("markCancelled", () => port.markCancelled(id, error, cancel, audit)),
    discard: (id, audit) => around("discard", () => port.discard(id, audit)),
    forgetUnsigned: (staleAfterMs) => around("forgetUnsigned", () => port.forgetUnsigned(staleAfterMs)),
    get: (id) => around("get", () => port.get(id)),
    findByHash: (txHash) => around("findByHash", () => port.findByHash(txHash)),
    page: (query) => around("page", () => port.page(query)),
    summary: (query) => around("summary", () => port.summary(query)),
  };
}

function aroundNonces(port: NoncePort, around: Around): NoncePort {
  return {
    withNonce<T>(
      wallet: string,
      chainNonce: () => Promise<number>,
      send: (nonce: number) => Promise<T>,
      consumed?: NoncesConsumed<T>,
    ): Promise<T> {
      return around("withNonce", () => port.withNonce(wallet, chainNonce, send, consumed));
    },
    recordSlot: (slot, first) => around("recordSlot", () => port.recordSlot(slot, first)),
    reservations: (minedAfter) => around("reservations", () => port.reservations(minedAfter)),
    recordBroadcast: (wallet, nonce, broadcast, replaces, audit) =>
      around("recordBroadcast", () => port.recordBroadcast(wallet, nonce, broadcast, replaces, audit)),
    slot: (wallet, nonce) => around("slot", () => port.slot(wallet, nonce)),
    highestNonce: (wallet) => around("highestNonce", () => port.highestNonce(wallet)),
    openSlots: (wallet) => around("openSlots", () => port.openSlots(wallet)),
    markSlot: (wallet, nonce, state, mined) => around("markSlot", () => port.markSlot(wallet, nonce, state, mined)),
    finalizeSlots: (wallet, blockNumber) => around("finalizeSlots", () => port.finalizeSlots(wallet, blockNumber)),
    releaseSlot: (wallet, nonce, hash) => around("releaseSlot", () => port.releaseSlot(wallet, nonce, hash)),
  };
}

function aroundQuotes(port: QuoteStore, around: Around): QuoteStore {
  return {
    saveQuote: (quote) => around("saveQuote", () => port.saveQuote(quote)),
    getQuote: (id) => around("getQuote", () => port.getQuote(id)),
    consumeQuote: (id, scope, tradeId, now) => around("consumeQuote", () => port.consumeQuote(id, scope, tradeId, now)),
    releaseQuote: (id, tradeId) => around("releaseQuote", () => port.releaseQuote(id, tradeId)),
    sweepQuotes: (before) => around("sweepQuotes", () => port.sweepQuotes(before)),
  };
}

function aroundWebhooks(port: WebhookOutbox, around: Around): WebhookOutbox {
  return {
    registerWebhookScopes: (holder, scopes, ttlMs, watchers) =>
      around("registerWebhookScopes", () => port.registerWebhookScopes(holder, scopes, ttlMs, watchers)),
    failOrphanedWebhookEvents: (windowStartBefore, limit) =>
      around("failOrphanedWebhookEvents", () => port.failOrphanedWebhookEvents(windowStartBefore, limit)),
    claimWebhookEvents: (holder, limits, leaseMs) =>
      around("claimWebhookEvents", () => port.claimWebhookEvents(holder, limits, leaseMs)),
    recordWebhookAttempt: (id, holder, attempt, outcome) =>
      around("recordWebhookAttempt", () => port.recordWebhookAttempt(id, holder, attempt, outcome)),
    listWebhookDeliveries: (query) => around("listWebhookDeliveries", () => port.listWebhookDeliveries(query)),
    retryWebhookDelivery: (scope, id, now, audit) =>
      around("retryWebhookDelivery", () => port.retryWebhookDelivery(scope, id, now, audit)),
    webhookStats: () => around("webhookStats", () => port.webhookStats()),
    sweepWebhookEvents: (finishedBefore, limit) =>
      around("sweepWebhookEvents", () => port.sweepWebhookEvents(finishedBefore, limit)),
  };
}
