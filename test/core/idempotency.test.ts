import { expect } from "chai";

import {
  IdempotencyInFlightError,
  IdempotencyKeyReusedError,
  InsufficientFundsError,
  InvalidArgumentError,
  TradePendingError,
  createUseCases,
  type PricePort,
  type SignedTrade,
  type TradeHooks,
  type TradeKind,
  type TradeOrder,
  type TradePort,
  type TradeResolution,
  type TransactionReceipt,
} from "../../core/index.js";
import { MemoryJournal } from "../helpers/memory-journal.js";
import { CONFIG, USDT, fakeReceipt, request } from "./fixtures.js";

const noPrice: PricePort = { getPrice: () => Promise.reject(new Error("not used")) };

/**
 * A chain stand-in that signs (calling onSigned like the real adapter), then mines.
 * `sent` counts broadcast transactions: a retry must never add one.
 */
class ScriptedChain implements TradePort {
  sent: SignedTrade[] = [];
  nonce = 0;
  /** What happens to the next trades. */
  mode: "mine" | "refuse" | "pending" | "hang" = "mine";
  release: () => void = () => {};
  /** What resolve() answers for a pending transaction. */
  resolution: TradeResolution = { state: "pending" };

  sell(order: TradeOrder, hooks?: TradeHooks) {
    return this.#run("sell", order, hooks);
  }
  buy(order: TradeOrder, hooks?: TradeHooks) {
    return this.#run("buy", order, hooks);
  }
  remittance(order: TradeOrder, hooks?: TradeHooks) {
    return this.#run("remittance", order, hooks);
  }
  async resolve(): Promise<TradeResolution> {
    return this.resolution;
  }

  async #run(_kind: TradeKind, order: TradeOrder, hooks?: TradeHooks): Promise<TransactionReceipt> {
    if (this.mode === "refuse") throw new InsufficientFundsError("userAddress: not enough USDT");
    if (this.mode === "hang") await new Promise<void>((resolve) => (this.release = resolve));
    const tx = { wallet: order.wallet, nonce: this.nonce, txHash: `0x${this.nonce.toString(16).padStart(64, "0")}`, rawTx: "0x02" };
    await hooks?.onSigned?.(tx);
    this.nonce += 1;
    this.sent.push(tx);
    if (this.mode === "pending") throw new TradePendingError(tx.txHash);
    return { ...fakeReceipt(order), transactionHash: tx.txHash };
  }
}

