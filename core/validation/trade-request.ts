import { InvalidArgumentError } from "../errors.js";
import type { StableCoin, TradeKind, TradeOrder, TradeRequest } from "../types.js";
import { parseAddress } from "./address.js";
import { decimalToBaseUnits, formatUnits, parseAmount } from "./amount.js";

/** Decimals of the traded token; a sell `amount` is in tokens. */
export const TOKEN_DECIMALS = 18;

/** The fields of a trade request (SPEC 2.1), in the order they are checked. */
export const TRADE_REQUEST_FIELDS = ["userAddress", "destinatary", "amount", "usdAddress"] as const;

/** What trade validation needs to know about the deployment. */
export interface TradeConfig {
  /** The stable coins a `usdAddress` may name (DAI, USDT, USDC). */
  stableCoins: readonly StableCoin[];
  limits: {
    /** Largest sell, in token base units (18 decimals), inclusive. */
    maxSellTokens: bigint;
    /**
     * Largest buy or remittance in USD, as plain decimal text such as "10000",
     * inclusive. It is converted to each stable coin's base units, rounding down
     * digits the coin cannot hold (a stricter limit, never a looser one).
     */
    maxUsd: string;
    /** Smallest sell, in token base units, inclusive (dust costs more gas than it moves). Default: none. */
    minSellTokens?: bigint;
    /**
     * Smallest buy or remittance in USD, as plain decimal text such as "0.01", inclusive. It is
     * converted to each stable coin's base units rounding up (a stricter limit). Default: none.
     */
    minUsd?: string;
  };
  /**
   * Addresses a `destinatary` may not be, with what each is: the swap, the token, the stable
   * coins, the price feeds, the exchange wallets. Tokens sent to a contract are lost for good,
   * and an exchange paying itself is a mistake.
   */
  forbiddenDestinataries?: ReadonlyArray<{ address: string; what: string }>;
}

/** The smallest buy or remittance `amount`, in base units of `stable` (1 when no minimum is set). */
export function minUsdFor(config: TradeConfig, stable: StableCoin): bigint {
  if (config.limits.minUsd === undefined) return 1n;
  const min = decimalToBaseUnits(config.limits.minUsd, stable.decimals, "up");
  if (min === undefined) throw new TypeError(`limits.minUsd is not a plain decimal: ${config.limits.minUsd}`);
  return min > 0n ? min : 1n;
}

/** The largest buy or remittance `amount`, in base units of `stable`. */
export function maxUsdFor(config: TradeConfig, stable: StableCoin): bigint {
  const max = decimalToBaseUnits(config.limits.maxUsd, stable.decimals, "down");
  if (max === undefined) throw new TypeError(`limits.maxUsd is not a plain decimal: ${config.limits.maxUsd}`);
  return max;
}

/**
 * Checks a TradeConfig once, at start-up, so a bad deployment fails loudly instead
 * of refusing every request.
 * @throws TypeError naming the bad setting
 */
