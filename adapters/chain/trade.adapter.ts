/**
 * TradePort on the chain: signs swap calls with the exchange wallets' keys.
 *
 * Every trade is preflighted (wallet known, balance, allowance, estimateGas) and refused
 * with a domain error before anything is sent. Then each wallet's SendQueue assigns the
 * nonce, signs, journals and broadcasts it, batching whatever arrives meanwhile; receipts
 * are awaited concurrently.
 */
import {
  Interface,
  type JsonRpcApiProvider,
  MaxUint256,
  formatUnits,
  toQuantity,
  type Wallet,
} from "ethers";

import {
  ChainUnavailableError,
  InsufficientFundsError,
  TradePendingError,
  TradeRevertedError,
  UnknownWalletError,
  type SignedTrade,
  type TradeHooks,
  type TradeKind,
  type TradeOrder,
  type TradePort,
  type TradeResolution,
  type TransactionReceipt,
} from "../../core/index.js";
import { ERC20_ABI, SWAP_ABI } from "./abi.js";
import { toDomainError } from "./chain-errors.js";
import { KeyedMutex } from "../shared/keyed-mutex.js";
import { MemoryNonceStore, type NonceStore } from "./nonce-store.js";
import { SendQueue, type Fees, type Sent } from "./send-queue.js";
import { staticCallEncoder } from "./static-call.js";
import { toWeb3Receipt, type RpcReceipt } from "./web3-receipt.js";

const swapInterface = new Interface(SWAP_ABI);
const erc20Interface = new Interface(ERC20_ABI);
/** Calldata of each trade's TokenSwap call: (stable, amount, destinatary, minimum out, deadline). */
const SWAP_CALL = {
  sell: staticCallEncoder(swapInterface, "sell"),
  buy: staticCallEncoder(swapInterface, "buy"),
  remittance: staticCallEncoder(swapInterface, "remit"),
} as const satisfies Record<TradeKind, unknown>;

export interface TradeAdapterOptions {
  /** A JSON-RPC provider: reads, estimates and receipts are raw calls (createRpcProvider's in the service). */
  provider: JsonRpcApiProvider;
  chainId: bigint;
  wallets: readonly Wallet[];
  swap: string;
  token: { address: string; symbol: string };
  /** How long to wait for a receipt before giving up, in ms. */
  receiptTimeoutMs?: number;
  /** Headroom added to estimateGas, in percent. */
  gasHeadroomPercent?: bigint;
  /** Where nonces are assigned: in memory by default, or the trade journal's shared sequence. */
  nonces?: NonceStore;
  /** Most transactions signed and broadcast in one round (see send-queue.ts); 1 = one request each. */
  sendBatchMax?: number;
}

/**
 * One exchange wallet's holding of one asset, as its trades see it.
 * - `inFlight`: the amount of the trades reserved and not yet released (on their way, or
 *   sent and unmined), which the chain's balance and allowance may not show yet.
 * - `released`: the amount of all trades released so far. A read made when it stood lower
 *   may miss the trades released since, which no longer count as in flight: a check on that
 *   read counts them too.
 * - `read`: the balance and allowance read that trades arriving now share (one eth_call
 *   pair for a burst), with `released` as it stood when it was made.
 */
interface Holding {
  key: string;
  inFlight: bigint;
  released: bigint;
  read?: { released: bigint; value: Promise<[bigint, bigint]> };
  calls: { balanceOf: string; allowance: string };
}

/** An exchange wallet: its key, and its queue for nonces, signing, journalling and sending (send-queue.ts). */
interface ExchangeWallet {
  signer: Wallet;
  queue: SendQueue;
}

/**
 * Default of `sendBatchMax`. Rounds smaller than the load keep the chain busy: with 50 sells
 * in flight, rounds of 50 moved every trade in one wave, and the chain idled while the wave
 * collected its receipts and the next requests arrived (bench: 208 sells/s over HTTP with
 * rounds of 50, 256 with rounds of 16, 252 with rounds of 8).
 */
export const DEFAULT_SEND_BATCH_MAX = 16;

