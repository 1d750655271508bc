/**
 * The swap's allowance from an exchange wallet, set when a trade finds it short (allowances.ts):
 * an approval sent through the wallet's send queue like any transaction, and waited for until it
 * is mined.
 *
 * A token that refuses to change a non-zero allowance to another (USDT) is first set to zero, in
 * an approval queued in the same step as the new one, so that the two take consecutive nonces: no
 * trade is ever signed between them, where it would find the allowance zero and revert. Other
 * tokens get the new value in one approval, never a reset: a trade proven on the old allowance and
 * signed after it finds at least what it was proven with.
 */
import { Interface, type JsonRpcApiProvider } from "ethers";

import {
  ChainUnavailableError,
  TradePendingError,
  TradeRevertedError,
  type SignedTradeTx,
} from "../../../core/index.js";
import type { Outcome } from "../blocks/index.js";
import type { SendQueue, Sent } from "../send/index.js";
import { ERC20_ABI } from "../tx/index.js";

const erc20Interface = new Interface(ERC20_ABI);

/**
 * The gas limit of an approval that writes a zero allowance slot (after a USDT-style reset): a
 * fresh slot's write (20,000), the call and its log, with room for a token's own checks. Only
 * what is used is paid.
 */
const APPROVE_FROM_ZERO_GAS = 100_000n;

export interface ApprovalContext {
  provider: JsonRpcApiProvider;
  /** The spender. */
  swap: string;
  /** The owner's send queue. */
  queue: SendQueue;
  /** Records an approval's slot in the ledger before it is broadcast. */
  record: (tx: SignedTradeTx) => Promise<void>;
  /** What was mined at a sent transaction's nonce (receipts.ts), or TradePendingError. */
  mined: (sent: Sent) => Promise<Outcome>;
}

/**
 * Sets the swap's allowance of `asset` from `owner` to `value` and waits until it is mined;
 * with `reset`, to zero first, in the transaction just before.
 * @throws ChainUnavailableError while it is not mined yet; TradeRevertedError when it reverted
 */
export async function approveSwap(
  context: ApprovalContext,
  { owner, asset, value, reset }: { owner: string; asset: string; value: bigint; reset: boolean },
): Promise<void> {
  const approval = (amount: bigint) => erc20Interface.encodeFunctionData("approve", [context.swap, amount]);
  const estimate = async (data: string) =>
    BigInt((await context.provider.send("eth_estimateGas", [{ from: owner, to: asset, data }, "latest"])) as string);
  // After a reset the new approval writes a zero slot, which the node cannot estimate before the
  // reset is mined (it would revert now): a limit that covers a fresh slot's write.
  const gasLimits = reset
    ? [(await estimate(approval(0n))) * 2n, APPROVE_FROM_ZERO_GAS]
    : [((await estimate(approval(value))) * 12n) / 10n];
  const amounts = reset ? [0n, value] : [value];
  // Queued in one step: consecutive in the queue, so consecutive nonces.
  const sends = amounts.map((amount, i) =>
    context.queue.send({
      to: asset,
      data: approval(amount),
      gasLimit: gasLimits[i]!,
      deadline: null,
      onSigned: context.record,
    }),
  );
  for (const sent of await Promise.all(sends)) {
    let outcome: Outcome;
    try {
      outcome = await context.mined(sent);
    } catch (error) {
      if (error instanceof TradePendingError)
        throw new ChainUnavailableError(`the allowance update ${sent.hash} is not mined yet; retry later`);
      throw error;
    }
    if (BigInt(outcome.receipt.status) !== 1n || outcome.noop)
      throw new TradeRevertedError(`allowance update ${sent.hash} reverted`);
  }
}
