/**
 * Test helpers for the transports: fake ports behind the real use cases, a real
 * server on port 0, a log sink, and clients for every protocol.
 */
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";

import * as grpc from "@grpc/grpc-js";
import { ConnectError } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as protoLoader from "@grpc/proto-loader";
import { pino, type Logger } from "pino";

import {
  ChainUnavailableError,
  InsufficientFundsError,
  PriceUnavailableError,
  QuoteSlippageError,
  TradeRevertedError,
  UnknownWalletError,
  createUseCases,
  web3LogId,
  type EventLog,
  type ChainQuote,
  type PricePort,
  type PriceRecord,
  type QuotePort,
  type StableCoin,
  type TradeConfig,
  type TradeKind,
  type TradeOnChain,
  type TradeOrder,
  type TradeReplacer,
  type TradeResolution,
  type TransactionReceipt,
} from "../../../core/index.js";
import { WholeTradePort } from "../../helpers/whole-trade-port.js";
import { loadConfig } from "../../../adapters/config/env.js";
import type { Journal } from "../../../adapters/journal/index.js";
import { ServiceMetrics } from "../../../adapters/observability/metrics.js";
import {
  TrustedProxies,
  createApiKeyVerifier,
  createHttpHandler,
  startServer,
  type ApiServer,
  type RateLimitOptions,
  type Readiness,
  type ServerLimits,
} from "../../../adapters/transport/index.js";
import { REDACT_PATHS } from "../../../adapters/shared/logger.js";

export const DAI: StableCoin = { symbol: "DAI", address: "0x6B175474E89094C44Da98b954EedeAC495271d0F", decimals: 18 };
export const USDT: StableCoin = { symbol: "USDT", address: "0xdAC17F958D2ee523a2206206994597C13D831ec7", decimals: 6 };
export const USDC: StableCoin = { symbol: "USDC", address: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", decimals: 6 };

/** The one wallet the fake chain signs for (EIP-55 test vector). */
export const WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
/** A well-formed wallet the fake chain does not sign for. */
export const STRANGER = "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb";
export const CUSTOMER = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359";
export const SWAP = "0x000000000000000000000000000000000000c0de";

export const API_KEY = "test-key-0123456789abcdef";
export const OTHER_KEY = "second-key-fedcba9876543210";

export const CONFIG: TradeConfig = {
  stableCoins: [DAI, USDT, USDC],
  limits: { maxSellTokens: 1_000n * 10n ** 18n, maxUsd: "10000" },
};

export const PRICE: PriceRecord = {
  cryptoCurrency: "TTK",
  rateForCashCurrency: { CHF: 1.116071, EUR: 1.157407, USD: 1.25 },
  rateWithDiscountForCashCurrency: {},
};

/** A valid JSON trade body; override fields to break it. */
export function tradeBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { userAddress: WALLET, destinatary: CUSTOMER, amount: "1.5", usdAddress: USDT.address, ...overrides };
}

/** Logs per receipt, as on the real chain: five for a sell, three for a buy or a remittance. */
export const LOG_COUNT: Record<TradeKind, number> = { sell: 5, buy: 3, remittance: 3 };

/**
 * A trade port standing in for the chain. Its `nonce` counts the transactions it
 * "sent"; a refused trade must leave it unchanged. The wallet holds `balance` of
 * everything; more than that is insufficient funds. Amount 13 (in any unit) reverts.
 */
