/**
 * TradePort on the chain: each step a trade use case asks for (core/ports/trade.port.ts), on the
 * parts the chain adapter's assembly built (../assembly.ts).
 *
 * 1. prove: the fees and the cap (fees.ts: none while the base fee is above it), the feed policy
 *    (feed-policy.ts), and the swap call proven on the latest block with the gas limit it will be
 *    signed with (preflight.ts), with a deadline (now + the trade's lifetime, no later than its
 *    quote's expiry and never less than two blocks away) and a minimum output (the proof's less the
 *    slippage, or the quote's). The balance reads of `reserve` start alongside, so the proof and
 *    the reads go out in one eth_call (call-batcher.ts). A proof newer than the fees' head is
 *    checked against its own block's fees.
 * 2. reserve: what it spends from its wallet and, for a sell, its payout from the swap's reserves
 *    (allowances.ts), on top of what the trades not yet final hold; an allowance that falls short
 *    is topped up first (topUp: approvals.ts), and the trade proven again after it.
 * 3. sign: the wallet's send queue (send-queue.ts) signs it at the next nonce and waits, before
 *    broadcasting, until the caller journalled it (signing.ts).
 * 4. send: the queue broadcasts it; signed again past someone else's transaction at its nonce,
 *    it comes back to be journalled again.
 * 5. settle: the receipt of whatever is mined at that nonce with the required confirmations
 *    (receipts.ts): the transaction, a replacement, or the no-op of an expired trade. The
 *    wallet's lifecycle monitor re-sends, re-prices and replaces in the background.
 * 6. release: once the queue answered, what it reserved is held by its journalled slot.
 */
import { Interface } from "ethers";

import {
  ChainUnavailableError,
  QuoteSlippageError,
  TradeExpiredError,
  TradeRevertedError,
  UnknownWalletError,
  minTimeLeftMs,
  tradeWithoutJournal,
  type ProvenTrade,
  type Reservation,
  type ReservedTrade,
  type SentTrade,
  type SignedTrade,
  type SignedTradeTx,
  type SignOptions,
  type TradeKind,
  type TradeOnChain,
  type TradeOrder,
  type TradePort,
  type TradeResolution,
  type TransactionReceipt,
} from "../../../core/index.js";
import { toWeb3Receipt, tradeFees, type ChainState, type Fees } from "../blocks/index.js";
import { revertName, toDomainError } from "../rpc/index.js";
import type { Sent } from "../send/index.js";
import { SWAP_ABI, staticCallEncoder } from "../tx/index.js";
import { reservesOf, type Asset, type Holding, type SharedRead } from "./allowances.js";
import type { TradeAdapterParts, TradingWallet } from "./options.js";
import { minimumOut, type Proof } from "./preflight.js";
import { quoteLeftMs } from "./quote-deadline.js";
import { Signing } from "./signing.js";
import { markMined, nonceLookup, recordSlotOf } from "./slots.js";

const swapInterface = new Interface(SWAP_ABI);
/** Calldata of each trade's TokenSwap call: (stable, amount, destinatary, minimum out, deadline). */
const SWAP_CALL = {
  sell: staticCallEncoder(swapInterface, "sell"),
  buy: staticCallEncoder(swapInterface, "buy"),
  remittance: staticCallEncoder(swapInterface, "buyAndRemit"),
} as const satisfies Record<TradeKind, unknown>;

/** A trade proven (step 1): everything the later steps need of it. */
interface Proven extends ProvenTrade {
  wallet: TradingWallet;
  /** What it spends from its wallet: the token for a sell, the stable coin for a buy or a remittance. */
  spent: Asset;
  /** The head the trade began at: every read of its is at it or later, and shared with its burst's. */
  head: number;
  /** The chain's state its fees were checked at (the proof's own block when that was newer). */
  state: ChainState;
  /** What it is signed with: the fees that passed the cap. */
  fees: Fees;
  proof: Proof;
  /** Unix seconds: the deadline in its calldata. */
  deadline: number;
  /** The native coin's USD price, kept with the trade for its gas in USD; null without one. */
  nativeUsd: bigint | null;
  /** The proof reverted for want of allowance: `reserve` tops it up, or proves again. */
  allowanceShort: boolean;
  /** The balance reads started with the proof, for `reserve` (one eth_call with it). */
  reads: { spend: SharedRead; payout: SharedRead | undefined };
}

