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
} from "../../core/index.js";
import { SWAP_ABI } from "./abi.js";

const swapInterface = new Interface(SWAP_ABI);

/** Transport-level failures: the node did not answer, or answered garbage. */
const UNREACHABLE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "ETIMEDOUT", "EHOSTUNREACH", "EPIPE", "UND_ERR_SOCKET"]);

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
    current = (current as { error?: unknown }).error ?? (current as { info?: { error?: unknown } }).info?.error ?? (current as { cause?: unknown }).cause;
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
        return new InsufficientFundsError(`userAddress: balance ${args[1]} is below the ${args[2]} needed (base units)`);
      case "ERC20InsufficientAllowance":
        return new InsufficientFundsError(`userAddress: allowance ${args[1]} is below the ${args[2]} needed (base units)`);
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

function safeParse(data: string) {
  try {
    return swapInterface.parseError(data) ?? undefined;
  } catch {
    return undefined;
  }
}
