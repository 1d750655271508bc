import { InvalidArgumentError } from "../errors.js";
import type { TradeJournal, TradePosition } from "../ports/journal.port.js";
import { GAS_USD_DECIMALS, tradeAmounts } from "../trade-amounts.js";
import { TRADE_STATUSES, type TradeStatus } from "../trade-states.js";
import type { StableCoin, TradeKind } from "../types.js";
import { formatUnits } from "../validation/amount.js";
import { TOKEN_DECIMALS } from "../validation/trade-request.js";
import { callerOf, visibilityOf } from "../access/authorize.js";
import type { TradeContext } from "./trade-context.js";
import { type PolicySource, tradeView, type TradeView } from "./trade-status.use-case.js";

const TRADE_KINDS: readonly TradeKind[] = ["sell", "buy", "remittance"];

/** Trades a page holds when `limit` is not given, and at most. */
export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 500;

/** A page of the caller's trades (GET /api/v1/trades, gRPC ListTrades). */
export interface TradeListView {
  /** Newest first, each as GET /api/v1/trades/{transactionHash} shows it (from the journal: `confirmations` null). */
  trades: TradeView[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
  /** What each trade of `trades` moved, in the same order (for the CSV form). */
  figures: TradeFigures[];
}

/** What one trade moved, as exact decimal strings in the units of its coins; null until it executed. */
export interface TradeFigures {
  /** The stable coin's symbol, or null when the coin is not (or no longer) configured. */
  stableSymbol: string | null;
  /** Paid in: tokens for a sell, the stable coin for a buy or remittance. */
  amountIn: string | null;
  /** Paid out: the stable coin for a sell, tokens for a buy or remittance. */
  amountOut: string | null;
  /** Gas spent, in wei: gasUsed × effectiveGasPrice. */
  gasWei: string | null;
}

/** An amount in both forms; `value` is null when the coin's decimals are unknown (the coin is no longer configured). */
export interface AmountView {
  value: string | null;
  baseUnits: string;
}

/** The totals of one kind against one stable coin. */
export interface TradeSummaryGroup {
  kind: TradeKind;
  /** The stable coin's address, lower-case. */
  usdAddress: string;
  stableSymbol: string | null;
  /** Trades in the range, in any status. */
  count: number;
  /** Of them, those that executed (mined or confirmed): the amounts and the gas are theirs. */
  executed: number;
  /** In tokens for a sell, in the stable coin for a buy or remittance. */
  amountIn: AmountView;
  /** In the stable coin for a sell, in tokens for a buy or remittance. */
  amountOut: AmountView;
  /** Gas spent, in wei. */
  gasWei: string;
  /**
   * Gas spent in USD at the time of each trade: each executed trade's gas in wei × the native
   * coin's USD price the service read when it signed it, summed exactly (plain decimal text, all
   * its digits, nothing rounded). Null when any executed trade of the group has no such price
   * (signed before the deployment named a native-coin feed, or while its answer failed the feed
   * policy): a partial sum would understate the cost. `gasWei` is always complete.
   */
  gasUsd: string | null;
  /**
   * How many of the `count` trades are in each status, by status (only those some are in): the
   * held (pending_approval), approved and rejected among them.
   */
  statuses: Partial<Record<TradeStatus, number>>;
}

/** GET /api/v1/trades/summary, gRPC GetTradeSummary. */
export interface TradeSummaryView {
  /** The range, as asked (RFC 3339); null when left open. */
  since: string | null;
  until: string | null;
  /** By kind, then stable coin address. */
  groups: TradeSummaryGroup[];
}

export type ListTradesUseCase = (query: unknown, context?: TradeContext) => Promise<TradeListView>;
export type TradeSummaryUseCase = (query: unknown, context?: TradeContext) => Promise<TradeSummaryView>;

/**
 * Lists the caller's own trades, newest first, from the journal alone (the chain is not asked,
 * so `confirmations` is null). Query fields, all optional: `status`, `kind`, `since` and `until`
 * (ISO 8601 with a time zone; createdAt in [since, until)), `limit` (1 to 500, default 50) and
 * `cursor` (a previous page's nextCursor). Empty strings count as absent.
 */
export function listTradesUseCase(
  journal: TradeJournal,
  stableCoins: readonly StableCoin[],
  policy?: PolicySource,
): ListTradesUseCase {
  return async (input, context = {}) => {
    const query = fields(input, ["status", "kind", "since", "until", "limit", "cursor"]);
    const status = oneOf("status", query.status, TRADE_STATUSES);
    const kind = oneOf("kind", query.kind, TRADE_KINDS);
    const { since, until } = range(query);
    const limit = parseLimit(query.limit);
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const visible = visibilityOf(policy?.(), callerOf(context));
    const page = await journal.page({ visible, status, kind, since, until, limit, after });
    return {
      trades: page.trades.map((record) => tradeView(record, null)),
      nextCursor: page.next === null ? null : encodeCursor(page.next),
      figures: page.trades.map((record) => {
        const stable = stableOf(stableCoins, record.request.usdAddress);
        const amounts = record.receipt === null ? undefined : tradeAmounts(record.receipt);
        const [inDecimals, outDecimals] = decimalsOf(record.kind, stable);
        return {
          stableSymbol: stable?.symbol ?? null,
          amountIn: format(amounts?.amountIn ?? null, inDecimals),
          amountOut: format(amounts?.amountOut ?? null, outDecimals),
          gasWei: amounts?.gasWei == null ? null : amounts.gasWei.toString(),
        };
      }),
    };
  };
}

/**
 * The caller's totals per kind and stable coin over [since, until) (both optional, ISO 8601):
 * how many trades, and what the executed ones paid in and out and spent on gas, exactly.
 */
export function tradeSummaryUseCase(
  journal: TradeJournal,
  stableCoins: readonly StableCoin[],
  policy?: PolicySource,
): TradeSummaryUseCase {
  return async (input, context = {}) => {
    const query = fields(input, ["since", "until"]);
    const { since, until } = range(query);
    const totals = await journal.summary({ visible: visibilityOf(policy?.(), callerOf(context)), since, until });
    return {
      since: since?.toISOString() ?? null,
      until: until?.toISOString() ?? null,
      groups: totals.map((t) => {
        const stable = stableOf(stableCoins, t.stable);
        const [inDecimals, outDecimals] = decimalsOf(t.kind, stable);
        return {
          kind: t.kind,
          usdAddress: t.stable,
          stableSymbol: stable?.symbol ?? null,
          count: t.count,
          executed: t.executed,
          amountIn: { value: format(t.amountIn, inDecimals), baseUnits: t.amountIn.toString() },
          amountOut: { value: format(t.amountOut, outDecimals), baseUnits: t.amountOut.toString() },
          gasWei: t.gasWei.toString(),
          gasUsd: t.gasUsd === null ? null : formatUnits(t.gasUsd, GAS_USD_DECIMALS),
          statuses: { ...t.statuses },
        };
      }),
    };
  };
}

function stableOf(stableCoins: readonly StableCoin[], address: string): StableCoin | undefined {
  const lower = typeof address === "string" ? address.toLowerCase() : "";
  return stableCoins.find((coin) => coin.address.toLowerCase() === lower);
}

/** Decimals of what a trade pays in and out: tokens and the stable coin, in the kind's order. */
function decimalsOf(kind: TradeKind, stable: StableCoin | undefined): [number | undefined, number | undefined] {
  return kind === "sell" ? [TOKEN_DECIMALS, stable?.decimals] : [stable?.decimals, TOKEN_DECIMALS];
}

function format(amount: bigint | null, decimals: number | undefined): string | null {
  return amount === null || decimals === undefined ? null : formatUnits(amount, decimals);
}

/** The query's fields as strings (numbers allowed for limit); absent and "" as undefined. */
export function fields<K extends string>(input: unknown, known: readonly K[]): Partial<Record<K, string>> {
  if (input === undefined || input === null) return {};
  if (typeof input !== "object" || Array.isArray(input)) throw new InvalidArgumentError("query", "must be an object");
  const out: Partial<Record<K, string>> = {};
  for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
    if (!(known as readonly string[]).includes(key)) {
      // A name that could be mistaken for part of the message is quoted, under "query".
      if (/^[\w.-]{1,64}$/.test(key)) throw new InvalidArgumentError(key, "is not a known field");
      throw new InvalidArgumentError("query", `${JSON.stringify(key.slice(0, 64))} is not a known field`);
    }
    if (value === undefined || value === null || value === "") continue;
    if (typeof value === "number" && key === "limit") out[key as K] = String(value);
    else if (typeof value === "string") out[key as K] = value;
    else throw new InvalidArgumentError(key, "must be a string");
  }
  return out;
}

