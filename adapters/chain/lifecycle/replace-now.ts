/**
 * A cancel or a speed-up asked of a trade (core/use-cases/trade-cancel.use-case.ts), done by its
 * wallet's monitor in turn with its looks (monitor.ts): a new transaction at the trade's own nonce,
 * signed, recorded in the ledger, then broadcast (replace.ts). Never at another nonce, never while
 * the trade's send is still on its way (the sender's alone), and never once the wallet's nonce
 * count says the nonce is used: what took it is then the monitor's to find out and record.
 */
import {
  type Broadcast,
  ChainUnavailableError,
  InvalidArgumentError,
  minTimeLeftMs,
  type NonceSlot,
  type Replacement,
  type ReplacementAudit,
} from "../../../core/index.js";
import { bumped, type ChainState, type Fees, gwei, marketFees, replacementFees } from "../blocks/index.js";
import { cancelFees, replace, type ReplaceContext } from "./replace.js";

/** A trade's nonce, as a cancel or a speed-up names it (core's ReplaceTarget). */
export interface ReplaceTarget {
  tradeId: string;
  nonce: number;
}

/** Why nothing was sent: the ledger refused a replacement of a slot that changed since it was read (replace.ts). */
const CHANGED = "its nonce's transactions changed while the replacement was signed; nothing was sent";

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const min = (a: bigint, b: bigint) => (a < b ? a : b);

/**
 * Replaces the trade's pending transaction with a no-op (a cancel, recorded on the trade before
 * this is asked) at cancelFees, never above the cap. Nothing is signed while its send is on its
 * way, when the nonce is used already, when a no-op is pending there already, when the cap leaves
 * no room, or when the node cannot be asked: the monitor's looks send the cancel's no-op as soon as
 * they may (monitor.ts #advance).
 */
export async function cancelNow(context: ReplaceContext, target: ReplaceTarget): Promise<Replacement> {
  const open = await replaceable(context, target);
  if ("state" in open) return open;
  const { slot, last } = open;
  if (last.noop) return { state: "deferred", reason: "a no-op is pending at its nonce already" };
  const chain = await chainAt(context, slot).catch(() => undefined);
  if (chain === undefined)
    return { state: "deferred", reason: "the node did not answer; the monitor sends the no-op at its next look" };
  if (chain.taken) return { state: "taken" };
  const cap = context.opts.settings.feeCap;
  const fees = cancelFees(last, marketFees(chain.state), cap);
  if (fees === null)
    return {
      state: "deferred",
      reason: `the fee cap (${gwei(cap)} gwei) leaves no room for the 10 % more a replacement of ${gwei(last.maxFeePerGas)} gwei needs; the monitor sends the no-op once it can`,
    };
  const hash = await replace(context, slot, last, fees, true, "cancel: replaced a transaction with a no-op");
  if (hash === null) return { state: "deferred", reason: CHANGED };
  return { state: "replaced", hash, ...fees };
}

/**
 * Re-prices the trade's pending transaction: replacementFees, or `maxFeePerGas`, checked against
 * the cap and against the least a replacement needs before anything is read from the chain or
 * signed (a refusal signs nothing).
 * @throws InvalidArgumentError naming maxFeePerGasGwei, and the cap or the least it needs
 */
