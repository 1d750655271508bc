/**
 * Prometheus metrics (prom-client), served on a listener of their own (METRICS_PORT) so that a
 * scraper needs no api key. Names follow Prometheus's conventions: a `token_service_` prefix,
 * seconds for time, `_total` for counters, labels of low cardinality (routes and procedures as
 * the service defines them, never raw paths; wallets and endpoints as configured).
 *
 * - Requests: `token_service_requests_total{route, protocol, code}` and
 *   `token_service_request_duration_seconds{route, protocol}`; protocol is http (the JSON
 *   routes), grpc, grpc-web or connect; code the HTTP status, or the gRPC code's name for RPCs.
 * - Trades: `token_service_trades_total{kind, stable, outcome}` (outcome "success" or the domain
 *   error's code) and `token_service_trade_duration_seconds{kind, stable}` (to the receipt).
 * - Quotes: `token_service_quotes_total{kind, outcome}` (outcome "ok", "issues" when the quote
 *   lists any, or the error's code) and the quote-to-trade conversions,
 *   `token_service_quoted_trades_total{kind, outcome}`: trades that named a Quote-Id, by
 *   outcome ("success", or the code: quote_used, quote_slippage, ...).
 * - Wallets: `token_service_wallet_unconfirmed_nonces{wallet}`,
 *   `token_service_wallet_oldest_unconfirmed_age_seconds{wallet}`,
 *   `token_service_wallet_lifecycle_events_total{wallet, event}` (replaced, resent, noop,
 *   expired, gap_filled, reorg, nonce_lost) and `token_service_wallet_balance{wallet, asset}`
 *   (whole units of ETH, the token and each stable coin, read at scrape).
 * - The chain: `token_service_chain_head_age_seconds`; per endpoint
 *   `token_service_rpc_requests_total{endpoint, outcome}` (ok, transport_error),
 *   `token_service_rpc_calls_total{method, endpoint}`, `token_service_rpc_errors_total{endpoint}`
 *   (JSON-RPC errors) and `token_service_rpc_request_duration_seconds{endpoint}`.
 * - The journal: `token_service_journal_operation_duration_seconds{operation}`.
 * - The access file, its refusals and the spending limits' highest use: access-metrics.ts.
 * - The wallet watch (outside transactions, pauses, alarms, reserves, trades left): watch-metrics.ts.
 * - The settings the alert rules compare with, and each endpoint's state: settings-gauges.ts.
 * - Node.js's defaults (process_*, nodejs_*, event-loop lag included).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

import { DomainError, type QuoteUseCase, type TradePort, type TradeUseCase, type UseCases } from "../../core/index.js";
import type { EndpointStatus, LifecycleLog, RpcRequestRecord, WalletSource, WatchState } from "../chain/index.js";
import { type Journal, journalOf } from "../shared/journal.js";
import { type Around, aroundPorts } from "../shared/journal-wrappers.js";
import { AccessMetrics } from "./access-metrics.js";
import { PREFIX } from "./prefix.js";
import { RequestMetrics } from "./request-metrics.js";
import { type WebhookOutboxStats, watchWalletSource, watchWebhookOutbox } from "./scrape-gauges.js";
import { type ExportedSettings, watchSettings } from "./settings-gauges.js";
import { WatchMetrics } from "./watch-metrics.js";

/** An error's `outcome` label: the domain's codes only; a driver's or Node's (SQLSTATEs, E…) would each make a new series. */
const outcomeOf = (error: unknown): string => (error instanceof DomainError ? error.code : "internal");

/** Request latencies: a cached price takes well under a millisecond, a trade a block or more. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const TRADE_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300];
const FAST_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/** Lifecycle log messages, by the event they report (adapters/chain/lifecycle/monitor.ts). */
const LIFECYCLE_EVENTS: Array<[prefix: string, event: string]> = [
  ["replaced a transaction not mined in time", "replaced"],
  ["re-priced a transaction the node refused", "replaced"],
  ["re-sent a transaction the node no longer knew", "resent"],
  ["deadline passed: freeing the nonce with a no-op", "noop"],
  ["trade expired", "expired"],
  ["filled a nonce gap", "gap_filled"],
  ["reorg:", "reorg"],
  ["nonce used by a transaction this service did not sign", "nonce_lost"],
  ["cancel: replaced a transaction with a no-op", "cancel_noop"],
  ["speed-up: replaced a transaction with higher fees", "sped_up"],
  ["trade cancelled", "cancelled"],
];

