import type { AccessPolicy } from "../access/policy.js";
import { InvalidArgumentError } from "../errors.js";
import type { AuditLog } from "../ports/audit.port.js";
import type { ApprovalJournal } from "../ports/approval.port.js";
import {
  decideTradeUseCase,
  listApprovalsUseCase,
  type DecideTradeUseCase,
  type ListApprovalsUseCase,
} from "./approvals.use-case.js";
import { type ApprovedRunner, runApproved } from "./trade-approved.js";
import type { TradeJournalling } from "./trade-execute.js";
import type { TradeRecord } from "../ports/journal.port.js";
import { listAuditUseCase, type ListAuditUseCase } from "./audit.use-case.js";
import type { TradeJournal } from "../ports/journal.port.js";
import type { PricePort } from "../ports/price.port.js";
import type { QuotePort, QuoteStore } from "../ports/quote.port.js";
import type { TradePort, TradeReplacer } from "../ports/trade.port.js";
import {
  cancelTradeUseCase,
  speedUpTradeUseCase,
  type CancelTradeUseCase,
  type SpeedUpTradeUseCase,
} from "./trade-cancel.use-case.js";
import { assertTradeConfig, type TradeConfig } from "../validation/trade-request.js";
import { priceUseCase, type PriceUseCase } from "./price.use-case.js";
import { DEFAULT_QUOTE_TTL_MS, quoteUseCase, type QuoteUseCase } from "./quote.use-case.js";
import {
  listTradesUseCase,
  tradeSummaryUseCase,
  type ListTradesUseCase,
  type TradeSummaryUseCase,
} from "./trade-history.use-case.js";
import { tradeStatusUseCase, type TradeStatusUseCase } from "./trade-status.use-case.js";
import { tradeUseCase, type TradeUseCase } from "./trade.use-case.js";
import type { WatchJournal } from "../ports/watch.port.js";
import type { WebhookOutbox } from "../ports/webhook.port.js";
import { resumeWalletUseCase, type ResumeWalletUseCase } from "./wallet-resume.use-case.js";
import {
  listWebhookDeliveriesUseCase,
  retryWebhookDeliveryUseCase,
  type ListWebhookDeliveriesUseCase,
  type RetryWebhookDeliveryUseCase,
} from "./webhook-deliveries.use-case.js";

/** Everything the transports can ask of the domain. */
export interface UseCases {
  sell: TradeUseCase;
  buy: TradeUseCase;
  remittance: TradeUseCase;
  price: PriceUseCase;
  /** A trade by any hash it broadcast, as the journal knows it. */
  trade: TradeStatusUseCase;
  /** A page of the caller's trades, newest first, from the journal. */
  trades: ListTradesUseCase;
  /** The caller's totals per kind and stable coin over a time range. */
  tradeSummary: TradeSummaryUseCase;
  /** A quote for a trade, recorded for the trade to name in its Quote-Id header. */
  quote: QuoteUseCase;
  /** A page of the caller's webhook deliveries, with their attempts. */
  webhookDeliveries: ListWebhookDeliveriesUseCase;
  /** Sends a failed webhook delivery of the caller's again. */
  retryWebhookDelivery: RetryWebhookDeliveryUseCase;
  /** A page of the audit log, for an admin key. */
  audit: ListAuditUseCase;
  /** The held trades the caller may approve (an approver key). */
  approvals: ListApprovalsUseCase;
  /** An approver's decision on a held trade; an approval that completes it starts its run in the background. */
  approveTrade: DecideTradeUseCase;
  rejectTrade: DecideTradeUseCase;
  /** Ends a paused exchange wallet's pause, for an admin key. */
  resumeWallet: ResumeWalletUseCase;
  /** Cancels a trade, for the key that sent it or an admin (a no-op at its nonce once signed). */
  cancelTrade: CancelTradeUseCase;
  /** Re-prices a trade's pending transaction, for the key that sent it or an admin. */
  speedUpTrade: SpeedUpTradeUseCase;
}

export interface UseCaseDeps {
  trade: TradePort;
  price: PricePort;
  config: TradeConfig;
  /** The durable trade journal; without it trades are not recorded and Idempotency-Key is refused. */
  journal?: TradeJournal;
  /** How long a retry waits for the first request with its key (default 10 s). */
  inFlightWaitMs?: number;
  /** Reads quotes from the chain; with `quotes`, enables quotes (else POST /quote is refused). */
  quote?: QuotePort;
  /** Where quotes are kept: the journal's storage, so a quote is used once across instances. */
  quotes?: QuoteStore;
  /** The exchange wallets: a quote without userAddress is for the only one. */
  wallets?: readonly string[];
  /** How long a quote may be used (default DEFAULT_QUOTE_TTL_MS). */
  quoteTtlMs?: number;
  /** The webhook outbox (the journal's storage); without it the deliveries cannot be listed. */
  webhooks?: WebhookOutbox;
  /**
   * The access policy in force (ACCESS_FILE, reloaded when it changes): who may trade what, the
   * spending limits, the denylist, and what each key reads. Absent: every key a trader with no
   * limits, reading its own trades.
   */
  policy?: () => AccessPolicy | undefined;
  /**
   * The audit log (the journal's storage): with it, every decision about money or access the use
   * cases take is recorded (core/ports/audit.port.ts), and an admin key can read it.
   */
  audit?: AuditLog;
  /**
   * The journal's approvals (its storage): with it, a trade an approval rule of the policy matches
   * is held for its approvers; without it, refused.
   */
  approvals?: ApprovalJournal;
  /** What the watch keeps in the journal (the wallets paused); without it no wallet is ever paused. */
  watch?: WatchJournal;
  /** Replaces a trade's transaction at its nonce (the wallets' monitors); without it, or a journal, cancels are refused. */
  replacer?: TradeReplacer;
}

