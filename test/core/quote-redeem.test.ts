import { expect } from "chai";

import {
  QuoteUsedError,
  createUseCases,
  type SignedTradeTx,
  type StoredQuote,
  type TradeKind,
  type TradeOrder,
  type TradePort,
} from "../../core/index.js";
import { MemoryJournal } from "../helpers/memory-journal.js";
import { WholeTradePort, type WholeTradeHooks } from "../helpers/whole-trade-port.js";
import { CONFIG, USDT, WALLET, fakeReceipt, request } from "./fixtures.js";

/**
 * A quote is used by one trade at most, whatever the journal answers: a write that committed
 * but was answered with an error (PostgreSQL's connection lost after COMMIT) must not give a
 * quote back while its trade's signed bytes are in the journal for the monitor to send.
 */
class LostAnswers extends MemoryJournal {
  loseMarkSigned = false;
  loseConsume = false;
  override async markSigned(id: string, tx: SignedTradeTx): Promise<void> {
    await super.markSigned(id, tx);
    if (this.loseMarkSigned) {
      this.loseMarkSigned = false;
      throw new Error("Connection terminated unexpectedly");
    }
  }
  override async consumeQuote(id: string, scope: string, tradeId: string, now: Date): Promise<boolean> {
    const taken = await super.consumeQuote(id, scope, tradeId, now);
    if (this.loseConsume) {
      this.loseConsume = false;
      throw new Error("Connection terminated unexpectedly");
    }
    return taken;
  }
}

/** Signs like the real adapter (onSigned before anything is sent; a rejection sends nothing), then mines. */
function chain(signed: string[]): TradePort {
  let nonce = 0;
  return new (class extends WholeTradePort {
    protected async run(_kind: TradeKind, order: TradeOrder, hooks: WholeTradeHooks) {
      const tx: SignedTradeTx = {
        wallet: order.wallet,
        nonce,
        txHash: `0x${(nonce++).toString(16).padStart(64, "0")}`,
        rawTx: "0x02",
        maxFeePerGas: 2n,
        maxPriorityFeePerGas: 1n,
        deadline: 1_900_000_000,
      };
      await hooks.onSigned(tx);
      signed.push(tx.txHash);
      return { ...fakeReceipt(order), transactionHash: tx.txHash };
    }
    async resolve() {
      return { state: "pending" as const };
    }
  })();
}

describe("a quote named by a trade", () => {
  let journal: LostAnswers;
  let signed: string[];
  let useCases: ReturnType<typeof createUseCases>;
  const quote = (): StoredQuote => ({
    id: `q_${"a".repeat(32)}`,
    scope: "key",
    kind: "sell",
    wallet: WALLET,
    destinatary: null,
    stable: USDT.address,
    amount: 15n * 10n ** 17n,
    minOut: 1n,
    expiresAt: new Date(Date.now() + 30_000),
    createdAt: new Date(),
    tradeId: null,
  });

  beforeEach(async () => {
    journal = new LostAnswers();
    signed = [];
    useCases = createUseCases({
      trade: chain(signed),
      price: { getPrice: () => Promise.reject(new Error("not used")) },
      config: CONFIG,
      journal,
      inFlightWaitMs: 50,
      quotes: journal,
      quote: { quote: () => Promise.reject(new Error("not used")) },
      wallets: [WALLET],
    });
    await journal.saveQuote(quote());
  });

  it("stays used when its trade's signing was written but answered with an error", async () => {
    journal.loseMarkSigned = true;
    await useCases.sell(request(), { scope: "key", quoteId: quote().id }).catch(() => {});
    // The signed bytes are journalled: the lifecycle monitor sends them.
    expect(journal.trades().filter((t) => t.status === "signed")).to.have.length(1);
    expect((await journal.getQuote(quote().id))?.tradeId).to.not.equal(null);
    const second = await useCases.sell(request(), { scope: "key", quoteId: quote().id }).then(
      () => "executed",
      (error: unknown) => error,
    );
    expect(second).to.be.instanceOf(QuoteUsedError);
    expect(journal.trades().filter((t) => t.txHash !== null)).to.have.length(1);
  });

  it("is given back when it was taken but the answer was lost, since nothing was signed", async () => {
    journal.loseConsume = true;
    await useCases.sell(request(), { scope: "key", quoteId: quote().id }).then(
      () => expect.fail("the first trade cannot know it holds the quote"),
      () => {},
    );
    expect(signed).to.have.length(0);
    expect((await journal.getQuote(quote().id))?.tradeId).to.equal(null);
    await useCases.sell(request(), { scope: "key", quoteId: quote().id });
    expect(signed).to.have.length(1);
  });
});
