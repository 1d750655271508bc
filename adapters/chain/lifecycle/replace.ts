/**
 * A new transaction at a nonce nothing is mined at yet, in place of its last broadcast: the same
 * call re-priced (replacementFees: the market's, or the last + 10 % + 1 wei, up to the cap), or a
 * no-op (noopFees). Signed, recorded in the ledger, then broadcast.
 */
import { Transaction } from "ethers";

import type { Broadcast, NonceSlot, ReplacementAudit } from "../../../core/index.js";
import { gwei, noopFees, replacementFees, type Fees } from "../blocks/index.js";
import { isAlreadyKnown } from "../rpc/index.js";
import { FILLER_GAS as NOOP_GAS } from "../send/index.js";
import { signEip1559With } from "../tx/index.js";
import type { MonitorContext } from "./options.js";

/** What a re-pricing needs of the monitor: also the replacements the cap stopped, logged once each (`${nonce}:${broadcasts}`). */
export interface ReplaceContext extends MonitorContext {
  readonly capped: Set<string>;
}

/**
 * Replaces the slot's last broadcast with higher fees, unless the fee cap leaves no room for a
 * higher bid (logged once). A no-op may outbid the cap only once its trade's deadline passed (`now`,
 * unix seconds), to free the nonce: before it, it is a cancel's, and stays within the cap
 * (cancelFees); a no-op of a slot without a deadline (a gap's filler) frees a nonce, as noopFees.
 */
export async function reprice(
  context: ReplaceContext,
  slot: NonceSlot,
  last: Broadcast,
  market: Fees,
  message: string,
  now: number,
): Promise<void> {
  const cap = context.opts.settings.feeCap;
  const fees = !last.noop
    ? replacementFees(last, market, cap)
    : slot.deadline !== null && now < slot.deadline
      ? cancelFees(last, market, cap)
      : noopFees(last, market, cap);
  if (fees === null) {
    const key = `${slot.nonce}:${slot.broadcasts.length}`;
    if (!context.capped.has(key)) {
      context.capped.add(key);
      context.opts.log.warn(
        {
          tradeId: slot.tradeId,
          wallet: context.wallet,
          nonce: slot.nonce,
          hash: last.hash,
          maxFeePerGasGwei: gwei(last.maxFeePerGas),
          capGwei: gwei(cap),
        },
        "not replacing a transaction: the fee cap leaves no room for a higher bid; it waits for fees to fall",
      );
    }
    return;
  }
  await replace(context, slot, last, fees, last.noop, message);
}

/**
 * Fees for the no-op of a cancel (trade-cancel.use-case.ts) in place of `last`: as noopFees (the
 * market's, and never less than bumped(last), so that nodes take it in its place), but never above
 * the cap; null when the cap leaves no room for it. (The monitor re-prices it later as its own
 * no-ops, reprice: after the trade's deadline, a no-op may outbid the cap.)
 */
export function cancelFees(last: Fees, market: Fees, cap: bigint): Fees | null {
  const fees = noopFees(last, market, cap);
  return fees.maxFeePerGas > cap ? null : fees;
}

/**
 * Signs, records, then broadcasts a new transaction at the slot's nonce: the same call re-priced,
 * or a no-op. Returns its hash: recorded, whether or not a node took it (a later look re-sends or
 * re-prices it); or null when the ledger refused it because the slot is no longer as it was read
 * (released and used by another trade, replaced or mined meanwhile): nothing is broadcast then.
 * `audit` gives the record of an operator's replacement, appended in the ledger's write.
 */
export async function replace(
  context: MonitorContext,
  slot: NonceSlot,
  last: Broadcast,
  fees: Fees,
  noop: boolean,
  message: string,
  audit?: ReplacementAudit,
): Promise<string | null> {
  const { signer, chainId, journal, provider, log } = context.opts;
  const call = noop ? { to: context.wallet, data: "0x", gasLimit: NOOP_GAS, value: 0n } : decodeCall(last.rawTx);
  const { rawTx, txHash } = await signEip1559With(signer, { ...call, ...fees, chainId, nonce: slot.nonce });
  const broadcast = { hash: txHash, rawTx, ...fees, noop, sentAt: new Date() };
  const entry = audit?.({ state: "replaced", hash: txHash, ...fees });
  if (!(await journal.recordBroadcast(context.wallet, slot.nonce, broadcast, last.hash, entry))) {
    log.info(
      { tradeId: slot.tradeId, wallet: context.wallet, nonce: slot.nonce, previousHash: last.hash },
      `${message}: not sent, its nonce's slot changed since it was read`,
    );
    return null;
  }
  const details = {
    tradeId: slot.tradeId,
    wallet: context.wallet,
    nonce: slot.nonce,
    previousHash: last.hash,
    hash: txHash,
    maxFeePerGasGwei: gwei(fees.maxFeePerGas),
    maxPriorityFeePerGasGwei: gwei(fees.maxPriorityFeePerGas),
  };
  try {
    await provider.send("eth_sendRawTransaction", [rawTx]);
    log.warn(details, message);
  } catch (error) {
    if (isAlreadyKnown(error)) return txHash;
    // Recorded, so it is re-sent or re-priced at a later look.
    log.warn({ ...details, err: error }, `${message}: the node refused it for now`);
  }
  return txHash;
}

/** The call a signed transaction makes, to sign it again with other fees. */
function decodeCall(rawTx: string): { to: string; data: string; gasLimit: bigint; value: bigint } {
  const tx = Transaction.from(rawTx);
  if (tx.to === null) throw new TypeError("a recorded transaction has no recipient");
  return { to: tx.to, data: tx.data, gasLimit: tx.gasLimit, value: tx.value };
}
