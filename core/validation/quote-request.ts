import { InvalidArgumentError } from "../errors.js";
import type { QuoteIssue } from "../ports/quote.port.js";
import type { TradeKind, TradeOrder } from "../types.js";
import { parseAddress } from "./address.js";
import { formatUnits } from "./amount.js";
import { maxUsdFor, minUsdFor, parseTradeRequest, TOKEN_DECIMALS, type TradeConfig } from "./trade-request.js";

/** The fields of a quote request, in the order they are checked. */
export const QUOTE_REQUEST_FIELDS = [
  "kind",
  "userAddress",
  "destinatary",
  "amount",
  "usdAddress",
  "slippageBps",
] as const;

/** Default and largest `slippageBps` of a quote. */
export const DEFAULT_QUOTE_SLIPPAGE_BPS = 50;
export const MAX_QUOTE_SLIPPAGE_BPS = 1_000;

/**
 * The largest amount a quote is computed for: a trillion tokens or USD. Above the service's own
 * limit (and up to this) a quote is answered with an `amount_above_maximum` issue; above this,
 * the amount is refused like a trade's, naming the field.
 */
const QUOTABLE = "1000000000000";

const KINDS: readonly TradeKind[] = ["sell", "buy", "remittance"];

/** A validated quote request. */
export interface QuoteRequest {
  /** The trade quoted. Without a `destinatary` in the request, the wallet's own address stands in (for the gas estimate). */
  order: TradeOrder;
  /** Whether the request named a destinatary: a quote without one binds none. */
  destinataryNamed: boolean;
  slippageBps: number;
  /** The service's amount limits the order breaks: a trade would be refused for them. */
  issues: QuoteIssue[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function optionalString(input: Record<string, unknown>, field: string): string | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new InvalidArgumentError(field, "must be a string");
  return value;
}

/**
 * Validates a quote request body: `kind`, `amount` and `usdAddress` required, `userAddress`,
 * `destinatary` and `slippageBps` optional. Addresses, the stable coin and the amount's format
 * are checked exactly as a trade's (parseTradeRequest); the amount limits are not refusals but
 * issues of the quote, with their numbers.
 *
 * @param wallets - the exchange wallets: without `userAddress`, the only one (several: required)
 * @throws InvalidArgumentError whose `field` names the first offending field
 */
export function parseQuoteRequest(input: unknown, config: TradeConfig, wallets: readonly string[]): QuoteRequest {
  if (!isPlainObject(input)) {
    throw new InvalidArgumentError(
      "request",
      `must be a JSON object with the fields kind, amount and usdAddress (userAddress, destinatary and slippageBps optional)`,
    );
  }
  const kind = input.kind;
  if (kind === undefined || kind === null) throw new InvalidArgumentError("kind", "is required");
  if (typeof kind !== "string" || !(KINDS as readonly string[]).includes(kind))
    throw new InvalidArgumentError("kind", `must be one of ${KINDS.join(", ")}`);
  let userAddress = optionalString(input, "userAddress");
  if (userAddress === undefined) {
    if (wallets.length !== 1)
      throw new InvalidArgumentError(
        "userAddress",
        `is required: the service signs for ${wallets.length} wallets, so the quote must name one`,
      );
    userAddress = wallets[0]!;
  }
  const destinatary = optionalString(input, "destinatary");
  for (const field of ["amount", "usdAddress"] as const) {
    if (input[field] === undefined || input[field] === null) throw new InvalidArgumentError(field, "is required");
    if (typeof input[field] !== "string") throw new InvalidArgumentError(field, "must be a string");
  }
  const slippageBps = parseSlippage(input.slippageBps);
  const extra = Object.keys(input).find((key) => !(QUOTE_REQUEST_FIELDS as readonly string[]).includes(key));
  if (extra !== undefined) throw new InvalidArgumentError(extra, "is not a field of a quote request");

  // The wallet is checked first, as a trade checks it, so a bad userAddress is named as such.
  const wallet = parseAddress("userAddress", userAddress);
  // Up to a trillion, with no minimum: the service's own limits become issues below.
  const quotable: TradeConfig = {
    ...config,
    limits: { maxSellTokens: BigInt(QUOTABLE) * 10n ** BigInt(TOKEN_DECIMALS), maxUsd: QUOTABLE },
    forbiddenDestinataries: destinatary === undefined ? [] : (config.forbiddenDestinataries ?? []),
  };
  const order = parseTradeRequest(
    kind as TradeKind,
    { userAddress: wallet, destinatary: destinatary ?? wallet, amount: input.amount, usdAddress: input.usdAddress },
    quotable,
  );
  return { order, destinataryNamed: destinatary !== undefined, slippageBps, issues: limitIssues(order, config) };
}

function parseSlippage(value: unknown): number {
  if (value === undefined || value === null) return DEFAULT_QUOTE_SLIPPAGE_BPS;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > MAX_QUOTE_SLIPPAGE_BPS)
    throw new InvalidArgumentError(
      "slippageBps",
      `must be an integer from 0 to ${MAX_QUOTE_SLIPPAGE_BPS} (basis points; default ${DEFAULT_QUOTE_SLIPPAGE_BPS})`,
    );
  return value;
}

/** The service's amount limits the order breaks, with their numbers. */
function limitIssues(order: TradeOrder, config: TradeConfig): QuoteIssue[] {
  const sell = order.kind === "sell";
  const decimals = sell ? TOKEN_DECIMALS : order.stable.decimals;
  const unit = sell ? "tokens" : "USD";
  const minimum = sell ? (config.limits.minSellTokens ?? 1n) : minUsdFor(config, order.stable);
  const maximum = sell ? config.limits.maxSellTokens : maxUsdFor(config, order.stable);
  const amount = formatUnits(order.amount, decimals);
  if (order.amount < minimum) {
    const min = formatUnits(minimum, decimals);
    return [
      {
        type: "amount_below_minimum",
        message: `amount ${amount} ${unit} is below the service's minimum of ${min} ${unit}`,
        details: { amount, minimum: min },
      },
    ];
  }
  if (order.amount > maximum) {
    const max = formatUnits(maximum, decimals);
    return [
      {
        type: "amount_above_maximum",
        message: `amount ${amount} ${unit} is above the service's maximum of ${max} ${unit}`,
        details: { amount, maximum: max },
      },
    ];
  }
  return [];
}

/**
 * The least a quote promises out of `expected` at `slippageBps`: rounded down, so a quote never
 * promises more than `expected` less its slippage (at 0, exactly `expected`).
 */
export function quoteMinOut(expected: bigint, slippageBps: number): bigint {
  return (expected * BigInt(10_000 - slippageBps)) / 10_000n;
}

/** Quote-Id values: "q_" and 32 lower-case hex digits, as the service issues them. */
const QUOTE_ID = /^q_[0-9a-f]{32}$/;

/** @throws InvalidArgumentError naming Quote-Id when `value` is not a quote id the service could have issued */
export function parseQuoteId(value: string): string {
  if (!QUOTE_ID.test(value)) throw new InvalidArgumentError("Quote-Id", 'must be a quote id, "q_" and 32 hex digits');
  return value;
}