export class ChainTradeAdapter implements TradePort {
  readonly #opts: Required<TradeAdapterOptions>;
  readonly #allowanceLocks = new KeyedMutex();
  /** The largest gas estimate seen per trade shape (kind and stable coin); see #gasLimit. */
  readonly #gasEstimates = new Map<string, bigint>();
  /** The exchange wallets, by lower-case address. */
  readonly #wallets = new Map<string, ExchangeWallet>();
  /** Per wallet and asset (lower-case "wallet:asset"): see Holding. */
  readonly #holdings = new Map<string, Holding>();
  #feeCache?: { at: number; fees: Promise<Fees> };

  constructor(options: TradeAdapterOptions) {
    this.#opts = { receiptTimeoutMs: 120_000, gasHeadroomPercent: 20n, nonces: new MemoryNonceStore(), sendBatchMax: DEFAULT_SEND_BATCH_MAX, ...options };
    for (const signer of options.wallets) {
      const queue = new SendQueue({
        signer,
        chainId: options.chainId,
        provider: options.provider,
        nonces: this.#opts.nonces,
        fees: () => this.#fees(),
        maxBatch: this.#opts.sendBatchMax,
      });
      this.#wallets.set(signer.address.toLowerCase(), { signer, queue });
    }
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
   * Looks a journalled transaction up without resending it. It is dropped only once its
   * nonce is taken by another mined transaction: until then an unknown transaction may
   * still be on its way (signed and recorded, not yet broadcast), so it counts as pending.
   */
  async resolve(tx: SignedTrade): Promise<TradeResolution> {
    const { provider } = this.#opts;
    try {
      const mined = async (): Promise<TradeResolution | undefined> => {
        const receipt = await this.#receipt(tx.txHash);
        return receipt ? { state: "mined", receipt: toWeb3Receipt(receipt) } : undefined;
      };
      const first = await mined();
      if (first) return first;
      if (await provider.getTransaction(tx.txHash)) return { state: "pending" };
      if ((await provider.getTransactionCount(tx.wallet, "latest")) <= tx.nonce) return { state: "pending" };
      // The nonce is used: by this transaction if it was mined meanwhile, else by another one.
      return (await mined()) ?? { state: "dropped" };
    } catch (error) {
      throw toDomainError(error);
    }
  }

  async #trade(kind: TradeKind, order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt> {
    const wallet = this.#wallets.get(order.wallet.toLowerCase());
    if (!wallet) throw new UnknownWalletError(order.wallet);
    const { signer, queue } = wallet;
    // A sell spends the wallet's tokens; a buy or remittance spends its stable coin.
    const spent =
      kind === "sell"
        ? { address: this.#opts.token.address, symbol: this.#opts.token.symbol, decimals: 18 }
        : order.stable;
    const data = SWAP_CALL[kind]([
      order.stable.address,
      order.amount,
      order.destinatary,
      0n, // minimum out: the preflight below already refuses a trade that would not pay
      MaxUint256, // no deadline: the receipt wait bounds the trade instead
    ]);

    let sent: Sent;
    let holding: Holding | undefined;
    try {
      // The estimate runs alongside the balance and allowance reads (one JSON-RPC batch under load).
      const call = { from: signer.address, to: this.#opts.swap, data };
      const shape = `${kind}:${order.stable.address}`.toLowerCase();
      const checked = this.#gasLimit(shape, call);
      checked.catch(() => {}); // awaited below, unless the reservation fails first
      const reserved = await this.#reserveAllowance(wallet, spent, order.amount);
      holding = reserved.holding;
      const toppedUp = reserved.toppedUp;
      // A check made before an allowance top-up may have failed for want of it: made again.
      const gasLimit = toppedUp ? await this.#gasLimit(shape, call) : await checked;
      sent = await queue.send({ to: this.#opts.swap, data, gasLimit, onSigned: hooks?.onSigned });
    } catch (error) {
      if (holding) this.#release(holding, order.amount);
      throw toDomainError(error, { stableDecimals: order.stable.decimals });
    }

    try {
      const receipt = toWeb3Receipt(sent.receipt ?? (await this.#waitForReceipt(sent.hash)));
      if (!receipt.status) throw new TradeRevertedError(`transaction ${sent.hash} reverted when mined`);
      return receipt;
    } finally {
      this.#release(holding, order.amount);
    }
  }

  /**
   * Checks the wallet's balance and makes sure the swap may spend `amount` on top of what
   * in-flight trades already spend, topping the allowance up to the wallet's balance when
   * it falls short. Allowances stay finite, so each sell emits its Approval log.
   * USDT refuses to change a non-zero allowance, so it is reset to zero first.
   *
   * The balance and allowance are read outside the lock, so concurrent trades do not queue
   * behind each other's round trips, and one read serves the trades that arrive together
   * (see Holding). Every trade that was in flight when the read was made, or reserved since,
   * counts as unpaid: one that was mined before the read is then counted twice, which errs
   * on the safe side. Only when that check falls short is the chain read again, in the lock.
   */
  async #reserveAllowance(
    wallet: ExchangeWallet,
    asset: { address: string; symbol: string; decimals: number },
    amount: bigint,
  ): Promise<{ holding: Holding; toppedUp: boolean }> {
    const owner = wallet.signer.address;
    const holding = this.#holding(owner, asset.address);
    const shared = this.#sharedRead(holding, asset.address);
    let [balance, allowance] = await shared.value;
    return this.#allowanceLocks.run(holding.key, async () => {
      // Trades released since the read may not show in it: they still count.
      let unpaid = holding.inFlight + (holding.released - shared.released);
      if (balance - unpaid < amount || allowance - unpaid < amount) {
        // Short, or a top-up may be needed: look again. Counted before the read is made, so a
        // trade released meanwhile still counts.
        unpaid = holding.inFlight;
        [balance, allowance] = await this.#read(holding, asset.address);
      }
      if (balance - unpaid < amount) {
        throw new InsufficientFundsError(
          `userAddress: ${owner} holds ${formatUnits(balance, asset.decimals)} ${asset.symbol}` +
            (unpaid > 0n ? ` (${formatUnits(unpaid, asset.decimals)} already committed)` : "") +
            `, the trade needs ${formatUnits(amount, asset.decimals)}`,
        );
      }
      let toppedUp = false;
      if (allowance - unpaid < amount) {
        const target = balance > unpaid + amount ? balance : unpaid + amount;
        try {
          if (allowance !== 0n) await this.#approve(wallet, asset.address, 0n);
          await this.#approve(wallet, asset.address, target);
        } finally {
          holding.read = undefined; // it shows the allowance before the update: the next trade reads again
        }
        toppedUp = true;
      }
      holding.inFlight += amount;
      return { holding, toppedUp };
    });
  }

  /** The service's bookkeeping of one wallet's holding of one asset, made on first use. */
  #holding(owner: string, asset: string): Holding {
    const key = `${owner}:${asset}`.toLowerCase();
    let holding = this.#holdings.get(key);
    if (!holding) {
      holding = {
        key,
        inFlight: 0n,
        released: 0n,
        calls: {
          balanceOf: erc20Interface.encodeFunctionData("balanceOf", [owner]),
          allowance: erc20Interface.encodeFunctionData("allowance", [owner, this.#opts.swap]),
        },
      };
      this.#holdings.set(key, holding);
    }
    return holding;
  }

  /**
   * The balance and allowance read that a trade arriving now uses: the current one, unless a
   * trade was released since it was made (then a new one, shared in turn).
   */
  #sharedRead(holding: Holding, asset: string): NonNullable<Holding["read"]> {
    if (holding.read?.released !== holding.released) {
      const read = { released: holding.released, value: this.#read(holding, asset) };
      read.value.catch(() => {
        if (holding.read === read) holding.read = undefined; // a failed read is not shared
      });
      holding.read = read;
    }
    return holding.read;
  }

  /** The wallet's balance and the swap's allowance, read now (latest block). */
  #read(holding: Holding, asset: string): Promise<[bigint, bigint]> {
    return Promise.all([this.#readUint(asset, holding.calls.balanceOf), this.#readUint(asset, holding.calls.allowance)]);
  }

  /** An eth_call against the latest block answering one uint256. */
  async #readUint(to: string, data: string): Promise<bigint> {
    const result = (await this.#opts.provider.send("eth_call", [{ to, data }, "latest"])) as string;
    return BigInt(result === "0x" ? "0x0" : result);
  }

  /** The trade is over (mined, or refused before it was sent): its amount no longer counts as in flight. */
  #release(holding: Holding, amount: bigint): void {
    holding.inFlight -= amount;
    holding.released += amount;
  }

  async #approve({ signer, queue }: ExchangeWallet, asset: string, value: bigint): Promise<void> {
    const data = erc20Interface.encodeFunctionData("approve", [this.#opts.swap, value]);
    const gas = await this.#estimateGas({ from: signer.address, to: asset, data });
    const sent = await queue.send({ to: asset, data, gasLimit: (gas * 12n) / 10n });
    const receipt = sent.receipt ?? (await this.#waitForReceipt(sent.hash));
    if (BigInt(receipt.status) !== 1n) throw new TradeRevertedError(`allowance update ${sent.hash} reverted`);
  }

  /**
   * The gas limit for a trade, proven sufficient against the latest block. The first trade
   * of each shape (kind and stable coin) is estimated; later ones run as one eth_call with
   * the gas limit the largest estimate so far gives (plus headroom): if that call succeeds,
   * the transaction succeeds with that limit on the same state, which is what an estimate
   * proves, at the cost of one execution instead of an estimate's binary search. If it
   * fails, a full estimate follows: it names the revert, or finds a larger figure.
   */
  async #gasLimit(shape: string, tx: { from: string; to: string; data: string }): Promise<bigint> {
    const headroom = (gas: bigint) => (gas * (100n + this.#opts.gasHeadroomPercent)) / 100n;
    const known = this.#gasEstimates.get(shape);
    const provider = this.#opts.provider;
    if (known !== undefined) {
      const gasLimit = headroom(known);
      const passed = await provider.send("eth_call", [{ ...tx, gas: toQuantity(gasLimit) }, "latest"]).then(
        () => true,
        () => false,
      );
      if (passed) return gasLimit;
    }
    const gas = await this.#estimateGas(tx);
    if (known === undefined || gas > known) this.#gasEstimates.set(shape, gas);
    return headroom(gas);
  }

  /**
   * Estimates against the latest block. ethers estimates against "pending", which makes the
   * node replay every waiting transaction first: under interval mining, a burst of trades
   * would slow each preflight down in proportion to the burst.
   */
  async #estimateGas(tx: { from: string; to: string; data: string }): Promise<bigint> {
    return BigInt((await this.#opts.provider.send("eth_estimateGas", [tx, "latest"])) as string);
  }

  /** EIP-1559 fees, cached for a second: every send in a burst pays the same. */
  #fees(): Promise<Fees> {
    const now = Date.now();
    if (!this.#feeCache || now - this.#feeCache.at > 1000) {
      const fees = this.#opts.provider.getFeeData().then((data) => {
        if (data.maxFeePerGas === null || data.maxPriorityFeePerGas === null) {
          throw new ChainUnavailableError("the node reports no EIP-1559 fee data");
        }
        return { maxFeePerGas: data.maxFeePerGas, maxPriorityFeePerGas: data.maxPriorityFeePerGas };
      });
      fees.catch(() => {
        if (this.#feeCache?.fees === fees) this.#feeCache = undefined;
      });
      this.#feeCache = { at: now, fees };
    }
    return this.#feeCache.fees;
  }

  /** The node's receipt as it sent it (web3-receipt.ts formats it), or null while unmined. */
  async #receipt(hash: string): Promise<RpcReceipt | null> {
    return (await this.#opts.provider.send("eth_getTransactionReceipt", [hash])) as RpcReceipt | null;
  }

  async #waitForReceipt(hash: string): Promise<RpcReceipt> {
    const deadline = Date.now() + this.#opts.receiptTimeoutMs;
    for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
      // A node that stops answering while we wait does not fail the trade: it was sent.
      const receipt = await this.#receipt(hash).catch(() => null);
      if (receipt) return receipt;
      if (Date.now() > deadline) throw new TradePendingError(hash);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
