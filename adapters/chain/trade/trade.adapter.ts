/**
 * TradePort on the chain: signs swap calls with the exchange wallets' keys.
 *
 * A trade, in order:
 * 1. fees (fees.ts): refused at once while the chain's base fee is above the cap;
 * 2. calldata (calldata.ts): the swap call with a deadline (now + the trade's lifetime) and a
 *    minimum output (the preflight's output less the slippage), so a trade that is not mined
 *    in time can never execute late, or at a worse price; a trade under a quote (TradeOrder.quote)
 *    takes the quote's minOut, a deadline no later than its expiry, and is refused before signing
 *    when the preflight's output is already below that minOut (QuoteSlippageError);
 * 3. preflight (preflight.ts) alongside the balance and allowance reservation (allowances.ts)
 *    and the feed policy (feed-policy.ts: the token feed's age and bounds, the L2 sequencer):
 *    refused with a domain error before anything is signed; and the native coin's USD price,
 *    read once per block, which the journal keeps with the trade for its gas in USD. What these
 *    ask of the latest block goes out in one eth_call per tick (call-batcher.ts);
 * 4. the wallet's SendQueue (send-queue.ts) assigns the nonce, signs, journals and broadcasts,
 *    batching whatever arrives meanwhile;
 * 5. the receipt (receipts.ts) of whatever is mined at that nonce with the required
 *    confirmations: the transaction, or a replacement, or the no-op of an expired trade. The
 *    wallet's lifecycle monitor (lifecycle/monitor.ts) re-sends, re-prices and replaces in the
 *    background, and settles in the journal what the call did not wait for.
 */
import { Interface } from "ethers";

import {
  ChainUnavailableError,
  QuoteSlippageError,
  TradeExpiredError,
  TradeRevertedError,
  UnknownWalletError,
  minTimeLeftMs,
  type Reservation,
  type SignedTradeTx,
  type TradeHooks,
  type TradeKind,
  type TradeOnChain,
  type TradeOrder,
  type TradePort,
  type TradeResolution,
  type TransactionReceipt,
} from "../../../core/index.js";
import {
  BlockTimes,
  BlockWatcher,
  measureBlockTime,
  FeeOracle,
  Receipts,
  headsOf,
  toWeb3Receipt,
  tradeFees,
} from "../blocks/index.js";
import { WalletMonitor, type LifecycleLog } from "../lifecycle/index.js";
import { DEFAULT_FEED_POLICY, FeedGuard } from "../price/index.js";
import { CallBatcher, revertName, toDomainError } from "../rpc/index.js";
import { SendQueue } from "../send/index.js";
import { SWAP_ABI, staticCallEncoder, toSigner, type TransactionSigner } from "../tx/index.js";
import { Allowances, reservesOf, type Asset, type Holding } from "./allowances.js";
import { Approvals } from "./approvals.js";
import { tradeGasLimit } from "./gas-limits.js";
import { DEFAULT_TRADE_SETTINGS, type TradeAdapterOptions, type TradeSettings } from "./options.js";
import { Preflight, minimumOut } from "./preflight.js";
import { quoteLeftMs } from "./quote-deadline.js";
import { markMined, nonceLookup, recordSlotOf } from "./slots.js";

const swapInterface = new Interface(SWAP_ABI);
/** Calldata of each trade's TokenSwap call: (stable, amount, destinatary, minimum out, deadline). */
const SWAP_CALL = {
  sell: staticCallEncoder(swapInterface, "sell"),
  buy: staticCallEncoder(swapInterface, "buy"),
  remittance: staticCallEncoder(swapInterface, "buyAndRemit"),
} as const satisfies Record<TradeKind, unknown>;

/** An exchange wallet: its key, its queue for nonces, signing, journalling and sending, and its lifecycle monitor. */
interface ExchangeWallet {
  signer: TransactionSigner;
  queue: SendQueue;
  monitor: WalletMonitor;
}

/** A trade its wallet's queue sent: the transaction, and its deadline. */
interface SentTrade {
  sent: Awaited<ReturnType<SendQueue["send"]>>;
  deadline: number;
}

