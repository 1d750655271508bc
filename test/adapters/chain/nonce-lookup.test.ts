/**
 * nonceLookup (adapters/chain/trade/slots.ts): what a trade's receipt waiter learns of its nonce
 * from the ledger. A slot at that nonce that holds none of the trade's own transactions is another
 * transaction's (the trade's slot was released and the nonce used again): it tells the waiter
 * nothing, so a trade is never answered with another's receipt.
 */
import { expect } from "chai";

import { nonceLookup } from "../../../adapters/chain/trade/index.js";
import { MemoryJournal } from "../../../adapters/journal/index.js";

const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const hash = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;

describe("nonceLookup", function () {
  it("gives a waiter the broadcasts of its own slot only, never those of another transaction at its nonce", async function () {
    const journal = new MemoryJournal();
    const { record } = await journal.open({
      scope: "s",
      idempotencyKey: null,
      requestHash: "h",
      kind: "sell",
      request: { userAddress: WALLET, destinatary: WALLET, amount: "1", usdAddress: WALLET },
    });
    await journal.markSigned(record.id, {
      wallet: WALLET,
      nonce: 9,
      txHash: hash(3),
      rawTx: "0x02f803",
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      deadline: 1_900_000_000,
    });
    const own = await nonceLookup(journal, WALLET, 9, hash(3))();
    expect(own.broadcasts?.map((b) => b.hash)).to.deep.equal([hash(3)]);
    // The waiter of a trade whose own slot at 9 was released: trade 3's slot is not its.
    expect(await nonceLookup(journal, WALLET, 9, hash(2))()).to.deep.equal({});
    expect(await nonceLookup(journal, WALLET, 8, hash(2))()).to.deep.equal({});
  });
});