/** A trade reserved (step 2). */
interface Reserved extends ReservedTrade {
  proven: Proven;
  /** What it holds in this process until released. */
  held: Array<{ holding: Holding; amount: bigint }>;
  /** The slots it was journalled at, left out of the journal's count until released. */
  slots: string[];
  /** What its slot holds back until it is final. */
  reserves: Reservation[];
  released: boolean;
}

/** A trade signed (step 3): its transaction, and where it meets the queue. */
interface Signed extends SignedTrade {
  reserved: Reserved;
  signing: Signing;
  /** The queue's answer for it: sent, or refused. */
  result: Promise<Sent>;
}

/** A trade sent (step 4). */
interface SentImpl extends SentTrade {
  sent: Sent;
  reserved: Reserved;
  /** Journalled by no record of the caller's: its slot is marked mined here once it is. */
  unjournalled: boolean;
}

export class ChainTradeAdapter implements TradePort {
  readonly #parts: TradeAdapterParts;
  /** Signings made without a journal of the caller's (SignOptions.unjournalled). */
  readonly #unjournalled = new WeakSet<Signing>();

  constructor(parts: TradeAdapterParts) {
    this.#parts = parts;
  }

  /** The chain's block time as measured lately, in ms (block-times.ts); undefined while unknown. */
  blockTimeMs(): number | undefined {
    return this.#parts.times.blockTimeMs();
  }

  /** A whole trade without a journal of the caller's (the core's steps, its slot recorded here): tests and tools. */
  sell(order: TradeOrder): Promise<TransactionReceipt> {
    return tradeWithoutJournal(this, { ...order, kind: "sell" });
  }

  buy(order: TradeOrder): Promise<TransactionReceipt> {
    return tradeWithoutJournal(this, { ...order, kind: "buy" });
  }

  remittance(order: TradeOrder): Promise<TransactionReceipt> {
    return tradeWithoutJournal(this, { ...order, kind: "remittance" });
  }

