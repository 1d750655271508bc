import { expect } from "chai";

import {
  ChainUnavailableError,
  IdempotencyInFlightError,
  IdempotencyKeyReusedError,
  InsufficientFundsError,
  InvalidArgumentError,
  TradeExpiredError,
  TradePendingError,
  createUseCases,
  type PricePort,
  type SignedTradeTx,
  type TradeKind,
  type TradeOnChain,
  type TradeOrder,
  type TradePort,
  type TradeResolution,
  type TransactionReceipt,
} from "../../core/index.js";
import { WholeTradePort, type WholeTradeHooks } from "../helpers/whole-trade-port.js";
import { MemoryJournal } from "../helpers/memory-journal.js";
import { CONFIG, USDT, fakeReceipt, request } from "./fixtures.js";

const noPrice: PricePort = { getPrice: () => Promise.reject(new Error("not used")) };

/**
 * A chain stand-in that signs (calling onSigned like the real adapter), then mines.
 * `sent` counts broadcast transactions: a retry must never add one.
 */
class ScriptedChain extends WholeTradePort {
  sent: SignedTradeTx[] = [];
  nonce = 0;
  /** What happens to the next trades. */
  mode: "mine" | "refuse" | "pending" | "hang" | "expire" = "mine";
  /** Lets a trade held in "hang" mode go on. */
  unhang: () => void = () => {};
  /** What resolve() answers, or throws; by default what it mined (confirmed), else pending. */
  resolution: TradeResolution | Error | undefined;
  resolved = 0;
  readonly mined = new Map<string, TransactionReceipt>();

  async resolve(trade: TradeOnChain): Promise<TradeResolution> {
    this.resolved += 1;
    if (this.resolution instanceof Error) throw this.resolution;
    if (this.resolution !== undefined) return this.resolution;
    const receipt = trade.broadcasts.map((b) => this.mined.get(b.hash)).find((r) => r !== undefined);
    return receipt ? { state: "mined", receipt, confirmations: 1, confirmed: true } : { state: "pending" };
  }

  protected async run(_kind: TradeKind, order: TradeOrder, hooks: WholeTradeHooks): Promise<TransactionReceipt> {
    if (this.mode === "refuse") throw new InsufficientFundsError("userAddress: not enough USDT");
    if (this.mode === "hang") await new Promise<void>((resolve) => (this.unhang = resolve));
    const tx: SignedTradeTx = {
      wallet: order.wallet,
      nonce: this.nonce,
      txHash: `0x${this.nonce.toString(16).padStart(64, "0")}`,
      rawTx: "0x02",
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      deadline: 1_900_000_000,
    };
    await hooks.onSigned(tx);
    this.nonce += 1;
    this.sent.push(tx);
    if (this.mode === "pending") throw new TradePendingError(tx.txHash);
    if (this.mode === "expire") throw new TradeExpiredError(tx.deadline, tx.nonce);
    const receipt = { ...fakeReceipt(order), transactionHash: tx.txHash };
    this.mined.set(tx.txHash, receipt);
    return receipt;
  }
}

/** A journal whose discard fails its first `failures` calls, as a database that is briefly unreachable. */
class FlakyDiscards extends MemoryJournal {
  discards = 0;
  constructor(private readonly failures: number) {
    super();
  }
  override async discard(id: string): Promise<void> {
    this.discards += 1;
    if (this.discards <= this.failures) throw new Error("the journal is unreachable");
    return super.discard(id);
  }
}