export async function speedUpNow(
  context: ReplaceContext,
  target: ReplaceTarget,
  maxFeePerGas?: bigint,
  audit?: ReplacementAudit,
): Promise<Replacement> {
  const cap = context.opts.settings.feeCap;
  if (maxFeePerGas !== undefined && maxFeePerGas > cap)
    throw new InvalidArgumentError(
      "maxFeePerGasGwei",
      `must be at most ${gwei(cap)} gwei, this service's fee cap (MAX_FEE_PER_GAS_GWEI)`,
    );
  const open = await replaceable(context, target);
  if ("state" in open) return open.state === "deferred" ? { state: "unchanged", reason: open.reason } : open;
  const { slot, last } = open;
  const least = bumped(last);
  if (maxFeePerGas !== undefined && maxFeePerGas < least.maxFeePerGas)
    throw new InvalidArgumentError(
      "maxFeePerGasGwei",
      `must be at least ${gwei(least.maxFeePerGas)} gwei: a replacement needs 10 % more than the pending transaction's ${gwei(last.maxFeePerGas)} gwei`,
    );
  if (last.noop) return { state: "unchanged", reason: "a no-op is freeing its nonce" };
  // Read in its turn: a cancel asked since the request read the trade wins (its no-op is next).
  if ((await context.opts.journal.get(target.tradeId))?.cancel != null)
    return { state: "unchanged", reason: "a cancel was asked of it" };
  const chain = await chainAt(context, slot).catch((error: unknown) => {
    context.opts.log.warn(
      { tradeId: target.tradeId, wallet: context.wallet, err: error },
      "speed-up: the node did not answer",
    );
    throw new ChainUnavailableError("the node did not answer: nothing was signed; ask again");
  });
  if (chain.taken) return { state: "taken" };
  // Its call reverts once mined after its deadline (by the later of the chain's clock and this
  // machine's, as the monitor judges it): a replacement needs time left to be mined before it.
  const now = Math.max(chain.state.head.timestamp, Math.floor(Date.now() / 1000));
  if (slot.deadline !== null && (slot.deadline - now) * 1000 < minTimeLeftMs(context.opts.blockTimeMs?.()))
    return {
      state: "unchanged",
      reason: `its deadline (${new Date(slot.deadline * 1000).toISOString()}) is too near for a replacement to be mined before it; at the deadline the monitor frees its nonce with a no-op`,
    };
  const market = marketFees(chain.state);
  const fees =
    maxFeePerGas === undefined
      ? replacementFees(last, market, cap)
      : {
          maxFeePerGas,
          maxPriorityFeePerGas: min(max(market.maxPriorityFeePerGas, least.maxPriorityFeePerGas), maxFeePerGas),
        };
  if (fees === null)
    return {
      state: "unchanged",
      reason: `the fee cap (${gwei(cap)} gwei) leaves no room for the 10 % more a replacement of ${gwei(last.maxFeePerGas)} gwei needs`,
    };
  const hash = await replace(
    context,
    slot,
    last,
    fees,
    false,
    "speed-up: replaced a transaction with higher fees",
    audit,
  );
  if (hash === null) return { state: "unchanged", reason: CHANGED };
  return { state: "replaced", hash, ...fees };
}

/** The trade's open slot and its last broadcast, or why nothing may be replaced there now. */
async function replaceable(
  context: ReplaceContext,
  target: ReplaceTarget,
): Promise<{ slot: NonceSlot; last: Broadcast } | Extract<Replacement, { state: "deferred" | "taken" }>> {
  const slot = await context.opts.journal.slot(context.wallet, target.nonce);
  // Only ever the trade's own nonce: a slot that is not the trade's is never touched.
  if (slot === undefined || slot.tradeId !== target.tradeId)
    return { state: "deferred", reason: "the trade has no open slot at its nonce" };
  if (slot.state !== "pending") return { state: "taken" };
  // A send still on its way is the sender's alone: the monitor's look replaces it once answered.
  // (Another instance's send on its way may be replaced: it is the same call at the same nonce,
  // and if the node refuses that send, its slot is kept, with two broadcasts, and seen through. A
  // slot released and used again since it was read here is the ledger's to refuse: replace.ts.)
  if (context.opts.sends?.sentAt(slot.nonce) === null)
    return { state: "deferred", reason: "its transaction is still being sent; the monitor replaces it once it is" };
  return { slot, last: slot.broadcasts.at(-1)! };
}

/** The chain's fees now, and whether the wallet's nonce count says the slot's nonce is used already. */
async function chainAt(context: ReplaceContext, slot: NonceSlot): Promise<{ state: ChainState; taken: boolean }> {
  const [state, latestNonce] = await Promise.all([
    context.opts.fees.read(),
    context.opts.provider.getTransactionCount(context.wallet, "latest"),
  ]);
  return { state, taken: slot.nonce < latestNonce };
}

/**
 * A trade's cancel asked with no no-op at its nonce yet (asked while its send was on its way, by
 * another instance, or just before a restart): the cancel's no-op, within the cap. A look's step
 * (monitor.ts #advance) for a pending nonce that is due; true when it sent one.
 */
export async function cancelPending(
  context: ReplaceContext,
  slot: NonceSlot,
  last: Broadcast,
  market: Fees,
): Promise<boolean> {
  if (last.noop || slot.tradeId === null) return false;
  if ((await context.opts.journal.get(slot.tradeId))?.cancel == null) return false;
  const fees = cancelFees(last, market, context.opts.settings.feeCap);
  if (fees === null) return false; // the deadline's no-op frees the nonce, and its trade is cancelled then
  return (await replace(context, slot, last, fees, true, "cancel: replaced a transaction with a no-op")) !== null;
}

/** One step at a time: each runs once every step asked before it has finished. */
export class Turns {
  #last: Promise<void> = Promise.resolve();

  run<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#last.then(step);
    this.#last = run.then(
      () => {},
      () => {},
    );
    return run;
  }
}