export class FakeTradePort extends WholeTradePort implements QuotePort {
  /** The chain's block time as the port reports it; unset: unknown. */
  chainBlockTimeMs: number | undefined;
  override blockTimeMs(): number | undefined {
    return this.chainBlockTimeMs;
  }
  nonce = 0;
  /** The token feed's answer (8 decimals): 1.25 USD; move it to move the price between a quote and its trade. */
  priceAnswer = 125_000_000n;
  /** Issues every quote lists, when set. */
  quoteIssues: ChainQuote["issues"] = [];
  /** The native coin's USD price a quote reads (NATIVE_USD_DECIMALS); null: none. */
  nativeUsd: bigint | null = null;
  balance = 500n * 10n ** 18n;
  calls: Array<{ kind: TradeKind; order: TradeOrder }> = [];
  /** Thrown by the next trade, when set (e.g. a bug or an unreachable chain). */
  failure: Error | undefined;
  /** Delays every trade, to test shutdown with a trade in flight. */
  delayMs = 0;
  /** Changes every receipt, when set (e.g. a value a real node would never answer). */
  receiptOverride: Partial<TransactionReceipt> | undefined;

  async resolve(trade: TradeOnChain): Promise<TradeResolution> {
    return this.minedResolution(trade) ?? { state: "dropped" };
  }

  /** What a trade pays out at `priceAnswer`, rounded down as the swap's SwapMath does. */
  output(order: TradeOrder): bigint {
    const stableUnit = 10n ** BigInt(order.stable.decimals);
    return order.kind === "sell"
      ? (order.amount * this.priceAnswer * stableUnit) / (10n ** 18n * 10n ** 8n)
      : (order.amount * 10n ** 18n * 10n ** 8n) / (this.priceAnswer * stableUnit);
  }

  async quote(order: TradeOrder): Promise<ChainQuote> {
    if (this.failure) throw this.failure;
    if (order.wallet !== WALLET) throw new UnknownWalletError(order.wallet);
    return {
      expectedOut: this.output(order),
      price: { answer: this.priceAnswer, decimals: 8, roundId: 18446744073709551617n, updatedAt: 1_800_000_000 },
      gas: { units: 98_765n, estimated: true },
      gasPriceWei: 1_875_000_000n,
      nativeUsd: this.nativeUsd,
      issues: this.quoteIssues,
    };
  }

  protected async run(kind: TradeKind, order: TradeOrder): Promise<TransactionReceipt> {
    this.calls.push({ kind, order });
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (this.failure) throw this.failure;
    if (order.wallet !== WALLET) throw new UnknownWalletError(order.wallet);
    const unit = kind === "sell" ? 10n ** 18n : 10n ** BigInt(order.stable.decimals);
    if (order.amount === 13n * unit) throw new TradeRevertedError("SwapPriceStale()");
    // As the chain adapter's preflight: below the quote's minOut, refused before anything is sent.
    if (order.quote !== undefined && this.output(order) < order.quote.minOut)
      throw new QuoteSlippageError(this.output(order), order.quote.minOut);
    if (order.amount * (kind === "sell" ? 1n : 10n ** BigInt(18 - order.stable.decimals)) > this.balance) {
      throw new InsufficientFundsError(`userAddress: ${order.wallet} holds less than the amount`);
    }
    this.nonce++;
    return { ...fakeReceipt(order, LOG_COUNT[kind], this.nonce), ...this.receiptOverride };
  }
}

export function fakeReceipt(order: TradeOrder, logCount: number, nonce: number): TransactionReceipt {
  const blockHash = `0x${nonce.toString(16).padStart(64, "a")}`;
  const transactionHash = `0x${nonce.toString(16).padStart(64, "b")}`;
  const events: Record<string, EventLog> = {};
  for (let i = 0; i < logCount; i++) {
    events[String(i)] = {
      address: i % 2 === 0 ? order.stable.address : "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      blockHash,
      blockNumber: 100 + nonce,
      logIndex: i,
      removed: false,
      transactionHash,
      transactionIndex: 0,
      id: web3LogId(blockHash, transactionHash, i),
      returnValues: {},
      signature: null,
      raw: {
        data: `0x${i.toString(16).padStart(64, "0")}`,
        topics: [`0x${"dd".repeat(32)}`, `0x${"00".repeat(12)}${order.wallet.slice(2).toLowerCase()}`],
      },
    };
  }
  return {
    blockHash,
    blockNumber: 100 + nonce,
    contractAddress: null,
    cumulativeGasUsed: 123_456,
    effectiveGasPrice: 1_875_000_000,
    from: order.wallet.toLowerCase(),
    gasUsed: 98_765,
    logsBloom: `0x${"00".repeat(256)}`,
    status: true,
    to: SWAP,
    transactionHash,
    transactionIndex: 0,
    type: "0x2",
    events,
  };
}