export class ServiceMetrics {
  readonly registry = new Registry();
  /** Requests by route, protocol and code, and their latency: counted per request, so kept in plain numbers. */
  readonly #requests = new RequestMetrics(this.registry, {
    counter: { name: `${PREFIX}requests_total`, help: "Requests answered, by route, protocol and code." },
    histogram: {
      name: `${PREFIX}request_duration_seconds`,
      help: "Time from a request's arrival to the end of its answer.",
    },
    buckets: REQUEST_BUCKETS,
  });
  readonly #trades = new Counter({
    name: `${PREFIX}trades_total`,
    help: "Trades, by kind, stable coin and outcome (success, or the error's code).",
    labelNames: ["kind", "stable", "outcome"],
    registers: [this.registry],
  });
  readonly #tradeSeconds = new Histogram({
    name: `${PREFIX}trade_duration_seconds`,
    help: "Time from a trade's acceptance to its receipt.",
    labelNames: ["kind", "stable"],
    buckets: TRADE_BUCKETS,
    registers: [this.registry],
  });
  readonly #quotes = new Counter({
    name: `${PREFIX}quotes_total`,
    help: "Quotes, by kind and outcome (ok, issues when the quote lists any, or the error's code).",
    labelNames: ["kind", "outcome"],
    registers: [this.registry],
  });
  readonly #quotedTrades = new Counter({
    name: `${PREFIX}quoted_trades_total`,
    help: "Trades that named a quote (Quote-Id): quote-to-trade conversions, by kind and outcome (success, or the error's code).",
    labelNames: ["kind", "outcome"],
    registers: [this.registry],
  });
  readonly #lifecycle = new Counter({
    name: `${PREFIX}wallet_lifecycle_events_total`,
    help: "What the lifecycle monitor did, by wallet and event.",
    labelNames: ["wallet", "event"],
    registers: [this.registry],
  });
  readonly #rpcRequests = new Counter({
    name: `${PREFIX}rpc_requests_total`,
    help: "JSON-RPC requests (POSTs) by endpoint and outcome.",
    labelNames: ["endpoint", "outcome"],
    registers: [this.registry],
  });
  readonly #rpcCalls = new Counter({
    name: `${PREFIX}rpc_calls_total`,
    help: "JSON-RPC calls (a batch holds several) by method and endpoint.",
    labelNames: ["method", "endpoint"],
    registers: [this.registry],
  });
  readonly #rpcErrors = new Counter({
    name: `${PREFIX}rpc_errors_total`,
    help: "Calls answered with a JSON-RPC error, by endpoint.",
    labelNames: ["endpoint"],
    registers: [this.registry],
  });
  readonly #rpcSeconds = new Histogram({
    name: `${PREFIX}rpc_request_duration_seconds`,
    help: "JSON-RPC request latency by endpoint.",
    labelNames: ["endpoint"],
    buckets: FAST_BUCKETS.concat([10, 30]),
    registers: [this.registry],
  });
  readonly #journalSeconds = new Histogram({
    name: `${PREFIX}journal_operation_duration_seconds`,
    help: "Trade journal operations (each a commit), by operation.",
    labelNames: ["operation"],
    buckets: FAST_BUCKETS,
    registers: [this.registry],
  });
  readonly #webhookDeliveries = new Counter({
    name: `${PREFIX}webhook_deliveries_total`,
    help: "Webhook delivery attempts, by outcome (delivered; retried: not delivered, tried again later; failed: no more retries).",
    labelNames: ["outcome"],
    registers: [this.registry],
  });

  /** The access file's loads, its refusals, and each spending limit's highest use (access-metrics.ts). */
  readonly access = new AccessMetrics(this.registry);
  /** The wallet watch's counter and gauges (watch-metrics.ts). */
  readonly #watch = new WatchMetrics(this.registry);
  /** What the wallet watch tells as it happens: each outside transaction it recorded. */
  readonly watchObserver = this.#watch.observer;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** One answered request. */
  request(route: string, protocol: string, code: string, seconds: number): void {
    this.#requests.observe(route, protocol, code, seconds);
  }

  /** One JSON-RPC request (RpcProviderOptions.onRequest). */
  rpc(record: RpcRequestRecord): void {
    this.#rpcRequests.inc({ endpoint: record.endpoint, outcome: record.failed ? "transport_error" : "ok" });
    const byMethod = new Map<string, number>();
    for (const method of record.methods) byMethod.set(method, (byMethod.get(method) ?? 0) + 1);
    for (const [method, calls] of byMethod) this.#rpcCalls.inc({ method, endpoint: record.endpoint }, calls);
    if (record.errors > 0) this.#rpcErrors.inc({ endpoint: record.endpoint }, record.errors);
    this.#rpcSeconds.observe({ endpoint: record.endpoint }, record.seconds);
  }

  /**
   * `port`, counting its trades by kind, stable coin and outcome, and timing them from the proof
   * to the receipt. A trade is followed through its steps by the objects the port hands back;
   * each is counted once: at the step that refuses it, or at its settlement.
   */
  meteredTrades(port: TradePort): TradePort {
    const trades = new WeakMap<object, { labels: { kind: string; stable: string }; started: number }>();
    const follow = <T extends object>(from: object, to: T): T => {
      const seen = trades.get(from);
      if (seen !== undefined) trades.set(to, seen);
      return to;
    };
    const failed = (from: object, error: unknown): never => {
      const seen = trades.get(from);
      if (seen !== undefined) this.#trades.inc({ ...seen.labels, outcome: outcomeOf(error) });
      throw error;
    };
    // Every method of the port, each called on the port itself: an object that only inherits
    // from it (Object.create) cannot reach a class's private fields. Typed as the port, so a
    // method added to TradePort and not forwarded here fails to compile.
    const metered: TradePort = {
      prove: async (order) => {
        const labels = { kind: order.kind, stable: order.stable.symbol };
        const started = performance.now();
        try {
          const proven = await port.prove(order);
          trades.set(proven, { labels, started });
          return proven;
        } catch (error) {
          this.#trades.inc({ ...labels, outcome: outcomeOf(error) });
          throw error;
        }
      },
      reserve: (proven) =>
        port.reserve(proven).then(
          (reserved) => follow(proven, reserved),
          (e) => failed(proven, e),
        ),
      sign: (reserved, options) =>
        port.sign(reserved, options).then(
          (signed) => follow(reserved, signed),
          (e) => failed(reserved, e),
        ),
      send: (signed) =>
        port.send(signed).then(
          (sent) => ("again" in sent ? { again: follow(signed, sent.again) } : follow(signed, sent)),
          (e) => failed(signed, e),
        ),
      abandon: (signed, error) => {
        port.abandon(signed, error);
        const seen = trades.get(signed);
        if (seen !== undefined) this.#trades.inc({ ...seen.labels, outcome: outcomeOf(error) });
      },
      settle: async (sent) => {
        const receipt = await port.settle(sent).catch((e: unknown) => failed(sent, e));
        const seen = trades.get(sent);
        if (seen !== undefined) {
          this.#trades.inc({ ...seen.labels, outcome: "success" });
          this.#tradeSeconds.observe(seen.labels, (performance.now() - seen.started) / 1000);
        }
        return receipt;
      },
      release: (reserved) => port.release(reserved),
      resolve: (trade) => port.resolve(trade),
      blockTimeMs: () => port.blockTimeMs(),
    };
    return metered;
  }

  /**
   * `useCases` with quotes counted by outcome, and the trades that name a quote (the quote-to-trade
   * conversions) by theirs. Every other use case is passed on as it is.
   */
  meteredQuotes(useCases: UseCases): UseCases {
    const outcome = outcomeOf;
    const quote: QuoteUseCase = async (input, context) => {
      try {
        const answer = await useCases.quote(input, context);
        this.#quotes.inc({ kind: answer.kind, outcome: answer.issues.length > 0 ? "issues" : "ok" });
        return answer;
      } catch (error) {
        const kind = (input as { kind?: unknown } | null)?.kind;
        const label = kind === "sell" || kind === "buy" || kind === "remittance" ? kind : "invalid";
        this.#quotes.inc({ kind: label, outcome: outcome(error) });
        throw error;
      }
    };
    const quoted = (kind: "sell" | "buy" | "remittance", run: TradeUseCase): TradeUseCase => {
      return async (input, context) => {
        if (context?.quoteId === undefined) return run(input, context);
        try {
          const receipt = await run(input, context);
          this.#quotedTrades.inc({ kind, outcome: "success" });
          return receipt;
        } catch (error) {
          this.#quotedTrades.inc({ kind, outcome: outcome(error) });
          throw error;
        }
      };
    };
    return {
      ...useCases,
      quote,
      sell: quoted("sell", useCases.sell),
      buy: quoted("buy", useCases.buy),
      remittance: quoted("remittance", useCases.remittance),
    };
  }

  /**
   * `journal` with every call of its ports' methods timed (each is a commit of its own): each port
   * wrapped in an object that forwards each method to the port itself (adapters/shared/journal-wrappers.ts).
   */
  meteredJournal(journal: Journal): Journal {
    const seconds = this.#journalSeconds;
    const timed: Around = (operation, call) => {
      const started = performance.now();
      return call().finally(() => seconds.observe({ operation }, (performance.now() - started) / 1000));
    };
    return journalOf(aroundPorts(journal.ports, timed), () => journal.close());
  }

  /** Counts a webhook delivery attempt by its outcome. */
  webhookOutcome(outcome: "delivered" | "retried" | "failed"): void {
    this.#webhookDeliveries.inc({ outcome });
  }

  /** The webhook outbox's depth and the age of its oldest pending event, read at each scrape. */
  watchWebhooks(outbox: WebhookOutboxStats): void {
    watchWebhookOutbox(this.registry, outbox);
  }

  /** `log` (the lifecycle monitor's), counting the events its warnings report. */
  countingLifecycle(log: LifecycleLog): LifecycleLog {
    return {
      info: (details, message) => log.info(details, message),
      warn: (details, message) => {
        const event = LIFECYCLE_EVENTS.find(([prefix]) => message.startsWith(prefix))?.[1];
        const wallet = (details as { wallet?: unknown }).wallet;
        if (event !== undefined && typeof wallet === "string" && !message.endsWith("refused it for now"))
          this.#lifecycle.inc({ wallet, event });
        log.warn(details, message);
      },
    };
  }

  /**
   * Gauges read from `source` at each scrape: unconfirmed nonces, balances, the head's age
   * (scrape-gauges.ts).
   */
  watch(source: WalletSource, watched?: () => WatchState | undefined): void {
    watchWalletSource(this.registry, source);
    if (watched !== undefined) this.#watch.watch(watched);
  }

  /**
   * The settings the alert rules compare with (STUCK_AFTER_MS and the others, settings-gauges.ts),
   * and each JSON-RPC endpoint's state, read at each scrape.
   */
  settings(settings: ExportedSettings, endpoints: () => readonly EndpointStatus[]): void {
    watchSettings(this.registry, settings, endpoints);
  }

  /** Serves /metrics on `host`:`port` (0 = a free port). */
  async serve(host: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
    const server: Server = createServer((req, res) => {
      if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
        res.writeHead(404, { "content-type": "text/plain" }).end("metrics are at GET /metrics\n");
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": this.registry.contentType }).end(text),
        (error: unknown) =>
          res.writeHead(500, { "content-type": "text/plain" }).end(`metrics failed: ${(error as Error).message}\n`),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    const address = server.address() as AddressInfo;
    const urlHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
    return {
      url: `http://${urlHost}:${address.port}/metrics`,
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  }
}
