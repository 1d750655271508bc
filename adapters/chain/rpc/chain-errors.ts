/**
 * Turns what ethers throws into the core's domain errors: a decoded contract revert
 * becomes a precise refusal, an unreachable node becomes ChainUnavailableError.
 */
import { Interface, formatUnits, isError } from "ethers";

import {
  ChainUnavailableError,
  DomainError,
  InsufficientFundsError,
  InvalidArgumentError,
  PriceUnavailableError,
  TradeRevertedError,
} from "../../../core/index.js";
import { SWAP_ABI } from "../tx/index.js";

const swapInterface = new Interface(SWAP_ABI);

/** Transport-level failures: the node did not answer, or answered garbage. */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "EPIPE",
  "UND_ERR_SOCKET",
]);

export function isChainUnreachable(error: unknown): boolean {
  if (isError(error, "NETWORK_ERROR") || isError(error, "TIMEOUT")) return true;
  if (isError(error, "SERVER_ERROR")) return true;
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && UNREACHABLE_CODES.has(code)) return true;
    if (current instanceof TypeError && /fetch failed/i.test(current.message)) return true;
    current = (current as { cause?: unknown }).cause ?? (current as { error?: unknown }).error;
  }
  return false;
}

/** Revert data found anywhere in an ethers error (estimateGas nests it differently per node). */
function revertData(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; current && depth < 6; depth += 1) {
    const data = (current as { data?: unknown }).data;
    if (typeof data === "string" && data.startsWith("0x")) return data;
    if (data && typeof data === "object" && typeof (data as { data?: unknown }).data === "string") {
      return (data as { data: string }).data;
    }
    current =
      (current as { error?: unknown }).error ??
      (current as { info?: { error?: unknown } }).info?.error ??
      (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Maps a failed preflight, send or read to a DomainError. Unknown failures are returned unchanged. */
export function toDomainError(error: unknown, context: { stableDecimals?: number } = {}): unknown {
  if (error instanceof DomainError) return error;
  if (isChainUnreachable(error)) return new ChainUnavailableError("the JSON-RPC node did not answer");
  if (isError(error, "INSUFFICIENT_FUNDS")) {
    return new InsufficientFundsError("userAddress: the exchange wallet cannot pay the gas for this transaction");
  }
  const data = revertData(error);
  if (isError(error, "CALL_EXCEPTION") || data !== undefined) {
    const decoded = data && data !== "0x" ? safeParse(data) : undefined;
    if (!decoded) {
      const reason = isError(error, "CALL_EXCEPTION") && error.reason ? error.reason : "reverted without a reason";
      return new TradeRevertedError(reason);
    }
    const args = decoded.args;
    const d = context.stableDecimals;
    switch (decoded.name) {
      case "SwapInsufficientReserves":
        return new InsufficientFundsError(
          `the swap's reserves hold ${d === undefined ? args[1] : formatUnits(args[1], d)} of the stable coin, ` +
            `the trade needs ${d === undefined ? args[2] : formatUnits(args[2], d)}`,
        );
      case "ERC20InsufficientBalance":
        return new InsufficientFundsError(
          `userAddress: balance ${args[1]} is below the ${args[2]} needed (base units)`,
        );
      case "ERC20InsufficientAllowance":
        return new InsufficientFundsError(
          `userAddress: allowance ${args[1]} is below the ${args[2]} needed (base units)`,
        );
      case "SwapInvalidPrice":
        return new PriceUnavailableError(`the token/USD feed answered ${args[0]}`);
      case "SwapStalePrice":
        return new PriceUnavailableError(`the token/USD feed was last updated at ${args[0]}, older than ${args[1]} s`);
      case "SwapUnsupportedStable":
        return new InvalidArgumentError("usdAddress", `${args[0]} is not allowed by the swap`);
      case "SwapZeroOutput":
        return new InvalidArgumentError("amount", "is worth less than one base unit of what it buys");
      case "SwapInvalidDestinatary":
        return new InvalidArgumentError("destinatary", "must not be the zero address");
      case "SwapZeroAmount":
        return new InvalidArgumentError("amount", "must be greater than 0");
      case "EnforcedPause":
        return new TradeRevertedError("trading is paused");
      default:
        return new TradeRevertedError(`${decoded.name}(${args.map(String).join(", ")})`);
    }
  }
  return error;
}

/** The name of the swap's custom error a call reverted with, if that is what it did. */
export function revertName(error: unknown): string | undefined {
  const data = revertData(error);
  return data && data !== "0x" ? safeParse(data)?.name : undefined;
}

function safeParse(data: string) {
  try {
    return swapInterface.parseError(data) ?? undefined;
  } catch {
    return undefined;
  }
}

/** The node refused the nonce: someone else used it, or the node forgot pending transactions. */
export function isNonceConflict(error: unknown): boolean {
  if (isError(error, "NONCE_EXPIRED") || isError(error, "REPLACEMENT_UNDERPRICED")) return true;
  return /nonce too (low|high)|nonce has already been used|replacement transaction underpriced|OldNonce|NonceGap/i.test(
    messageOf(error),
  );
}

/**
 * The node holds another transaction at this nonce, and this one does not pay enough more to
 * replace it (geth's txpool rule: 10 % more of each fee). For a first broadcast, when the service
 * signed nothing else at that nonce, someone else's transaction holds it.
 */
export function isReplacementUnderpriced(error: unknown): boolean {
  if (isError(error, "REPLACEMENT_UNDERPRICED")) return true;
  return /replacement (transaction )?underpriced|replacement fee too low|ReplacementUnderpriced/i.test(
    messageOf(error),
  );
}

/** The node already holds this very transaction: sending it again is a success. */
export function isAlreadyKnown(error: unknown): boolean {
  return /already known|known transaction|already imported|transaction already exists|AlreadyKnown/i.test(
    messageOf(error),
  );
}

/**
 * The node answered about this transaction itself (refused it): nothing of it is in its pool.
 * Not so for a request that failed or an answer that never came: the node may hold it.
 */
export function isDefiniteRefusal(error: unknown): boolean {
  return !isChainUnreachable(error) && !isError(error, "BAD_DATA") && !isError(error, "UNSUPPORTED_OPERATION");
}

/** The node refused a transaction for its fees: below the base fee, or too little to replace another. */
export function isUnderpriced(error: unknown): boolean {
  if (isError(error, "REPLACEMENT_UNDERPRICED")) return true;
  return /underpriced|fee cap|less than (the )?block base fee|max fee per gas less than|fee too low|feecap/i.test(
    messageOf(error),
  );
}

/**
 * A refusal that says the transaction itself can never be taken as it is, whoever asks: the
 * wallet cannot pay for it, its gas is wrong for any block, its signature or chain is wrong,
 * or it costs more than the node's fee cap. Only such a refusal, of a transaction that every
 * endpoint says it does not know, fails a trade at once; any other answer (a gateway's text,
 * "txpool is full", "request timed out") may hide a send, and leaves it to the monitor.
 */
export function isPlainRefusal(error: unknown): boolean {
  if (isError(error, "INSUFFICIENT_FUNDS")) return true;
  return /insufficient funds|intrinsic gas too low|exceeds block gas limit|gas limit reached|invalid sender|invalid signature|invalid chain ?id|chain ?id mismatch|exceeds the configured cap|oversized data|gas uint64 overflow/i.test(
    messageOf(error),
  );
}

/** The node's own words for a refused call (the innermost message ethers carries), a line at most. */
export function nodeMessage(error: unknown): string {
  let current: unknown = error;
  let message = "";
  for (let depth = 0; current && depth < 4; depth += 1) {
    const text = (current as { message?: unknown }).message;
    if (typeof text === "string") message = text;
    current = (current as { error?: unknown }).error ?? (current as { info?: { error?: unknown } }).info?.error;
  }
  return message.split("\n")[0]!.slice(0, 160);
}

/** The messages of an error and of the errors it wraps (ethers nests the node's). */
function messageOf(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 4; depth += 1) {
    const message = (current as { message?: unknown }).message;
    if (typeof message === "string") parts.push(message);
    current = (current as { error?: unknown }).error ?? (current as { info?: { error?: unknown } }).info?.error;
  }
  return parts.join(" | ");
}