export class FakePricePort implements PricePort {
  failure: Error | undefined;
  record: PriceRecord = PRICE;
  /** getPrice calls. */
  calls = 0;
  /** What current() answers, as a cache holds a fresh record; none unless a test sets it. */
  held: PriceRecord | undefined;
  async getPrice(): Promise<PriceRecord> {
    this.calls++;
    if (this.failure) throw this.failure;
    return this.record;
  }
  current(): PriceRecord | undefined {
    return this.held;
  }
}

export { ChainUnavailableError, PriceUnavailableError };

/** Collects the JSON log lines the server writes. */
export class LogSink extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: () => void) {
    this.lines.push(
      ...chunk
        .toString("utf8")
        .split("\n")
        .filter((line) => line !== ""),
    );
    callback();
  }
  get text(): string {
    return this.lines.join("\n");
  }
  records(): Array<Record<string, unknown>> {
    return this.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  }
}

export interface TestServer {
  server: ApiServer;
  url: string;
  trade: FakeTradePort;
  price: FakePricePort;
  logs: LogSink;
  log: Logger;
  /** The metrics the service counts into, as with `npm start`'s defaults (not served: nothing scrapes them here). */
  metrics: ServiceMetrics;
  readiness: { result: Readiness | Error; checks: number };
  close(): Promise<void>;
}

/**
 * The real handler and one-port server over fake ports, on 127.0.0.1 port 0, as `npm start`
 * composes them by default: metrics on (the trade port and the journal wrapped as adapters/startup/ wraps
 * them), access lines logged, and the refused-key throttle on (unless `rateLimits` says otherwise).
 */