/**
 * Wires the ports into the use cases. Called once by the composition root.
 * @throws TypeError when `config` is unusable (see assertTradeConfig)
 */
export function createUseCases({
  trade,
  price,
  config,
  journal,
  inFlightWaitMs = 10_000,
  ...quoting
}: UseCaseDeps): UseCases {
  assertTradeConfig(config);
  const {
    quote,
    quotes,
    wallets = [],
    quoteTtlMs = DEFAULT_QUOTE_TTL_MS,
    webhooks,
    policy,
    audit,
    approvals,
    watch,
    replacer,
  } = quoting;
  const journalling = journal
    ? { journal, inFlightWaitMs, ...(quotes && { quotes }), ...(audit && { audit }), ...(approvals && { approvals }) }
    : undefined;
  const prices = priceUseCase(price);
  // A sell's first count reads the price through its checks, as the price route does: a rate that
  // is not a positive number would count it at nothing, or less.
  const access = policy === undefined ? undefined : { policy, price: { getPrice: prices, current: prices.now } };
  const status = journal
    ? tradeStatusUseCase(journal, trade, policy)
    : async () => {
        throw new InvalidArgumentError(
          "transactionHash",
          "trades cannot be looked up: this service runs without a trade journal",
        );
      };
  const replacing =
    journal && replacer ? { journal, replacer, status, ...(policy && { policy }), ...(audit && { audit }) } : undefined;
  return {
    sell: tradeUseCase("sell", trade, config, journalling, access),
    buy: tradeUseCase("buy", trade, config, journalling, access),
    remittance: tradeUseCase("remittance", trade, config, journalling, access),
    price: prices,
    trade: status,
    trades: journal ? listTradesUseCase(journal, config.stableCoins, policy) : withoutJournal,
    tradeSummary: journal ? tradeSummaryUseCase(journal, config.stableCoins, policy) : withoutJournal,
    quote:
      quote && quotes && journal
        ? quoteUseCase(quote, quotes, config, { ttlMs: quoteTtlMs, wallets, ...(access && { access, journal }) })
        : async () => {
            throw new InvalidArgumentError(
              "request",
              "quotes are not available: this service runs without a trade journal",
            );
          },
    webhookDeliveries: webhooks ? listWebhookDeliveriesUseCase(webhooks, policy) : withoutWebhooks,
    retryWebhookDelivery: webhooks
      ? retryWebhookDeliveryUseCase(webhooks, undefined, policy, audit !== undefined)
      : withoutWebhooks,
    audit: audit ? listAuditUseCase(audit, policy) : withoutAudit,
    resumeWallet: watch ? resumeWalletUseCase(watch, wallets, policy) : withoutWatch,
    cancelTrade: replacing ? cancelTradeUseCase(replacing) : withoutReplacer,
    speedUpTrade: replacing ? speedUpTradeUseCase(replacing) : withoutReplacer,
    ...approvalUseCases({ journalling, approvals, policy, runner: { trade, config, ...(access && { access }) } }),
  };
}

/** The approval use cases: over the journal's approvals, or refusing without them. */
function approvalUseCases(parts: {
  journalling: TradeJournalling | undefined;
  approvals: ApprovalJournal | undefined;
  policy: (() => AccessPolicy | undefined) | undefined;
  runner: Omit<ApprovedRunner, "journalling">;
}): Pick<UseCases, "approvals" | "approveTrade" | "rejectTrade"> {
  const { journalling, approvals, policy } = parts;
  if (journalling === undefined || approvals === undefined)
    return { approvals: withoutApprovals, approveTrade: withoutApprovals, rejectTrade: withoutApprovals };
  const runner: ApprovedRunner = { ...parts.runner, journalling };
  const deps = {
    journal: journalling.journal,
    approvals,
    ...(policy && { policy }),
    ...(journalling.audit && { audit: journalling.audit }),
    run: (record: TradeRecord) => void runApproved(runner, record),
  };
  return {
    approvals: listApprovalsUseCase(journalling.journal, policy),
    approveTrade: decideTradeUseCase("approve", deps),
    rejectTrade: decideTradeUseCase("reject", deps),
  };
}

async function withoutApprovals(): Promise<never> {
  throw new InvalidArgumentError(
    "approvals",
    "held trades are kept in the trade journal, which this service runs without",
  );
}

async function withoutReplacer(): Promise<never> {
  throw new InvalidArgumentError(
    "id",
    "trades cannot be cancelled or sped up: this service runs without a trade journal",
  );
}

async function withoutWatch(): Promise<never> {
  throw new InvalidArgumentError("address", "no wallet is paused: this service runs without a trade journal");
}

async function withoutWebhooks(): Promise<never> {
  throw new InvalidArgumentError(
    "webhooks",
    "webhook deliveries are kept in the trade journal, which this service runs without",
  );
}

async function withoutAudit(): Promise<never> {
  throw new InvalidArgumentError(
    "audit",
    "the audit log is kept in the trade journal, which this service runs without",
  );
}

async function withoutJournal(): Promise<never> {
  throw new InvalidArgumentError("journal", "trades cannot be listed: this service runs without a trade journal");
}
