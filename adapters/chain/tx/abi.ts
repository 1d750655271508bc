/**
 * The parts of the contract suite's ABI that the service calls, picked by name from the JSON
 * ABIs that scripts/generate-abi.ts writes into gen/abi/ from the compiled artifacts (committed,
 * so production mode needs no build artefacts; scripts/check-generated.sh fails when they drift
 * from the contracts). A name the contracts no longer have fails here, when the module loads.
 */
import { aggregatorV3InterfaceAbi, tokenSwapAbi, tradedTokenAbi } from "../../../gen/abi/index.js";

interface AbiItem {
  readonly type: string;
  readonly name?: string;
}

/** The items of `abi` named in `names` (every overload of a name), in the ABI's order; throws if a name is missing. */
export function pickAbi<const A extends readonly AbiItem[], const N extends readonly string[]>(
  abi: A,
  names: N,
): readonly Extract<A[number], { readonly name: N[number] }>[] {
  const wanted = new Set<string>(names);
  const picked = abi.filter((item) => item.name !== undefined && wanted.has(item.name));
  const missing = names.filter((name) => !picked.some((item) => item.name === name));
  if (missing.length > 0) throw new Error(`not in the ABI: ${missing.join(", ")}`);
  return picked as Extract<A[number], { readonly name: N[number] }>[];
}

/** The swap's trades, quotes and state, and every error a trade can revert with. */
export const SWAP_ABI = [
  ...pickAbi(tokenSwapAbi, [
    "sell",
    "buy",
    "buyAndRemit",
    "quoteSell",
    "quoteBuy",
    "currentPrice",
    "maxPriceAge",
    "priceFeed",
    "isStableAllowed",
    "token",
    "paused",
    "SwapUnsupportedStable",
    "SwapUnsupportedDecimals",
    "SwapInvalidPrice",
    "SwapStalePrice",
    "SwapInsufficientReserves",
    "SwapZeroAmount",
    "SwapZeroOutput",
    "SwapInvalidDestinatary",
    "SwapDeadlineExpired",
    "SwapSlippage",
    "EnforcedPause",
    "ReentrancyGuardReentrantCall",
    "SafeERC20FailedOperation",
  ]),
  // Errors of the OpenZeppelin ERC-20s the swap moves; they bubble up through SafeERC20.
  ...pickAbi(tradedTokenAbi, ["ERC20InsufficientBalance", "ERC20InsufficientAllowance"]),
] as const;

/** What the service reads and sends to any ERC-20 (the token and the stable coins): OpenZeppelin's ERC-20, as the token compiles it. */
export const ERC20_ABI = pickAbi(tradedTokenAbi, ["symbol", "decimals", "balanceOf", "allowance", "approve"]);

/** What the service reads from a Chainlink feed. */
export const AGGREGATOR_ABI = pickAbi(aggregatorV3InterfaceAbi, ["decimals", "latestRoundData"]);
