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
  readonly #encodedReads = new Map<string, { balanceOf: string; allowance: string }>();
  /** The exchange wallets, by lower-case address. */
  readonly #wallets = new Map<string, ExchangeWallet>();
  /** Allowance already promised to sent-but-unmined trades, per wallet and asset. */
  readonly #inFlight = new Map<string, bigint>();
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
    const reservation = `${signer.address}:${spent.address}`.toLowerCase();
    let reserved = false;
    try {
      // The estimate runs alongside the balance and allowance reads (one JSON-RPC batch under load).
      const call = { from: signer.address, to: this.#opts.swap, data };
      const shape = `${kind}:${order.stable.address}`.toLowerCase();
      const checked = this.#gasLimit(shape, call);
      checked.catch(() => {}); // awaited below, unless the reservation fails first
      const toppedUp = await this.#reserveAllowance(wallet, spent, order.amount, reservation);
      reserved = true;
      // A check made before an allowance top-up may have failed for want of it: made again.
      const gasLimit = toppedUp ? await this.#gasLimit(shape, call) : await checked;
      sent = await queue.send({ to: this.#opts.swap, data, gasLimit, onSigned: hooks?.onSigned });
    } catch (error) {
      if (reserved) this.#release(reservation, order.amount);
      throw toDomainError(error, { stableDecimals: order.stable.decimals });
    }

    try {
      const receipt = toWeb3Receipt(sent.receipt ?? (await this.#waitForReceipt(sent.hash)));
      if (!receipt.status) throw new TradeRevertedError(`transaction ${sent.hash} reverted when mined`);
      return receipt;
    } finally {
      this.#release(reservation, order.amount);
    }
  }

  /**
   * Checks the wallet's balance and makes sure the swap may spend `amount` on top of what
   * in-flight trades already spend, topping the allowance up to the wallet's balance when
   * it falls short. Allowances stay finite, so each sell emits its Approval log.
   * USDT refuses to change a non-zero allowance, so it is reset to zero first.
   */
  async #reserveAllowance(
    wallet: ExchangeWallet,
    asset: { address: string; symbol: string; decimals: number },
    amount: bigint,
    key: string,
  ): Promise<boolean> {
    const owner = wallet.signer.address;
    const calls = this.#readCalls(owner, asset.address);
    const read = () => Promise.all([this.#readUint(asset.address, calls.balanceOf), this.#readUint(asset.address, calls.allowance)]);
    // Read outside the lock, so concurrent trades do not queue behind each other's round trips.
    // A trade mined but not yet released is then counted twice: the check errs on the safe side.
    let [balance, allowance] = await read();
    return this.#allowanceLocks.run(key, async () => {
      const inFlight = this.#inFlight.get(key) ?? 0n;
      if (allowance - inFlight < amount) [balance, allowance] = await read(); // a top-up may be needed: look again
      if (balance - inFlight < amount) {
        throw new InsufficientFundsError(
          `userAddress: ${owner} holds ${formatUnits(balance, asset.decimals)} ${asset.symbol}` +
            (inFlight > 0n ? ` (${formatUnits(inFlight, asset.decimals)} already committed)` : "") +
            `, the trade needs ${formatUnits(amount, asset.decimals)}`,
        );
      }
      if (allowance - inFlight < amount) {
        const target = balance > inFlight + amount ? balance : inFlight + amount;
        if (allowance !== 0n) await this.#approve(wallet, asset.address, 0n);
        await this.#approve(wallet, asset.address, target);
        this.#inFlight.set(key, inFlight + amount);
        return true;
      }
      this.#inFlight.set(key, inFlight + amount);
      return false;
    });
  }

  /** Calldata of the wallet's balanceOf and allowance reads on an asset, encoded once. */
  #readCalls(owner: string, asset: string): { balanceOf: string; allowance: string } {
    const key = `${owner}:${asset}`.toLowerCase();
    let calls = this.#encodedReads.get(key);
    if (!calls) {
      calls = {
        balanceOf: erc20Interface.encodeFunctionData("balanceOf", [owner]),
        allowance: erc20Interface.encodeFunctionData("allowance", [owner, this.#opts.swap]),
      };
      this.#encodedReads.set(key, calls);
    }
    return calls;
  }

  /** An eth_call against the latest block answering one uint256. */
  async #readUint(to: string, data: string): Promise<bigint> {
    const result = (await this.#opts.provider.send("eth_call", [{ to, data }, "latest"])) as string;
    return BigInt(result === "0x" ? "0x0" : result);
  }

  #release(key: string, amount: bigint): void {
    const left = (this.#inFlight.get(key) ?? 0n) - amount;
    if (left > 0n) this.#inFlight.set(key, left);
    else this.#inFlight.delete(key);
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
