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
  MaxUint256,
  formatUnits,
  type Provider,
  type TransactionReceipt as EthersReceipt,
  type Wallet,
} from "ethers";

import {
  InsufficientFundsError,
  TradeRevertedError,
  UnknownWalletError,
  ChainUnavailableError,
  type TradeKind,
  type TradeOrder,
  type TradePort,
  type TransactionReceipt,
} from "../../core/index.js";
import { ERC20_ABI, SWAP_ABI } from "./abi.js";
import { toDomainError } from "./chain-errors.js";
import { NonceSequencer, SerialQueue } from "./nonce-sequencer.js";
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
}

interface Signer {
  wallet: Wallet;
  nonces: NonceSequencer;
}

export class ChainTradeAdapter implements TradePort {
  readonly #opts: Required<TradeAdapterOptions>;
  readonly #signers = new Map<string, Signer>();
  readonly #allowanceQueues = new Map<string, SerialQueue>();
  /** Allowance already promised to sent-but-unmined trades, per wallet and asset. */
  readonly #inFlight = new Map<string, bigint>();
  #feeCache?: { at: number; fees: Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> };

  constructor(options: TradeAdapterOptions) {
    this.#opts = { receiptTimeoutMs: 120_000, gasHeadroomPercent: 20n, ...options };
    for (const wallet of options.wallets) {
      this.#signers.set(wallet.address.toLowerCase(), { wallet, nonces: new NonceSequencer(wallet.address, options.provider) });
    }
  }

  sell(order: TradeOrder): Promise<TransactionReceipt> {
    return this.#trade("sell", order);
  }

  buy(order: TradeOrder): Promise<TransactionReceipt> {
    return this.#trade("buy", order);
  }

  remittance(order: TradeOrder): Promise<TransactionReceipt> {
    return this.#trade("remittance", order);
  }

  async #trade(kind: TradeKind, order: TradeOrder): Promise<TransactionReceipt> {
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
    const reservation = `${signer.wallet.address}:${spent.address}`.toLowerCase();
    let reserved = false;
    try {
      await this.#reserveAllowance(signer, spent, order.amount, reservation);
      reserved = true;
      const gas = await this.#opts.provider.estimateGas({ from: signer.wallet.address, to: this.#opts.swap, data });
      hash = await this.#sign(signer, { to: this.#opts.swap, data, gasLimit: (gas * (100n + this.#opts.gasHeadroomPercent)) / 100n });
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
    signer: Signer,
    asset: { address: string; symbol: string; decimals: number },
    amount: bigint,
    key: string,
  ): Promise<void> {
    const owner = signer.wallet.address;
    const contract = new Contract(asset.address, ERC20_ABI, this.#opts.provider);
    let queue = this.#allowanceQueues.get(key);
    if (!queue) this.#allowanceQueues.set(key, (queue = new SerialQueue()));
    await queue.run(async () => {
      const [balance, allowance] = (await Promise.all([
        contract.getFunction("balanceOf")(owner),
        contract.getFunction("allowance")(owner, this.#opts.swap),
      ])) as [bigint, bigint];
      const inFlight = this.#inFlight.get(key) ?? 0n;
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

  async #approve(signer: Signer, asset: string, value: bigint): Promise<void> {
    const data = erc20Interface.encodeFunctionData("approve", [this.#opts.swap, value]);
    const gas = await this.#opts.provider.estimateGas({ from: signer.wallet.address, to: asset, data });
    const hash = await this.#sign(signer, { to: asset, data, gasLimit: (gas * 12n) / 10n });
    const receipt = await this.#waitForReceipt(hash);
    if (receipt.status !== 1) throw new TradeRevertedError(`allowance update ${hash} reverted`);
  }

  /** Signs and broadcasts under the wallet's nonce lock; resolves with the transaction hash. */
  #sign(signer: Signer, tx: { to: string; data: string; gasLimit: bigint }): Promise<string> {
    return signer.nonces.send(async (nonce) => {
      const fees = await this.#fees();
      const signed = await signer.wallet.signTransaction({ ...tx, ...fees, type: 2, chainId: this.#opts.chainId, nonce, value: 0n });
      const response = await this.#opts.provider.broadcastTransaction(signed);
      return response.hash;
    });
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
      const receipt = await this.#opts.provider.getTransactionReceipt(hash);
      if (receipt) return receipt;
      if (Date.now() > deadline) {
        throw new ChainUnavailableError(`no receipt for ${hash} within ${this.#opts.receiptTimeoutMs} ms; it may still be mined`);
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