/**
 * Default of `sendBatchMax`. Rounds smaller than the load keep the chain busy: one round is
 * mined while the next is signed, rather than every trade in flight moving in one wave that
 * leaves the chain idle while it collects its receipts.
 */
export const DEFAULT_SEND_BATCH_MAX = 16;

const SILENT: LifecycleLog = { warn() {}, info() {} };

export class ChainTradeAdapter implements TradePort {
  readonly #opts: TradeAdapterOptions;
  readonly #settings: TradeSettings;
  readonly #fees: FeeOracle;
  readonly #receipts: Receipts;
  readonly #watcher: BlockWatcher;
  readonly #times: BlockTimes;
  readonly #preflight: Preflight;
  readonly #allowances: Allowances;
  readonly #feeds: FeedGuard;
  /** Every read and proof a tick asks of the latest block, in one eth_call (call-batcher.ts). */
  readonly #calls: CallBatcher;
  readonly #gasLimits: Record<TradeKind, bigint> | null;
  /** The exchange wallets, by lower-case address. */
  readonly #wallets = new Map<string, ExchangeWallet>();

  constructor(options: TradeAdapterOptions) {
    this.#opts = options;
    const settings = { ...DEFAULT_TRADE_SETTINGS, ...options.settings };
    this.#settings = settings;
    const { provider, journal } = options;
    // The chain's block time, from the heads the watcher and the fees read (block-times.ts).
    this.#times = new BlockTimes(options.blockTimeMs);
    // Heads pushed over a WebSocket endpoint when there is one (eth_subscribe newHeads), else polled.
    this.#watcher = new BlockWatcher({
      provider,
      intervalMs: settings.intervalMs,
      heads: headsOf(provider),
      times: this.#times,
    });
    // Fees from the head the watcher reads anyway, while it is young (fees.ts).
    this.#fees = new FeeOracle(provider, { heads: this.#watcher, times: this.#times });
    this.#receipts = new Receipts({
      watcher: this.#watcher,
      provider,
      confirmations: settings.confirmations,
      timeoutMs: options.receiptTimeoutMs ?? 120_000,
      journalAfterMs: settings.minAgeMs,
    });
    this.#calls = new CallBatcher({ provider });
    this.#preflight = new Preflight({
      provider,
      gasHeadroomPercent: options.gasHeadroomPercent ?? 20n,
      calls: this.#calls,
    });
    this.#gasLimits =
      options.gasLimits === undefined
        ? { sell: tradeGasLimit("sell"), buy: tradeGasLimit("buy"), remittance: tradeGasLimit("remittance") }
        : options.gasLimits;
    this.#feeds = options.feeds ?? new FeedGuard({ provider, swap: options.swap, policy: DEFAULT_FEED_POLICY });
    // The allowance top-ups, through each wallet's queue (approvals.ts).
    const approvals = new Approvals({
      provider,
      swap: options.swap,
      queueOf: (owner) => this.#wallets.get(owner.toLowerCase())!.queue,
      record: (tx) => recordSlotOf(journal, tx, "approval"),
      mined: (owner, sent) => this.#receipts.wait(sent.hash, sent.receipt, nonceLookup(journal, owner, sent.nonce)),
    });
    this.#allowances = new Allowances({
      provider,
      swap: options.swap,
      approve: (owner, asset, value, reset) => approvals.approve(owner, asset, value, reset),
      reservations: (minedAfter) => journal.reservations(minedAfter),
      calls: this.#calls,
    });
    for (const signer of options.wallets.map(toSigner)) {
      const queue = new SendQueue({
        signer,
        chainId: options.chainId,
        provider,
        nonces: journal,
        ledger: journal,
        fees: async () => tradeFees(await this.#fees.read(), settings.feeCap),
        maxBatch: options.sendBatchMax ?? DEFAULT_SEND_BATCH_MAX,
        watcher: this.#watcher,
        heldWaitMs: options.receiptTimeoutMs ?? 120_000,
      });
      const monitor = new WalletMonitor({
        signer,
        chainId: options.chainId,
        provider,
        journal,
        fees: this.#fees,
        receipts: this.#receipts,
        settings,
        log: options.log ?? SILENT,
        holder: options.instanceId ?? "this-instance",
        sends: queue,
      });
      this.#wallets.set(signer.address.toLowerCase(), { signer, queue, monitor });
    }
  }

  /**
   * Starts every wallet's lifecycle monitor: from now on, every nonce the journal holds is seen
   * through to its end. Reads the chain's block time once (block-times.ts), so the first quote
   * redeemed knows it.
   */
  start(): void {
    for (const { monitor } of this.#wallets.values()) monitor.start();
    void measureBlockTime(this.#opts.provider, this.#times).catch(() => {}); // else from the heads read later
  }

  /** The chain's block time as measured lately, in ms (block-times.ts); undefined while unknown. */
  blockTimeMs(): number | undefined {
    return this.#times.blockTimeMs();
  }

  /** Stops the monitors (giving their leases up). */
  async stop(): Promise<void> {
    await Promise.all([...this.#wallets.values()].map(({ monitor }) => monitor.stop()));
    this.#watcher.stop();
  }

  /** Each wallet's oldest nonce nothing is mined at yet, as its monitor last saw it. */
  oldestPending(): Array<{ wallet: string; nonce: number; since: Date }> {
    return [...this.#wallets.values()].flatMap(({ monitor }) => {
      const oldest = monitor.oldestPending();
      return oldest ? [{ wallet: monitor.wallet, ...oldest }] : [];
    });
  }

  /** The wallets' monitors, for tests that drive them a look at a time. */
  monitors(): WalletMonitor[] {
    return [...this.#wallets.values()].map(({ monitor }) => monitor);
  }

  sell(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt> {
    return this.#trade("sell", order, hooks);
  }

  buy(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt> {
    return this.#trade("buy", order, hooks);
  }

  remittance(order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt> {
    return this.#trade("remittance", order, hooks);
  }

  /**
   * Looks a journalled trade's transactions up without sending anything: the one of them mined
   * in the canonical chain now, if any. One read never decides that another transaction took
   * the nonce (an endpoint may lag, or have lost an answer): that is the lifecycle monitor's
   * verdict, after several looks apart in time across every endpoint, recorded as a lost slot.
   * Until then a trade with nothing mined is pending.
   */
  async resolve(trade: TradeOnChain): Promise<TradeResolution> {
    const { confirmations } = this.#settings;
    try {
      const found = await this.#receipts.find(trade.broadcasts);
      if (found !== undefined) {
        const confirmed = found.confirmations >= confirmations;
        if (found.noop) return confirmed ? { state: "expired" } : { state: "pending" };
        return { state: "mined", receipt: toWeb3Receipt(found.receipt), confirmations: found.confirmations, confirmed };
      }
      const slot = await this.#opts.journal.slot(trade.wallet, trade.nonce);
      return slot?.state === "lost" ? { state: "dropped" } : { state: "pending" };
    } catch (error) {
      throw toDomainError(error);
    }
  }

  async #trade(kind: TradeKind, order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt> {
    const wallet = this.#wallets.get(order.wallet.toLowerCase());
    if (!wallet) throw new UnknownWalletError(order.wallet);
    const { signer } = wallet;
    const { sent, deadline } = await this.#send(kind, order, wallet, hooks);
    try {
      if (sent.receipt === null && sent.known) hooks?.onSubmitted?.();
      const outcome = await this.#receipts.wait(
        sent.hash,
        sent.receipt,
        nonceLookup(this.#opts.journal, signer.address, sent.nonce),
      );
      // A trade without a record of its own (no hooks): its slot is marked mined at once, so that
      // what it held back stops counting once the chain shows it (allowances.ts); a journalled
      // trade's record does that (markConfirmed), and the monitor for what no call waited for.
      if (hooks?.onSigned === undefined) await markMined(this.#opts.journal, signer.address, sent.nonce, outcome);
      if (outcome.noop) throw new TradeExpiredError(deadline, sent.nonce);
      const receipt = toWeb3Receipt(outcome.receipt);
      if (!receipt.status) throw new TradeRevertedError(`transaction ${receipt.transactionHash} reverted when mined`);
      return receipt;
    } finally {
      this.#watcher.release([sent.hash]); // wait() did, unless a hook threw before it
    }
  }

  /**
   * A trade up to its broadcast: fees and the cap, the feed policy, the proof alongside the
   * balance and allowance reservation, then the wallet's queue signs, journals and sends it. What
   * it reserved counts here until the queue answers, and its slot holds it back from then on until
   * it is final (allowances.ts). The error, if any, is the domain's.
   */
  async #send(kind: TradeKind, order: TradeOrder, wallet: ExchangeWallet, hooks?: TradeHooks): Promise<SentTrade> {
    const { signer, queue } = wallet;
    const { lifetimeS, slippageBps, feeCap } = this.#settings;
    const spent = this.#spent(kind, order);
    let sent: Awaited<ReturnType<SendQueue["send"]>>;
    let deadline = 0;
    let reservation: Awaited<ReturnType<Allowances["reserve"]>> | undefined;
    /** What it holds reserved here until the queue answers. */
    const held: Array<{ holding: Holding; amount: bigint }> = [];
    /** The slots it was journalled at (one, or more when it was signed again at another nonce). */
    const slots: string[] = [];
    try {
      let state = await this.#fees.read();
      tradeFees(state, feeCap); // nothing is sent while the base fee is above the cap
      // Nothing is signed at a price the feed policy refuses (read once per block for every trade).
      const fed = this.#feeds.forTrade(state.head, this.#calls);
      fed.catch(() => {}); // awaited below, unless something fails first
      // The native coin's USD price, kept with the trade for its gas in USD (read once per block; never rejects).
      const nativeUsd = this.#feeds.nativeUsdForTrade(state.head, this.#calls);
      const shape = `${kind}:${order.stable.address}`.toLowerCase();
      const encode = (minOut: bigint) =>
        SWAP_CALL[kind]([order.stable.address, order.amount, order.destinatary, minOut, BigInt(deadline)]);
      const prove = () => {
        // By the later of this machine's clock and the chain's: the contract checks the chain's.
        const now = Math.max(Math.floor(Date.now() / 1000), state.head.timestamp);
        deadline = now + lifetimeS;
        // Under a quote, no later than its expiry: what is left of it, counted from the same "now",
        // and refused (never clamped) when that is too little to be mined.
        if (order.quote !== undefined)
          deadline = Math.min(deadline, now + Math.floor(quoteLeftMs(order.quote, this.#times.blockTimeMs()) / 1000));
        return this.#preflight.check(
          shape,
          { from: signer.address, to: this.#opts.swap, data: encode(0n) },
          this.#gasLimits?.[kind],
        );
      };
      // The proof runs alongside the balance and allowance reads, the feeds' and (for a sell) the
      // swap's reserves: one eth_call (call-batcher.ts), shared with the trades arriving alongside.
      const checked = prove();
      checked.catch(() => {}); // awaited below, unless the reservation fails first
      // Every read of this trade's is made at this head or later (and shared with those of its burst).
      const head = state.head.number;
      if (kind === "sell") this.#allowances.prefetchReserves(order.stable, head);
      reservation = await this.#allowances.reserve(signer.address, spent, order.amount, head);
      held.push({ holding: reservation.holding, amount: order.amount });
      await fed;
      // A check made before an allowance top-up may have failed for want of it: made again.
      const proof = await (reservation.toppedUp ? prove() : checked).catch(async (error: unknown) => {
        // Another trade's top-up landed between this proof and the reservation's read (a fresh
        // wallet's first trades, together): the allowance now suffices, so prove once more.
        if (revertName(error) === "ERC20InsufficientAllowance" && !reservation!.toppedUp) return prove();
        if (revertName(error) !== "SwapDeadlineExpired") throw error;
        // The chain's clock is ahead of the head last read: read it now, and prove once more.
        state = await this.#fees.read(true);
        return prove();
      });
      // The proof ran on a block newer than the head the fees came from (the block watcher's, up
      // to a second old): the cap is checked against that block's fees before anything is signed,
      // so a trade in the second after a fee spike is refused, not sent to wait above the cap.
      if (proof.block !== undefined && proof.block > state.head.number) {
        state = await this.#fees.readFrom(proof.block);
        tradeFees(state, feeCap);
      }
      // Under a quote, the price may have moved past its slippage since: refused before anything is signed.
      if (order.quote !== undefined && proof.output < order.quote.minOut)
        throw new QuoteSlippageError(proof.output, order.quote.minOut);
      // A sell pays out of the swap's reserves: booked like the wallet's balance, so the sells
      // accepted together never pay out more than the swap holds (none reverts for want of it).
      const paid = kind === "sell" ? await this.#reservePayout(order, proof.output, head, held) : undefined;
      const reserves = reservesOf({ wallet: signer.address, spent, amount: order.amount }, paid);
      // A quote's minOut is what it promised the caller; else the preflight's output less the slippage.
      const data = encode(order.quote?.minOut ?? minimumOut(proof.output, slippageBps));
      const price = await nativeUsd;
      sent = await queue.send({
        to: this.#opts.swap,
        data,
        gasLimit: proof.gasLimit,
        deadline,
        onSigned: this.#journalling(order, hooks, { reserves, price, slots }),
        recheck: () => this.#proveAgain({ from: signer.address, to: this.#opts.swap, data }, proof.gasLimit, deadline),
      });
    } catch (error) {
      throw toDomainError(error, { stableDecimals: order.stable.decimals });
    } finally {
      // Answered by the queue: its slot holds it back from now on until it is final, or it was
      // refused; no longer this process's to count (allowances.ts).
      this.#allowances.release(held, slots);
    }
    return { sent, deadline };
  }

  /**
   * How a trade's signed transaction is journalled (the hook's onSigned, with the native coin's
   * price and what it holds back), once its quote, if any, is checked again as it is signed: a
   * trade whose quote has too little left is refused there, unsent.
   */
  #journalling(
    order: TradeOrder,
    hooks: TradeHooks | undefined,
    { reserves, price, slots }: { reserves: Reservation[]; price: bigint | null; slots: string[] },
  ): (tx: SignedTradeTx) => Promise<void> {
    const onSigned = hooks?.onSigned ?? ((tx: SignedTradeTx) => recordSlotOf(this.#opts.journal, tx, "trade"));
    return async (tx) => {
      if (order.quote !== undefined) quoteLeftMs(order.quote, this.#times.blockTimeMs());
      // Counted here until the queue answers, so the journal's count leaves its slot out.
      slots.push(this.#allowances.journalled(tx.txHash));
      await onSigned(price === null ? { ...tx, reserves } : { ...tx, nativeUsd: price, reserves });
    };
  }

  /**
   * Proves a trade's call again before it is signed again past someone else's transaction mined
   * at its nonce (send-queue.ts): it must still succeed with its gas limit, and have two of the
   * chain's blocks left before its deadline.
   */
  async #proveAgain(tx: { from: string; to: string; data: string }, gasLimit: bigint, deadline: number): Promise<void> {
    if (deadline * 1000 - Date.now() < minTimeLeftMs(this.#times.blockTimeMs()))
      throw new ChainUnavailableError(
        `the trade waited behind another transaction of the wallet until too close to its deadline to be mined; nothing was sent: retry`,
      );
    const proof = await this.#calls.prove(tx.from, tx.to, tx.data, gasLimit);
    if (!proof.ok) throw toDomainError({ data: proof.revertData });
  }

  /** What a trade spends from its wallet: a sell, the wallet's tokens; a buy or remittance, its stable coin. */
  #spent(kind: TradeKind, order: TradeOrder): Asset {
    return kind === "sell"
      ? { address: this.#opts.token.address, symbol: this.#opts.token.symbol, decimals: 18 }
      : order.stable;
  }

  /** Books a sell's payout of the swap's reserves (allowances.ts), held here until the queue answers. */
  async #reservePayout(
    order: TradeOrder,
    amount: bigint,
    head: number,
    held: Array<{ holding: Holding; amount: bigint }>,
  ): Promise<{ swap: string; stable: string; amount: bigint }> {
    held.push({ holding: await this.#allowances.reserveBalance(order.stable, amount, head), amount });
    return { swap: this.#opts.swap, stable: order.stable.address, amount };
  }
}