function setup(inFlightWaitMs = 2_000) {
  const chain = new ScriptedChain();
  const journal = new MemoryJournal();
  const useCases = createUseCases({ trade: chain, price: noPrice, config: CONFIG, journal, inFlightWaitMs, settlementPollMs: 5 });
  return { chain, journal, useCases };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

const A = { scope: "caller-a", idempotencyKey: "order-1" };

describe("trades with a journal and Idempotency-Key", function () {
  it("records every trade, confirmed with its receipt, even without a key", async function () {
    const { useCases, journal, chain } = setup();
    const receipt = await useCases.buy(request());
    await useCases.buy(request());
    expect(chain.sent).to.have.length(2);
    const records = [...journal.records.values()];
    expect(records.map((r) => r.status)).to.deep.equal(["confirmed", "confirmed"]);
    expect(records[0]!.receipt).to.deep.equal(receipt);
    expect(records[0]!.txHash).to.equal(receipt.transactionHash);
    expect(records[0]!.request).to.deep.equal(request());
  });

  it("answers a retry with the same key and body with the first receipt, sending nothing", async function () {
    const { useCases, chain } = setup();
    const first = await useCases.buy(request(), A);
    const second = await useCases.buy(request(), A);
    expect(second).to.deep.equal(first);
    expect(chain.sent).to.have.length(1);
  });

  it("treats the same request spelled differently as the same request", async function () {
    const { useCases, chain } = setup();
    await useCases.buy(request({ amount: "1.5" }), A);
    await useCases.buy(request({ amount: "1.500", usdAddress: USDT.address.toLowerCase() }), A);
    expect(chain.sent).to.have.length(1);
  });

  it("refuses the same key with a different body, sending nothing", async function () {
    const { useCases, chain } = setup();
    await useCases.buy(request(), A);
    expect(await rejection(useCases.buy(request({ amount: "2" }), A))).to.be.instanceOf(IdempotencyKeyReusedError);
    expect(await rejection(useCases.sell(request(), A))).to.be.instanceOf(IdempotencyKeyReusedError);
    expect(chain.sent).to.have.length(1);
  });

  it("scopes keys by caller", async function () {
    const { useCases, chain } = setup();
    await useCases.buy(request(), A);
    await useCases.buy(request(), { ...A, scope: "caller-b" });
    expect(chain.sent).to.have.length(2);
  });

  it("makes a concurrent retry wait for the first request's receipt", async function () {
    const { useCases, chain } = setup();
    chain.mode = "hang";
    const first = useCases.buy(request(), A);
    const second = useCases.buy(request(), A);
    await new Promise((resolve) => setTimeout(resolve, 30));
    chain.release();
    const [a, b] = await Promise.all([first, second]);
    expect(b).to.deep.equal(a);
    expect(chain.sent).to.have.length(1);
  });

  it("answers 'in flight' to a retry that outwaits the first request, then the receipt once it is done", async function () {
    const { useCases, chain } = setup(50);
    chain.mode = "hang";
    const first = useCases.buy(request(), A);
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(IdempotencyInFlightError);
    chain.release();
    const receipt = await first;
    expect(await useCases.buy(request(), A)).to.deep.equal(receipt);
    expect(chain.sent).to.have.length(1);
  });

  it("forgets a trade refused before signing, so the same key can be retried", async function () {
    const { useCases, chain, journal } = setup();
    chain.mode = "refuse";
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(InsufficientFundsError);
    expect(journal.records.size).to.equal(0);
    chain.mode = "mine";
    await useCases.buy(request(), A);
    expect(chain.sent).to.have.length(1);
  });

  it("reports a broadcast trade without a receipt as pending, never resends it, and settles it from the chain", async function () {
    const { useCases, chain, journal } = setup(20);
    chain.mode = "pending";
    const pending = await rejection(useCases.buy(request(), A));
    expect(pending).to.be.instanceOf(TradePendingError);
    const txHash = (pending as TradePendingError).txHash;
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(TradePendingError);

    const receipt = { ...fakeReceipt({ wallet: request().userAddress } as TradeOrder), transactionHash: txHash };
    chain.resolution = { state: "mined", receipt };
    for (let i = 0; i < 100 && [...journal.records.values()][0]!.status !== "confirmed"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await useCases.buy(request(), A)).to.deep.equal(receipt);
    expect(chain.sent).to.have.length(1);
    await useCases.close();
  });

  it("recovers trades a previous run left signed: mined ones are confirmed, dropped ones fail", async function () {
    const { useCases, chain, journal } = setup();
    chain.mode = "pending";
    await rejection(useCases.buy(request(), A));
    await rejection(useCases.buy(request(), { ...A, idempotencyKey: "order-2" }));
    await useCases.close(); // the process "dies" with two trades signed

    const restarted = createUseCases({ trade: chain, price: noPrice, config: CONFIG, journal, settlementPollMs: 5 });
    chain.resolution = { state: "dropped" };
    expect(await restarted.recover()).to.equal(2);
    for (let i = 0; i < 100 && [...journal.records.values()].some((r) => r.status === "signed"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const error = await rejection(restarted.buy(request(), A));
    expect(error).to.have.property("code", "trade_reverted");
    expect((error as Error).message).to.match(/dropped and never mined; nothing was paid/);
    expect(chain.sent).to.have.length(2);
    await restarted.close();
  });

  it("refuses a malformed Idempotency-Key, naming it", async function () {
    const { useCases, chain } = setup();
    for (const key of ["", "has space", "x".repeat(256), "ü"]) {
      const error = await rejection(useCases.buy(request(), { scope: "a", idempotencyKey: key }));
      expect(error).to.be.instanceOf(InvalidArgumentError);
      expect((error as Error).message).to.match(/^Idempotency-Key: /);
    }
    expect(chain.sent).to.have.length(0);
  });

  it("refuses an Idempotency-Key when the service runs without a journal", async function () {
    const chain = new ScriptedChain();
    const useCases = createUseCases({ trade: chain, price: noPrice, config: CONFIG });
    const error = await rejection(useCases.buy(request(), A));
    expect(error).to.be.instanceOf(InvalidArgumentError);
    expect(chain.sent).to.have.length(0);
  });
});
