/**
 * The swap's allowance from an exchange wallet, set when a trade finds it short (allowances.ts):
 * an approval sent through the wallet's send queue like any transaction, and waited for until it
 * is mined.
 *
 * A token that refuses to change a non-zero allowance to another (USDT) is first set to zero, and
 * waited for, then to the new value: allowances.ts has every trade proven on the old allowance
 * signed before the reset, and holds the trades arriving meanwhile until the new value is mined,
 * so none is signed between the two, where it would find the allowance zero and revert. Other
 * tokens get the new value in one approval, never a reset: a trade proven on the old allowance
 * and signed after it finds at least what it was proven with.
 *
 * An approval whose receipt did not come in time is remembered: the next top-up of the same
 * allowance first looks it up, and waits (refuses its trade, retryable) while it is unmined, so
 * that a second approval never lands on top of one the token would refuse to change.
 */
import { Interface, type JsonRpcApiProvider } from "ethers";

import {
  ChainUnavailableError,
  TradePendingError,
  TradeRevertedError,
  type SignedTradeTx,
} from "../../../core/index.js";
import type { Fees, Outcome } from "../blocks/index.js";
import type { SendQueue, Sent } from "../send/index.js";
import { ERC20_ABI } from "../tx/index.js";

const erc20Interface = new Interface(ERC20_ABI);

export interface ApprovalsOptions {
  provider: JsonRpcApiProvider;
  /** The spender. */
  swap: string;
  /** An owner's send queue. */
  queueOf: (owner: string) => SendQueue;
  /** Records an approval's slot in the ledger before it is broadcast. */
  record: (tx: SignedTradeTx) => Promise<void>;
  /** What was mined at `owner`'s sent transaction's nonce (receipts.ts), or TradePendingError. */
  mined: (owner: string, sent: Sent) => Promise<Outcome>;
  /** The fees an approval is signed with, checked against the cap (fees.ts: tradeFees). */
  fees: () => Promise<Fees>;
}

/** What one top-up needs: its owner's queue, and the approvals of its allowance sent and not seen mined. */
interface ApprovalContext extends ApprovalsOptions {
  queue: SendQueue;
  owner: string;
  unmined: Sent[];
}

/** The swap's allowances from the exchange wallets, each set when a trade finds it short. */
export class Approvals {
  readonly #opts: ApprovalsOptions;
  /** Approvals sent and not seen mined, by lower-case "owner:asset". */
  readonly #unmined = new Map<string, Sent[]>();

  constructor(options: ApprovalsOptions) {
    this.#opts = options;
  }

  /**
   * Sets the swap's allowance of `asset` from `owner` to `value` and waits until it is mined;
   * with `reset`, to zero first, mined before the new value is sent.
   * @throws ChainUnavailableError while it (or an earlier one) is not mined yet; TradeRevertedError when it reverted
   */
  async approve(owner: string, asset: string, value: bigint, reset: boolean): Promise<void> {
    const key = `${owner}:${asset}`.toLowerCase();
    let unmined = this.#unmined.get(key);
    if (unmined === undefined) {
      unmined = [];
      this.#unmined.set(key, unmined);
    }
    const context: ApprovalContext = { ...this.#opts, queue: this.#opts.queueOf(owner), owner, unmined };
    await earlierMined(context);
    const approval = (amount: bigint) => erc20Interface.encodeFunctionData("approve", [context.swap, amount]);
    const estimate = async (data: string) =>
      BigInt((await context.provider.send("eth_estimateGas", [{ from: owner, to: asset, data }, "latest"])) as string);
    const send = async (amount: bigint) => {
      const data = approval(amount);
      const gasLimit = ((await estimate(data)) * 12n) / 10n;
      const fees = await context.fees();
      const sent = await context.queue.send({
        to: asset,
        data,
        gasLimit,
        fees,
        deadline: null,
        onSigned: context.record,
      });
      unmined.push(sent);
      await minedOk(context, sent);
    };
    // The allowance is zero once the reset is mined: the new value is estimated as it will run.
    if (reset) await send(0n);
    await send(value);
  }
}

/** An approval's receipt: it must be mined, and have succeeded; it is then no longer unmined. */
async function minedOk(context: ApprovalContext, sent: Sent): Promise<void> {
  let outcome: Outcome;
  try {
    outcome = await context.mined(context.owner, sent);
  } catch (error) {
    if (error instanceof TradePendingError)
      throw new ChainUnavailableError(`the allowance update ${sent.hash} is not mined yet; retry later`);
    throw error;
  }
  context.unmined.splice(context.unmined.indexOf(sent), 1);
  if (BigInt(outcome.receipt.status) !== 1n || outcome.noop)
    throw new TradeRevertedError(`allowance update ${sent.hash} reverted`);
}

/** The approvals an earlier top-up sent and did not see mined: looked up once each; one still unmined refuses the trade for now. */
async function earlierMined(context: ApprovalContext): Promise<void> {
  for (const sent of [...context.unmined]) {
    const receipt = await context.provider.send("eth_getTransactionReceipt", [sent.hash]);
    if (receipt === null)
      throw new ChainUnavailableError(`the allowance update ${sent.hash} is not mined yet; retry later`);
    context.unmined.splice(context.unmined.indexOf(sent), 1);
  }
}