  async prove(order: TradeOrder): Promise<Proven> {
    const wallet = this.#parts.wallets.get(order.wallet.toLowerCase());
    if (!wallet) throw new UnknownWalletError(order.wallet);
    // A paused wallet signs nothing (the send queue asks again as it signs): refused before any read.
    const paused = this.#parts.paused?.(order.wallet);
    if (paused !== undefined) throw paused;
    const { fees, feeds, calls, allowances } = this.#parts;
    try {
      let state = await fees.read();
      tradeFees(state, this.#parts.settings.feeCap); // nothing is sent while the base fee is above the cap
      // Nothing is signed at a price the feed policy refuses (read once per block for every trade).
      const fed = feeds.forTrade(state.head, calls);
      fed.catch(() => {}); // awaited below, unless the proof fails first
      // The native coin's USD price, kept with the trade for its gas in USD (read once per block; never rejects).
      const nativeUsd = feeds.nativeUsdForTrade(state.head, calls);
      const head = state.head.number;
      const spent = this.#spent(order);
      // What `reserve` reads goes out with the proof: one eth_call (call-batcher.ts).
      const reads = {
        spend: allowances.prefetch(wallet.signer.address, spent, head),
        payout: order.kind === "sell" ? allowances.prefetchReserves(order.stable, head) : undefined,
      };
      const first = await this.#proof(order, wallet, state, true).catch(async (error: unknown) => {
        if (revertName(error) !== "SwapDeadlineExpired") throw error;
        // The chain's clock is ahead of the head last read: read it now, and prove once more.
        state = await fees.read(true);
        return this.#proof(order, wallet, state, true);
      });
      await fed;
      // The proof ran on a block newer than the head the fees came from (the block watcher's, up
      // to a second old): the cap is checked against that block's fees before anything is signed,
      // so a trade in the second after a fee spike is refused, not sent to wait above the cap.
      if (first.proof?.block !== undefined && first.proof.block > state.head.number)
        state = await fees.readFrom(first.proof.block);
      const proven = { order, wallet, spent, head, state, reads, nativeUsd: await nativeUsd, ...first };
      return { ...proven, fees: tradeFees(state, this.#parts.settings.feeCap) };
    } catch (error) {
      throw toDomainError(error, { stableDecimals: order.stable.decimals });
    }
  }

  async reserve(trade: ProvenTrade): Promise<Reserved> {
    let proven = trade as Proven;
    const { order, wallet } = proven;
    const owner = wallet.signer.address;
    const reserved: Reserved = { proven, held: [], slots: [], reserves: [], released: false };
    try {
      const { allowances } = this.#parts;
      let spend = await allowances.reserve(owner, proven.spent, order.amount, proven.head, proven.reads.spend);
      if ("short" in spend) {
        // The swap's allowance falls short: topped up (a step of its own), then reserved again.
        await this.#topUp(owner, proven.spent, { amount: order.amount, target: spend.short, head: proven.head });
        spend = await allowances.reserve(owner, proven.spent, order.amount, proven.head);
        if ("short" in spend)
          throw new ChainUnavailableError("the swap's allowance is being topped up by another trade; retry");
        reserved.held.push({ holding: spend.holding, amount: order.amount });
        proven = await this.#proveAgain(proven);
      } else {
        reserved.held.push({ holding: spend.holding, amount: order.amount });
        if (proven.allowanceShort) proven = await this.#proveAgain(proven); // another trade's top-up landed
      }
      // Under a quote, the price may have moved past its slippage since: refused before anything is signed.
      if (order.quote !== undefined && proven.proof.output < order.quote.minOut)
        throw new QuoteSlippageError(proven.proof.output, order.quote.minOut);
      // A sell pays out of the swap's reserves: booked like the wallet's balance, so the sells
      // accepted together never pay out more than the swap holds (none reverts for want of it).
      const payout = order.kind === "sell" ? await this.#reservePayout(proven, reserved) : undefined;
      reserved.reserves = reservesOf({ wallet: owner, spent: proven.spent, amount: order.amount }, payout);
      reserved.proven = proven;
      return reserved;
    } catch (error) {
      this.release(reserved);
      throw toDomainError(error, { stableDecimals: order.stable.decimals });
    }
  }

  async sign(trade: ReservedTrade, options: SignOptions = {}): Promise<Signed> {
    const reserved = trade as Reserved;
    const { proven } = reserved;
    const { order, wallet, proof } = proven;
    const enriched = (tx: SignedTradeTx): SignedTradeTx => ({
      ...tx,
      ...(proven.nativeUsd === null ? {} : { nativeUsd: proven.nativeUsd }),
      reserves: reserved.reserves,
    });
    const signing = new Signing({
      // Checked again as it is signed: a quote with too little left is refused there, unsent.
      beforeHandover: (tx) => {
        if (order.quote !== undefined) quoteLeftMs(order.quote, this.blockTimeMs());
        // Counted here until the queue answers, so the journal's count leaves its slot out.
        reserved.slots.push(this.#parts.allowances.journalled(tx.txHash));
        return enriched(tx);
      },
      ...(options.unjournalled ? { record: (tx) => recordSlotOf(this.#parts.journal, tx, "trade") } : {}),
    });
    if (options.unjournalled) this.#unjournalled.add(signing);
    // A quote's minOut is what it promised the caller; else the preflight's output less the slippage.
    const data = this.#calldata(
      proven,
      order.quote?.minOut ?? minimumOut(proof!.output, this.#parts.settings.slippageBps),
    );
    const result = wallet.queue.send({
      to: this.#parts.swap,
      data,
      gasLimit: proof!.gasLimit,
      fees: proven.fees,
      deadline: proven.deadline,
      onSigned: signing.onSigned,
      recheck: () => this.#stillGood({ from: wallet.signer.address, to: this.#parts.swap, data }, proven),
    });
    const mapped = result.catch((error: unknown) => {
      const domain = toDomainError(error, { stableDecimals: order.stable.decimals });
      signing.fail(domain);
      throw domain;
    });
    mapped.catch(() => {}); // heard by sign, send or abandon
    const tx = await signing.next();
    return { tx, reserved, signing, result: mapped };
  }

  async send(trade: SignedTrade): Promise<SentImpl | { again: Signed }> {
    const signed = trade as Signed;
    signed.signing.proceed(signed.tx.txHash);
    const again = signed.signing.next();
    again.catch(() => {}); // the queue answered first
    const outcome = await Promise.race([signed.result.then((sent) => ({ sent })), again.then((tx) => ({ tx }))]);
    if ("tx" in outcome) return { again: { ...signed, tx: outcome.tx } };
    const { sent } = outcome;
    return {
      tx: signed.tx.txHash === sent.hash ? signed.tx : { ...signed.tx, txHash: sent.hash, nonce: sent.nonce },
      submitted: sent.receipt === null && sent.known,
      sent,
      reserved: signed.reserved,
      unjournalled: this.#unjournalled.has(signed.signing),
    };
  }

  abandon(trade: SignedTrade, error: unknown): void {
    const signed = trade as Signed;
    signed.signing.refuse(signed.tx.txHash, error);
  }

  async settle(trade: SentTrade): Promise<TransactionReceipt> {
    const { sent, reserved, unjournalled } = trade as SentImpl;
    const { receipts, watcher, journal } = this.#parts;
    const owner = reserved.proven.wallet.signer.address;
    try {
      const outcome = await receipts.wait(sent.hash, sent.receipt, nonceLookup(journal, owner, sent.nonce, sent.hash));
      // A trade without a record of its own: its slot is marked mined at once, so that what it
      // held back stops counting once the chain shows it (allowances.ts); a journalled trade's
      // record does that (markConfirmed), and the monitor for what no call waited for.
      if (unjournalled) await markMined(journal, owner, sent.nonce, outcome);
      if (outcome.noop) throw new TradeExpiredError(reserved.proven.deadline, sent.nonce);
      const receipt = toWeb3Receipt(outcome.receipt);
      if (!receipt.status) throw new TradeRevertedError(`transaction ${receipt.transactionHash} reverted when mined`);
      return receipt;
    } finally {
      watcher.release([sent.hash]); // wait() did, unless it failed before
    }
  }

  release(trade: ReservedTrade): void {
    const reserved = trade as Reserved;
    if (reserved.released) return;
    reserved.released = true;
    this.#parts.allowances.release(reserved.held, reserved.slots);
  }

  /**
   * Looks a journalled trade's transactions up without sending anything: the one of them mined
   * in the canonical chain now, if any. One read never decides that another transaction took
   * the nonce (an endpoint may lag, or have lost an answer): that is the lifecycle monitor's
   * verdict, after several looks apart in time across every endpoint, recorded as a lost slot.
   * Until then a trade with nothing mined is pending.
   */
  async resolve(trade: TradeOnChain): Promise<TradeResolution> {
    const { confirmations } = this.#parts.settings;
    try {
      const found = await this.#parts.receipts.find(trade.broadcasts);
      if (found !== undefined) {
        const confirmed = found.confirmations >= confirmations;
        if (found.noop) return confirmed ? { state: "expired" } : { state: "pending" };
        return { state: "mined", receipt: toWeb3Receipt(found.receipt), confirmations: found.confirmations, confirmed };
      }
      const slot = await this.#parts.journal.slot(trade.wallet, trade.nonce);
      return slot?.state === "lost" ? { state: "dropped" } : { state: "pending" };
    } catch (error) {
      throw toDomainError(error);
    }
  }

  /**
   * The trade's call proven on the latest block with the gas limit it will be signed with, and
   * its deadline: by the later of this machine's clock and the chain's (the contract checks the
   * chain's), no later than its quote's expiry (never clamped: quoteLeftMs refuses a quote with too
   * little left). A revert for want of allowance is not a refusal yet: `reserve` tops it up.
   */
  async #proof(
    order: TradeOrder,
    wallet: TradingWallet,
    state: ChainState,
    shortAllowanceWaits: boolean,
  ): Promise<{ proof: Proof; deadline: number; output: bigint; allowanceShort: boolean }> {
    const now = Math.max(Math.floor(Date.now() / 1000), state.head.timestamp);
    let deadline = now + this.#parts.settings.lifetimeS;
    if (order.quote !== undefined)
      deadline = Math.min(deadline, now + Math.floor(quoteLeftMs(order.quote, this.blockTimeMs()) / 1000));
    const shape = `${order.kind}:${order.stable.address}`.toLowerCase();
    const tx = { from: wallet.signer.address, to: this.#parts.swap, data: this.#calldata({ order, deadline }, 0n) };
    try {
      const proof = await this.#parts.preflight.check(shape, tx, this.#parts.gasLimits?.[order.kind]);
      return { proof, deadline, output: proof.output, allowanceShort: false };
    } catch (error) {
      if (!shortAllowanceWaits || revertName(error) !== "ERC20InsufficientAllowance") throw error;
      return { proof: { gasLimit: 0n, output: 0n }, deadline, output: 0n, allowanceShort: true };
    }
  }

  /**
   * `proven` proven again, on the chain as it is now (after a top-up): its fees read again and
   * checked against the cap (at the proof's own block when newer), and refused if it still fails.
   */
  async #proveAgain(proven: Proven): Promise<Proven> {
    const { fees, settings } = this.#parts;
    let state = await fees.read();
    tradeFees(state, settings.feeCap);
    const again = await this.#proof(proven.order, proven.wallet, state, false);
    if (again.proof.block !== undefined && again.proof.block > state.head.number)
      state = await fees.readFrom(again.proof.block);
    return { ...proven, ...again, state, fees: tradeFees(state, settings.feeCap) };
  }

  /**
   * The allowance top-up, a step of its own: the swap's allowance of `asset` from `owner` set to
   * `target` (approvals.ts), the wallet's holding held meanwhile (allowances.ts).
   */
  #topUp(owner: string, asset: Asset, need: { amount: bigint; target: bigint; head: number }): Promise<void> {
    return this.#parts.allowances.topUp(owner, asset, need, (reset) =>
      this.#parts.approvals.approve(owner, asset.address, need.target, reset),
    );
  }

  /** Books a sell's payout of the swap's reserves (allowances.ts), held here until released. */
  async #reservePayout(proven: Proven, reserved: Reserved): Promise<{ swap: string; stable: string; amount: bigint }> {
    const amount = proven.proof.output;
    const holding = await this.#parts.allowances.reserveBalance(
      proven.order.stable,
      amount,
      proven.head,
      proven.reads.payout,
    );
    reserved.held.push({ holding, amount });
    return { swap: this.#parts.swap, stable: proven.order.stable.address, amount };
  }

  /**
   * Proves a trade's call again before it is signed again past someone else's transaction mined
   * at its nonce (send-queue.ts): it must still succeed with its gas limit, have two of the
   * chain's blocks left before its deadline, and fees under the cap (at the block it ran on when
   * newer): those fees are what it is signed with.
   */
  async #stillGood(tx: { from: string; to: string; data: string }, proven: Proven): Promise<Fees> {
    const { fees, settings, calls } = this.#parts;
    if (proven.deadline * 1000 - Date.now() < minTimeLeftMs(this.blockTimeMs()))
      throw new ChainUnavailableError(
        "the trade waited behind another transaction of the wallet until too close to its deadline to be mined; nothing was sent: retry",
      );
    let state = await fees.read();
    tradeFees(state, settings.feeCap);
    const proof = await calls.prove(tx.from, tx.to, tx.data, proven.proof.gasLimit);
    if (!proof.ok) throw toDomainError({ data: proof.revertData });
    if (proof.block !== undefined && proof.block > state.head.number) state = await fees.readFrom(proof.block);
    return tradeFees(state, settings.feeCap);
  }

  /** The swap call of the trade, with its deadline and `minOut`. */
  #calldata({ order, deadline }: { order: TradeOrder; deadline: number }, minOut: bigint): string {
    return SWAP_CALL[order.kind]([order.stable.address, order.amount, order.destinatary, minOut, BigInt(deadline)]);
  }

  /** What a trade spends from its wallet: a sell, the wallet's tokens; a buy or remittance, its stable coin. */
  #spent(order: TradeOrder): Asset {
    return order.kind === "sell"
      ? { address: this.#parts.token.address, symbol: this.#parts.token.symbol, decimals: 18 }
      : order.stable;
  }
}
