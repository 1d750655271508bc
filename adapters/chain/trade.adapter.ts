/**
 * TradePort on the chain: signs swap calls with the exchange wallets' keys.
 *
 * Every trade is preflighted (wallet known, balance, allowance, estimateGas) and refused
 * with a domain error before anything is sent. Nonces are assigned in-process per wallet
 * (NonceSequencer): signing is serialized, receipts are awaited concurrently.
 */
import {
  Contract,
  Interface,
  JsonRpcApiProvider,
  MaxUint256,
  formatUnits,
  keccak256,
  type Provider,
  type TransactionReceipt as EthersReceipt,
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
import { MemoryNonceStore, isNonceConflict, type NonceStore } from "./nonce-store.js";
import { toWeb3Receipt } from "./web3-receipt.js";

const swapInterface = new Interface(SWAP_ABI);
const erc20Interface = new Interface(ERC20_ABI);
const SWAP_METHOD = { sell: "sell", buy: "buy", remittance: "remit" } as const satisfies Record<TradeKind, string>;

export interface TradeAdapterOptions {
  provider: Provider;
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
}

export class ChainTradeAdapter implements TradePort {
  readonly #opts: Required<TradeAdapterOptions>;
  readonly #signers = new Map<string, Wallet>();
  readonly #allowanceLocks = new KeyedMutex();
  readonly #erc20s = new Map<string, Contract>();
  /** Allowance already promised to sent-but-unmined trades, per wallet and asset. */
  readonly #inFlight = new Map<string, bigint>();
  #feeCache?: { at: number; fees: Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> };

  constructor(options: TradeAdapterOptions) {
    this.#opts = { receiptTimeoutMs: 120_000, gasHeadroomPercent: 20n, nonces: new MemoryNonceStore(), ...options };
    for (const wallet of options.wallets) this.#signers.set(wallet.address.toLowerCase(), wallet);
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
        const receipt = await provider.getTransactionReceipt(tx.txHash);
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
    const signer = this.#signers.get(order.wallet.toLowerCase());
    if (!signer) throw new UnknownWalletError(order.wallet);
    // A sell spends the wallet's tokens; a buy or remittance spends its stable coin.
    const spent =
      kind === "sell"
        ? { address: this.#opts.token.address, symbol: this.#opts.token.symbol, decimals: 18 }
        : order.stable;
    const data = swapInterface.encodeFunctionData(SWAP_METHOD[kind], [
      order.stable.address,
      order.amount,
      order.destinatary,
      0n, // minimum out: the preflight below already refuses a trade that would not pay
      MaxUint256, // no deadline: the receipt wait bounds the trade instead
    ]);

    let hash: string;
    const reservation = `${signer.address}:${spent.address}`.toLowerCase();
    let reserved = false;
    try {
      await this.#reserveAllowance(signer, spent, order.amount, reservation);
      reserved = true;
      const gas = await this.#estimateGas({ from: signer.address, to: this.#opts.swap, data });
      const gasLimit = (gas * (100n + this.#opts.gasHeadroomPercent)) / 100n;
      hash = await this.#sign(signer, { to: this.#opts.swap, data, gasLimit }, hooks?.onSigned);
    } catch (error) {
      if (reserved) this.#release(reservation, order.amount);
      throw toDomainError(error, { stableDecimals: order.stable.decimals });
    }

    try {
      const receipt = await this.#waitForReceipt(hash);
      if (receipt.status !== 1) throw new TradeRevertedError(`transaction ${hash} reverted when mined`);
      return toWeb3Receipt(receipt);
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
    signer: Wallet,
    asset: { address: string; symbol: string; decimals: number },
    amount: bigint,
    key: string,
  ): Promise<void> {
    const owner = signer.address;
    let contract = this.#erc20s.get(asset.address);
    if (!contract) this.#erc20s.set(asset.address, (contract = new Contract(asset.address, ERC20_ABI, this.#opts.provider)));
    const read = async () =>
      (await Promise.all([contract.getFunction("balanceOf")(owner), contract.getFunction("allowance")(owner, this.#opts.swap)])) as [
        bigint,
        bigint,
      ];
    // Read outside the lock, so concurrent trades do not queue behind each other's round trips.
    // A trade mined but not yet released is then counted twice: the check errs on the safe side.
    let [balance, allowance] = await read();
    await this.#allowanceLocks.run(key, async () => {
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
        if (allowance !== 0n) await this.#approve(signer, asset.address, 0n);
        await this.#approve(signer, asset.address, target);
      }
      this.#inFlight.set(key, inFlight + amount);
    });
  }

  #release(key: string, amount: bigint): void {
    const left = (this.#inFlight.get(key) ?? 0n) - amount;
    if (left > 0n) this.#inFlight.set(key, left);
    else this.#inFlight.delete(key);
  }

  async #approve(signer: Wallet, asset: string, value: bigint): Promise<void> {
    const data = erc20Interface.encodeFunctionData("approve", [this.#opts.swap, value]);
    const gas = await this.#estimateGas({ from: signer.address, to: asset, data });
    const hash = await this.#sign(signer, { to: asset, data, gasLimit: (gas * 12n) / 10n });
    const receipt = await this.#waitForReceipt(hash);
    if (receipt.status !== 1) throw new TradeRevertedError(`allowance update ${hash} reverted`);
  }

  /**
   * Signs and broadcasts under the wallet's nonce lock; resolves with the transaction hash.
   * `onSigned` (the journal) sees the signed transaction before it is broadcast. A nonce the
   * node refuses is resynced from the chain and the transaction signed again, once.
   */
  async #sign(
    signer: Wallet,
    tx: { to: string; data: string; gasLimit: bigint },
    onSigned?: TradeHooks["onSigned"],
  ): Promise<string> {
    const chainNonce = () => this.#opts.provider.getTransactionCount(signer.address, "pending");
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.#opts.nonces.withNonce(signer.address, chainNonce, async (nonce) => {
          const fees = await this.#fees();
          const rawTx = await signer.signTransaction({ ...tx, ...fees, type: 2, chainId: this.#opts.chainId, nonce, value: 0n });
          const txHash = keccak256(rawTx);
          await onSigned?.({ wallet: signer.address, nonce, txHash, rawTx });
          await this.#broadcast(rawTx);
          return txHash;
        });
      } catch (error) {
        if (attempt === 0 && isNonceConflict(error)) continue;
        throw error;
      }
    }
  }

  /**
   * Estimates against the latest block. ethers estimates against "pending", which makes the
   * node replay every waiting transaction first: under interval mining, a burst of trades
   * would slow each preflight down in proportion to the burst.
   */
  async #estimateGas(tx: { from: string; to: string; data: string }): Promise<bigint> {
    const provider = this.#opts.provider;
    if (!(provider instanceof JsonRpcApiProvider)) return provider.estimateGas(tx);
    return BigInt((await provider.send("eth_estimateGas", [tx, "latest"])) as string);
  }

  /**
   * Sends a signed transaction. On a JSON-RPC provider this is a bare eth_sendRawTransaction:
   * ethers' broadcastTransaction would first recover the sender's key from the signature
   * (milliseconds of secp256k1 per trade, inside the nonce lock) to build a response we do not use.
   */
  async #broadcast(rawTx: string): Promise<void> {
    const provider = this.#opts.provider;
    if (provider instanceof JsonRpcApiProvider) await provider.send("eth_sendRawTransaction", [rawTx]);
    else await provider.broadcastTransaction(rawTx);
  }

  /** EIP-1559 fees, cached for a second: every send in a burst pays the same. */
  #fees(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
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

  async #waitForReceipt(hash: string): Promise<EthersReceipt> {
    const deadline = Date.now() + this.#opts.receiptTimeoutMs;
    for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
      // A node that stops answering while we wait does not fail the trade: it was sent.
      const receipt = await this.#opts.provider.getTransactionReceipt(hash).catch(() => null);
      if (receipt) return receipt;
      if (Date.now() > deadline) throw new TradePendingError(hash);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
