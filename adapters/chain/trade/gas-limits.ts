/**
 * Each trade's gas limit: the most gas the committed snapshot (gas-snapshot.json, `npm run gas`)
 * measured for that kind of trade, with any coin, to a fresh destinatary, times a stated margin.
 *
 * Margin: × 3/2.
 * - × 5/4 for refunds: a receipt's gasUsed is net of refunds, and EIP-3529 caps the refund at a
 *   fifth of the gas spent, so a trade spends at most 5/4 of its gasUsed before refunds, all of
 *   which the limit must allow (a sell spends 19,900 more than it pays: the swap's token balance
 *   set and cleared again).
 * - the rest (× 6/5) for EIP-150's 63/64 held back at each call, and for coins whose transfers
 *   cost more than the mocks' (mainnet USDT reads its fee and blacklist settings).
 * A limit only bounds what a trade may spend: the operator pays gasUsed.
 *
 * No trade is signed on this figure alone: the preflight (preflight.ts) runs the trade as an
 * eth_call with exactly this limit against the latest block, and when that fails it estimates
 * and uses the larger figure. test/scripts/gas.test.ts fails when the snapshot outgrows a figure.
 */
import type { TradeKind } from "../../../core/index.js";

/**
 * The snapshot's highest gasUsed per kind of trade (fresh destinatary, any of DAI, USDT and
 * USDC), rounded up to a thousand.
 */
export const SNAPSHOT_GAS_USED = {
  sell: 107_000n,
  buy: 100_000n,
  remittance: 100_000n,
} as const satisfies Record<TradeKind, bigint>;

/** The margin over the snapshot, as a fraction: see above. */
export const GAS_LIMIT_MARGIN = { numerator: 3n, denominator: 2n } as const;

/** The gas limit a trade of `kind` is first proven with. */
export function tradeGasLimit(kind: TradeKind): bigint {
  return (SNAPSHOT_GAS_USED[kind] * GAS_LIMIT_MARGIN.numerator) / GAS_LIMIT_MARGIN.denominator;
}