function oneOf<T extends string>(field: string, value: string | undefined, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value))
    throw new InvalidArgumentError(field, `must be one of ${allowed.join(", ")}`);
  return value as T;
}

/** `since` and `until` as ISO 8601 instants, since not after until; each optional. */
export function range(query: { since?: string; until?: string }): { since?: Date; until?: Date } {
  const since = query.since === undefined ? undefined : parseInstant("since", query.since);
  const until = query.until === undefined ? undefined : parseInstant("until", query.until);
  if (since !== undefined && until !== undefined && since.getTime() > until.getTime())
    throw new InvalidArgumentError("since", "must not be after until");
  return { ...(since && { since }), ...(until && { until }) };
}

/**
 * ISO 8601: a date (midnight UTC), or a date and time with seconds optional, a fraction of a
 * second to the millisecond (further digits must be zeros), and a time zone (Z or ±hh:mm).
 */
const INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-](?:\d{2}):?(?:\d{2})))?$/i;

function parseInstant(field: string, value: string): Date {
  const match = value.length <= 40 ? INSTANT.exec(value) : null;
  if (match === null)
    throw new InvalidArgumentError(
      field,
      "must be an ISO 8601 date or date-time with a time zone, e.g. 2026-11-25T10:00:00Z",
    );
  const [, year, month, day, hour, minute, second, fraction] = match;
  const y = Number(year);
  const m = Number(month);
  const d = Number(day);
  const calendar = new Date(Date.UTC(2000, m - 1, d));
  calendar.setUTCFullYear(y);
  if (m < 1 || m > 12 || calendar.getUTCMonth() !== m - 1 || calendar.getUTCDate() !== d)
    throw new InvalidArgumentError(field, "is not a date of the calendar");
  if (hour !== undefined && (Number(hour) > 23 || Number(minute) > 59 || Number(second ?? 0) > 59))
    throw new InvalidArgumentError(field, "is not a time of day");
  if (fraction !== undefined && /[1-9]/.test(fraction.slice(3)))
    throw new InvalidArgumentError(field, "must be at most millisecond precise");
  const text =
    fraction !== undefined && fraction.length > 3 ? value.replace(`.${fraction}`, `.${fraction.slice(0, 3)}`) : value;
  const at = Date.parse(text);
  if (!Number.isFinite(at)) throw new InvalidArgumentError(field, "is out of range");
  return new Date(at);
}