function setup(inFlightWaitMs = 2_000) {
  const chain = new ScriptedChain();
  const journal = new MemoryJournal();
  const useCases = createUseCases({ trade: chain, price: noPrice, config: CONFIG, journal, inFlightWaitMs });
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
    const records = journal.trades();
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
    chain.unhang();
    const [a, b] = await Promise.all([first, second]);
    expect(b).to.deep.equal(a);
    expect(chain.sent).to.have.length(1);
  });

  it("answers 'in flight' to a retry that outwaits the first request, then the receipt once it is done", async function () {
    const { useCases, chain } = setup(50);
    chain.mode = "hang";
    const first = useCases.buy(request(), A);
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(IdempotencyInFlightError);
    chain.unhang();
    const receipt = await first;
    expect(await useCases.buy(request(), A)).to.deep.equal(receipt);
    expect(chain.sent).to.have.length(1);
  });

  it("forgets a trade refused before signing, so the same key can be retried", async function () {
    const { useCases, chain, journal } = setup();
    chain.mode = "refuse";
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(InsufficientFundsError);
    expect(journal.trades().length).to.equal(0);
    chain.mode = "mine";
    await useCases.buy(request(), A);
    expect(chain.sent).to.have.length(1);
  });

  it("forgets a trade whose transaction was given back after signing (never sent), never answering pending on it", async function () {
    const journal = new MemoryJournal();
    let givenBack = true;
    // Signed and journalled, then its slot released (never sent), then the next round fails.
    class GivingBack extends ScriptedChain {
      protected override async run(kind: TradeKind, order: TradeOrder, hooks: WholeTradeHooks) {
        if (!givenBack) return super.run(kind, order, hooks);
        const tx: SignedTradeTx = {
          wallet: order.wallet,
          nonce: 40,
          txHash: `0x${"40".repeat(32)}`,
          rawTx: "0x02",
          maxFeePerGas: 2n,
          maxPriorityFeePerGas: 1n,
          deadline: 1_900_000_000,
        };
        await hooks.onSigned(tx);
        await journal.releaseSlot(tx.wallet, tx.nonce, tx.txHash);
        throw new ChainUnavailableError("the JSON-RPC node did not answer");
      }
    }
    const chain = new GivingBack();
    const port: TradePort = chain;
    const useCases = createUseCases({ trade: port, price: noPrice, config: CONFIG, journal, inFlightWaitMs: 20 });
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(ChainUnavailableError);
    expect(journal.trades()).to.have.length(0);
    givenBack = false;
    await useCases.buy(request(), A); // the key runs afresh, once
    expect(chain.sent).to.have.length(1);
  });

  it("asks the journal again when it fails to forget a trade refused before signing, so the key is not stuck", async function () {
    const chain = new ScriptedChain();
    const journal = new FlakyDiscards(2);
    const useCases = createUseCases({ trade: chain, price: noPrice, config: CONFIG, journal, inFlightWaitMs: 50 });
    chain.mode = "refuse";
    // The refusal is what the caller gets, not the journal's trouble.
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(InsufficientFundsError);
    expect(journal.discards).to.equal(3);
    expect(journal.trades()).to.have.length(0);
    chain.mode = "mine";
    await useCases.buy(request(), A);
    expect(chain.sent).to.have.length(1);
  });

  it("gives up forgetting after a few tries, still answering the refusal (the record is left to forgetUnsigned)", async function () {
    const chain = new ScriptedChain();
    const journal = new FlakyDiscards(Number.POSITIVE_INFINITY);
    const useCases = createUseCases({ trade: chain, price: noPrice, config: CONFIG, journal, inFlightWaitMs: 50 });
    chain.mode = "refuse";
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(InsufficientFundsError);
    expect(journal.discards).to.be.within(2, 10);
    expect(journal.trades().map((record) => record.status)).to.deep.equal(["accepted"]);
  });

  it("reports a broadcast trade without a receipt as pending, never resends it, and a retry settles it from the chain", async function () {
    const { useCases, chain, journal } = setup(20);
    chain.mode = "pending";
    const pending = await rejection(useCases.buy(request(), A));
    expect(pending).to.be.instanceOf(TradePendingError);
    const txHash = (pending as TradePendingError).txHash;
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(TradePendingError);
    expect(journal.trades()[0]!.status).to.equal("signed");

    const receipt = { ...fakeReceipt({ wallet: request().userAddress } as TradeOrder), transactionHash: txHash };
    chain.resolution = { state: "mined", receipt, confirmations: 1, confirmed: true };
    expect(await useCases.buy(request(), A)).to.deep.equal(receipt);
    expect(journal.trades()[0]).to.deep.include({ status: "confirmed", receipt });
    expect(chain.sent).to.have.length(1);
  });

  it("records a trade mined with too few confirmations as mined, and answers pending until it has them", async function () {
    const { useCases, chain, journal } = setup(20);
    chain.mode = "pending";
    await rejection(useCases.buy(request(), A));
    const receipt = {
      ...fakeReceipt({ wallet: request().userAddress } as TradeOrder),
      transactionHash: chain.sent[0]!.txHash,
    };
    chain.resolution = { state: "mined", receipt, confirmations: 1, confirmed: false };
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(TradePendingError);
    expect(journal.trades()[0]!.status).to.equal("mined");
    chain.resolution = { state: "mined", receipt, confirmations: 3, confirmed: true };
    expect(await useCases.buy(request(), A)).to.deep.equal(receipt);
  });

  it("never answers a retry with a receipt whose block a reorg removed", async function () {
    const { useCases, chain, journal } = setup(20);
    const first = await useCases.buy(request(), A);
    // The block goes: the chain knows the transaction, unmined. (The lifecycle monitor records
    // the reorg in the journal; the retry only must not answer the orphaned receipt.)
    chain.resolution = { state: "pending" };
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(TradePendingError);
    expect((await useCases.trade(chain.sent[0]!.txHash, { scope: A.scope })).status).to.equal("submitted");
    // Mined again, in another block: that receipt is the answer from now on.
    const again = { ...first, blockHash: `0x${"ef".repeat(32)}`, blockNumber: 9 };
    chain.resolution = { state: "mined", receipt: again, confirmations: 1, confirmed: true };
    expect(await useCases.buy(request(), A)).to.deep.equal(again);
    expect(journal.trades()[0]!.receipt).to.deep.equal(again);
    expect(chain.sent).to.have.length(1);
  });

  it("answers a retry of a confirmed trade 'unavailable' when the chain cannot say its block is still canonical", async function () {
    const { useCases, chain } = setup(20);
    const first = await useCases.buy(request(), A);
    chain.resolution = new ChainUnavailableError("the JSON-RPC node did not answer");
    expect(await rejection(useCases.buy(request(), A))).to.be.instanceOf(ChainUnavailableError);
    chain.resolution = { state: "mined", receipt: first, confirmations: 5, confirmed: true };
    expect(await useCases.buy(request(), A)).to.deep.equal(first);
  });

  it("records an expired trade, and answers a retry that it expired with nothing paid", async function () {
    const { useCases, chain, journal } = setup(20);
    chain.mode = "expire";
    const expired = await rejection(useCases.buy(request(), A));
    expect(expired).to.be.instanceOf(TradeExpiredError);
    expect((expired as Error).message).to.match(/not mined before its deadline .* nothing was paid/);
    expect(journal.trades()[0]).to.deep.include({ status: "expired" });
    const retried = await rejection(useCases.buy(request(), A));
    expect(retried).to.have.property("code", "trade_expired");
    expect((retried as Error).message).to.equal((expired as Error).message);
    expect(chain.sent).to.have.length(1);
  });

  it("answers a retry whose nonce another transaction took: dropped, nothing paid", async function () {
    const { useCases, chain, journal } = setup(20);
    chain.mode = "pending";
    await rejection(useCases.buy(request(), A));
    chain.resolution = { state: "dropped" };
    const error = await rejection(useCases.buy(request(), A));
    expect(error).to.have.property("code", "trade_dropped");
    expect((error as Error).message).to.match(
      /nonce 0 of .* was used by a transaction not signed for this trade; nothing was paid/,
    );
    expect(journal.trades()[0]!.status).to.equal("failed");
    // A verdict a later look may correct: the chain is asked again, and it stands while it says so.
    const asked = chain.resolved;
    expect(await rejection(useCases.buy(request(), A))).to.have.property("code", "trade_dropped");
    expect(chain.resolved).to.be.greaterThan(asked);
  });

  it("corrects a trade recorded as dropped once one of its transactions is found mined, on a retry and on GET", async function () {
    const { useCases, chain, journal } = setup(20);
    chain.mode = "pending";
    await rejection(useCases.buy(request(), A));
    chain.resolution = { state: "dropped" };
    expect(await rejection(useCases.buy(request(), A))).to.have.property("code", "trade_dropped");
    // An endpoint had lagged: the transaction is mined after all.
    const receipt = {
      ...fakeReceipt({ wallet: chain.sent[0]!.wallet } as TradeOrder),
      transactionHash: chain.sent[0]!.txHash,
    };
    chain.resolution = { state: "mined", receipt, confirmations: 2, confirmed: true };
    const view = await useCases.trade(chain.sent[0]!.txHash, { scope: A.scope });
    expect(view).to.deep.include({ status: "confirmed", receipt, error: null });
    expect(journal.trades()[0]!.status).to.equal("confirmed");
    expect(await useCases.buy(request(), A)).to.deep.equal(receipt);
    expect(chain.sent).to.have.length(1);
  });

  it("never records a trade failed on one read: a GET of a pending trade whose chain says nothing stays pending", async function () {
    const { useCases, chain, journal } = setup(20);
    chain.mode = "pending";
    await rejection(useCases.buy(request(), A));
    chain.resolution = { state: "pending" };
    const view = await useCases.trade(chain.sent[0]!.txHash, { scope: A.scope });
    expect(view.status).to.equal("signed");
    expect(journal.trades()[0]!.status).to.equal("signed");
  });

  it("answers the journal's view of a trade by any of its hashes, to its own caller only", async function () {
    const { useCases, chain } = setup(20);
    const receipt = await useCases.buy(request(), A);
    chain.resolution = { state: "mined", receipt, confirmations: 4, confirmed: true };
    const view = await useCases.trade(chain.sent[0]!.txHash, { scope: A.scope });
    expect(view).to.deep.include({
      kind: "buy",
      status: "confirmed",
      nonce: 0,
      deadline: 1_900_000_000,
      confirmations: 4,
      receipt,
      error: null,
    });
    expect(view.transactions).to.deep.equal([
      {
        hash: chain.sent[0]!.txHash,
        maxFeePerGas: "2",
        maxPriorityFeePerGas: "1",
        noop: false,
        sentAt: view.transactions[0]!.sentAt,
      },
    ]);
    expect(await rejection(useCases.trade(chain.sent[0]!.txHash, { scope: "caller-b" }))).to.have.property(
      "code",
      "trade_not_found",
    );
    expect(await rejection(useCases.trade(`0x${"11".repeat(32)}`, { scope: A.scope }))).to.have.property(
      "code",
      "trade_not_found",
    );
    const bad = await rejection(useCases.trade("0x1234", { scope: A.scope }));
    expect(bad).to.be.instanceOf(InvalidArgumentError);
    expect((bad as Error).message).to.match(/^transactionHash: /);
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