export async function startTestServer(
  options: {
    shutdownTimeoutMs?: number;
    bodyLimitBytes?: number;
    readinessCacheMs?: number;
    limits?: Partial<ServerLimits>;
    corsOrigins?: string[];
    /** Default: the configuration's (AUTH_FAILURES_PER_MINUTE's throttle, no per-key limit). */
    rateLimits?: RateLimitOptions;
    /** false: every RPC through Connect, without the lean gRPC path. */
    grpcFastPath?: boolean;
    /** A trade journal (idempotency, and quotes when it keeps them), as the service has one. */
    journal?: Journal;
    /** The wallets' monitors, for cancel and speed-up (with a journal). */
    replacer?: TradeReplacer;
    /** QUOTE_TTL_MS. Default: the service's. */
    quoteTtlMs?: number;
    /** Serve HTTPS (and h2 by ALPN) with this certificate. */
    tls?: { cert: Buffer; key: Buffer };
    /** How long a connection may stay silent before the server drops it. */
    sniffTimeoutMs?: number;
    /**
     * TRUSTED_PROXIES, as adapters/startup/transports.ts gives them to the handler and the server alike.
     * Default: none.
     */
    trustedProxies?: string[];
  } = {},
): Promise<TestServer> {
  const trade = new FakeTradePort();
  const price = new FakePricePort();
  const logs = new LogSink();
  const log = pino({ level: "debug", redact: { paths: REDACT_PATHS, censor: "[redacted]" } }, logs);
  const readiness: TestServer["readiness"] = {
    result: { ready: true, detail: "chain reachable, wallets funded" },
    checks: 0,
  };
  const closing = new AbortController();
  const metrics = new ServiceMetrics();
  const trustedProxies = new TrustedProxies(options.trustedProxies ?? loadConfig({}).trustedProxies);
  // Quotes live in the journal, as adapters/startup/use-cases.ts gives them (a journal that keeps them: all
  // three do).
  const quotes =
    options.journal !== undefined && "saveQuote" in options.journal
      ? metrics.meteredJournal(options.journal)
      : undefined;
  const handler = createHttpHandler({
    useCases: metrics.meteredQuotes(
      createUseCases({
        trade: metrics.meteredTrades(trade),
        price,
        config: CONFIG,
        ...(options.journal ? { journal: metrics.meteredJournal(options.journal) } : {}),
        ...(options.replacer ? { replacer: options.replacer } : {}),
        ...(quotes ? { quote: trade, quotes, wallets: [WALLET] } : {}),
        ...(options.quoteTtlMs !== undefined ? { quoteTtlMs: options.quoteTtlMs } : {}),
      }),
    ),
    verifier: createApiKeyVerifier([API_KEY, OTHER_KEY]),
    readiness: async () => {
      readiness.checks += 1;
      await new Promise((resolve) => setTimeout(resolve, 20)); // a check takes a round trip
      if (readiness.result instanceof Error) throw readiness.result;
      return readiness.result;
    },
    log,
    // Tests change the readiness and look at once: no reuse unless a test asks for it.
    readinessCacheMs: options.readinessCacheMs ?? 0,
    ...(options.bodyLimitBytes !== undefined ? { bodyLimitBytes: options.bodyLimitBytes } : {}),
    closing: closing.signal,
    ...(options.corsOrigins !== undefined ? { corsOrigins: options.corsOrigins } : {}),
    rateLimits: options.rateLimits ?? loadConfig({}).rateLimits,
    ...(options.grpcFastPath !== undefined ? { grpcFastPath: options.grpcFastPath } : {}),
    trustedProxies,
    metrics,
  });
  const server = await startServer({
    handler,
    port: 0,
    log,
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 5_000,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.sniffTimeoutMs !== undefined ? { sniffTimeoutMs: options.sniffTimeoutMs } : {}),
    trustedProxies,
  });
  // As the service closes: gRPC health's Watch streams end first, then the server drains.
  const close = () => {
    closing.abort();
    return server.close();
  };
  return { server, url: server.url, trade, price, logs, log, metrics, readiness, close };
}

export const PROTO_ROOT = fileURLToPath(new URL("../../../proto", import.meta.url));

/** grpc-js's ServiceClient (not exported by name): a client made by loadPackageDefinition, its methods loosely typed. */
export type GrpcServiceClient = InstanceType<grpc.ServiceClientConstructor>;

/**
 * The answers of tokentrade.v1.TokenService as grpc-js decodes them with grpcClient's loader
 * options: snake_case fields, 64-bit integers as strings, defaults filled in (an unset
 * `optional` field stays absent).
 */
export interface GrpcEventLog {
  address: string;
  block_hash: string;
  block_number: string;
  log_index: number;
  removed: boolean;
  transaction_hash: string;
  transaction_index: number;
  id: string;
  return_values: Record<string, string>;
  signature?: string;
  raw: { data: string; topics: string[] };
}

export interface GrpcReceipt {
  block_hash: string;
  block_number: string;
  contract_address?: string;
  cumulative_gas_used: string;
  effective_gas_price: string;
  from: string;
  gas_used: string;
  logs_bloom: string;
  status: boolean;
  to: string;
  transaction_hash: string;
  transaction_index: number;
  type: string;
  events: GrpcEventLog[];
}

export interface GrpcPrice {
  crypto_currency: string;
  rate_for_cash_currency: Record<string, number>;
  rate_with_discount_for_cash_currency: Record<string, number>;
}

export interface GrpcTrade {
  id: string;
  kind: string;
  status: string;
  request: { user_address: string; destinatary: string; amount: string; usd_address: string };
  wallet?: string;
  nonce?: string;
  deadline?: string;
  transaction_hash?: string;
  transactions: Array<{
    hash: string;
    max_fee_per_gas: string;
    max_priority_fee_per_gas: string;
    noop: boolean;
    sent_at: string;
  }>;
  confirmations?: string;
  receipt?: GrpcReceipt;
  error?: { code: string; message: string };
  created_at: string;
  updated_at: string;
  api_key_name?: string;
}