export function parseLimit(value: string | undefined): number {
  if (value === undefined) return DEFAULT_PAGE_LIMIT;
  const limit = /^\d{1,4}$/.test(value) ? Number(value) : Number.NaN;
  if (!(limit >= 1 && limit <= MAX_PAGE_LIMIT))
    throw new InvalidArgumentError("limit", `must be an integer from 1 to ${MAX_PAGE_LIMIT}`);
  return limit;
}

/** The cursor's text before base64url: version, creation time in µs, id. */
const CURSOR = /^v1\.(\d{1,17})\.([\w-]{1,64})$/;
const BASE64URL = /^[A-Za-z0-9_-]{1,200}$/;

export function encodeCursor(position: TradePosition): string {
  return btoa(`v1.${position.createdAtUs}.${position.id}`).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The position a cursor holds; refused as `cursor` unless it is exactly what encodeCursor gives. */
export function decodeCursor(cursor: string): TradePosition {
  const refuse = () =>
    new InvalidArgumentError("cursor", "is not a cursor this service gave (pass nextCursor as it came)");
  if (!BASE64URL.test(cursor)) throw refuse();
  let text: string;
  try {
    text = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    throw refuse();
  }
  const match = CURSOR.exec(text);
  if (match === null) throw refuse();
  const position = { createdAtUs: BigInt(match[1]!), id: match[2]! };
  if (encodeCursor(position) !== cursor) throw refuse();
  return position;
}