export function assertTradeConfig(config: TradeConfig): void {
  if (config.stableCoins.length === 0) throw new TypeError("stableCoins: at least one stable coin is required");
  config.stableCoins.forEach((coin, i) => {
    try {
      parseAddress(`stableCoins[${i}].address`, coin.address, { nonZero: true });
    } catch (error) {
      throw new TypeError((error as Error).message);
    }
    if (!Number.isInteger(coin.decimals) || coin.decimals < 0 || coin.decimals > 255) {
      throw new TypeError(`stableCoins[${i}].decimals: must be an integer from 0 to 255`);
    }
    if (maxUsdFor(config, coin) <= 0n) {
      throw new TypeError(`limits.maxUsd: must be greater than 0 in ${coin.symbol} base units`);
    }
  });
  if (config.limits.maxSellTokens <= 0n) throw new TypeError("limits.maxSellTokens: must be greater than 0");
  if (config.limits.minSellTokens !== undefined && config.limits.minSellTokens > config.limits.maxSellTokens) {
    throw new TypeError("limits.minSellTokens: must not be more than limits.maxSellTokens");
  }
  for (const coin of config.stableCoins) {
    if (minUsdFor(config, coin) > maxUsdFor(config, coin))
      throw new TypeError(`limits.minUsd: must not be more than limits.maxUsd (${coin.symbol})`);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Checks the shape of SPEC 2.1: a plain object with exactly the four string fields. */
function parseShape(input: unknown): TradeRequest {
  if (!isPlainObject(input)) {
    throw new InvalidArgumentError(
      "request",
      `must be a JSON object with the fields ${TRADE_REQUEST_FIELDS.join(", ")}`,
    );
  }
  for (const field of TRADE_REQUEST_FIELDS) {
    if (!Object.hasOwn(input, field) || input[field] === undefined) {
      throw new InvalidArgumentError(field, "is required");
    }
    if (typeof input[field] !== "string") throw new InvalidArgumentError(field, "must be a string");
  }
  const extra = Object.keys(input).find((key) => !(TRADE_REQUEST_FIELDS as readonly string[]).includes(key));
  if (extra !== undefined) throw new InvalidArgumentError(extra, "is not a field of a trade request");
  return input as unknown as TradeRequest;
}

/**
 * Validates a trade request body and turns it into a TradeOrder.
 *
 * Checks, in this order (the first failure is reported):
 * 1. shape: a plain object with exactly userAddress, destinatary, amount, usdAddress,
 *    each a string (checked field by field in that order, then unknown fields);
 * 2. userAddress, then destinatary (not the zero address, nor any of
 *    `config.forbiddenDestinataries`): see parseAddress;
 * 3. usdAddress: one of `config.stableCoins`, compared case-insensitively;
 * 4. amount: in tokens (18 decimals, at most `limits.maxSellTokens`) for sell, in
 *    USD with the chosen stable coin's decimals (at most `limits.maxUsd`) for buy
 *    and remittance; see parseAmount; then at least `limits.minSellTokens` or `limits.minUsd`.
 *
 * @param kind - the operation the request is for
 * @param input - the request body, as parsed from JSON (or built from protobuf)
 * @param config - stable coins and limits
 * @returns the order, with checksummed addresses and the amount in base units
 * @throws InvalidArgumentError whose `field` names the first offending field
 */
export function parseTradeRequest(kind: TradeKind, input: unknown, config: TradeConfig): TradeOrder {
  const request = parseShape(input);
  const wallet = parseAddress("userAddress", request.userAddress);
  const destinatary = parseAddress("destinatary", request.destinatary, { nonZero: true });
  const forbidden = config.forbiddenDestinataries?.find(
    (entry) => entry.address.toLowerCase() === destinatary.toLowerCase(),
  );
  if (forbidden !== undefined) {
    throw new InvalidArgumentError(
      "destinatary",
      `${request.destinatary} is ${forbidden.what}: what it received would be lost`,
    );
  }
  const usdAddress = parseAddress("usdAddress", request.usdAddress);
  const stable = config.stableCoins.find((coin) => coin.address.toLowerCase() === usdAddress.toLowerCase());
  if (stable === undefined) {
    const names = config.stableCoins.map((coin) => coin.symbol).join(", ");
    throw new InvalidArgumentError("usdAddress", `${request.usdAddress} is not a supported stable coin (${names})`);
  }
  const amount =
    kind === "sell"
      ? parseAmount("amount", request.amount, TOKEN_DECIMALS, config.limits.maxSellTokens, { unit: "tokens" })
      : parseAmount("amount", request.amount, stable.decimals, maxUsdFor(config, stable), { unit: "USD" });
  const minimum = kind === "sell" ? (config.limits.minSellTokens ?? 1n) : minUsdFor(config, stable);
  if (amount < minimum) {
    const decimals = kind === "sell" ? TOKEN_DECIMALS : stable.decimals;
    throw new InvalidArgumentError(
      "amount",
      `must be at least ${formatUnits(minimum, decimals)} ${kind === "sell" ? "tokens" : "USD"}`,
    );
  }
  return { kind, wallet, destinatary, amount, stable };
}