interface GrpcAnswers {
  Sell: GrpcReceipt;
  Buy: GrpcReceipt;
  Remittance: GrpcReceipt;
  GetPrice: GrpcPrice;
  GetTrade: GrpcTrade;
}

/** A unary call's outcome: the answer (typed for TokenService's methods) or the ServiceError. */
export interface GrpcOutcome<Method extends string> {
  response?: Method extends keyof GrpcAnswers ? GrpcAnswers[Method] : unknown;
  error?: grpc.ServiceError;
}

/** A @grpc/grpc-js client for tokentrade.v1.TokenService, loaded from the .proto file. */
export function grpcClient(url: string, channelOptions?: grpc.ChannelOptions): GrpcServiceClient {
  const definition = protoLoader.loadSync("tokentrade/v1/token.proto", {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    longs: String,
    defaults: true,
    oneofs: true,
  });
  const proto = grpc.loadPackageDefinition(definition) as unknown as {
    tokentrade: {
      v1: {
        TokenService: new (
          address: string,
          credentials: grpc.ChannelCredentials,
          options?: grpc.ChannelOptions,
        ) => GrpcServiceClient;
      };
    };
  };
  return new proto.tokentrade.v1.TokenService(new URL(url).host, grpc.credentials.createInsecure(), channelOptions);
}

/** Calls a unary method of a grpc-js client; resolves with the response or the ServiceError. */
export function grpcCall<Method extends string>(
  client: GrpcServiceClient,
  method: Method,
  request: object,
  apiKey?: string,
): Promise<GrpcOutcome<Method>> {
  const metadata = new grpc.Metadata();
  if (apiKey !== undefined) metadata.set("api_key", apiKey);
  return new Promise((resolve) => {
    client[method]!(
      request,
      metadata,
      (error: grpc.ServiceError | null, response: NonNullable<GrpcOutcome<Method>["response"]>) => {
        resolve(error ? { error } : { response });
      },
    );
  });
}

/**
 * A parsed JSON answer (undefined when the text is not JSON). Tests read it field by field and
 * assert each field they read, error bodies and receipts alike: a static shape would only move
 * a cast to every one of the hundred-odd reads.
 */
// biome-ignore lint/suspicious/noExplicitAny: what an answer holds is what the tests assert, at run time.
export type JsonBody = any;

/** POSTs JSON (or a raw body) with the key; returns the status, headers and parsed body. */
export async function postJson(
  url: string,
  body: unknown,
  init: {
    apiKey?: string | null;
    contentType?: string | null;
    raw?: string | Buffer;
    headers?: Record<string, string>;
  } = {},
): Promise<{ status: number; headers: Headers; body: JsonBody; text: string }> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.contentType !== null) headers["content-type"] = init.contentType ?? "application/json";
  if (init.apiKey !== null) headers.api_key = init.apiKey ?? API_KEY;
  const response = await fetch(url, { method: "POST", headers, body: init.raw ?? JSON.stringify(body) });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

export async function getJson(
  url: string,
  init: { apiKey?: string | null; method?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...init.headers };
  if (init.apiKey !== null) headers.api_key = init.apiKey ?? API_KEY;
  const response = await fetch(url, { method: init.method ?? "GET", headers });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed as JsonBody, text };
}

/** The ConnectError a call fails with; throws when the call succeeds. */
export async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("expected the call to fail");
}

/** The browser-friendly transports over HTTP/1.1, by name: Connect (binary, JSON) and gRPC-Web. */
export const HTTP1_TRANSPORTS = [
  ["Connect", (baseUrl: string) => createConnectTransport({ baseUrl, httpVersion: "1.1" })],
  [
    "Connect with JSON",
    (baseUrl: string) => createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
  ],
  ["gRPC-Web", (baseUrl: string) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })],
] as const;
