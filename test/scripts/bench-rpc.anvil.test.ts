/**
 * JSON-RPC calls per trade on anvil at 1 s blocks (issue 29), counted as `npm run bench --only rpc`
 * counts them. The goal is 4 per sequential trade and 1.5 in a burst of 50; the limits
 * below hold the service to what it reaches today, so that no change adds calls unnoticed.
 */
import { expect } from "chai";

import { measureRpc, rpcTable } from "../../scripts/bench-rpc.js";

/** Calls per trade the service stays within now; lower them as calls are removed. */
const SEQUENTIAL_LIMIT = 14;
const BURST_LIMIT = 2.5;

describe("JSON-RPC calls per trade on anvil (1 s blocks)", function () {
  this.timeout(180_000);

  it("stays within its budget for sequential sells and for a burst of 50", async function () {
    const result = await measureRpc({ sequential: 10, burst: 50 });
    const table = rpcTable(result);
    expect(result.sequential.calls / result.sequential.trades, table).to.be.at.most(SEQUENTIAL_LIMIT);
    expect(result.burst.calls / result.burst.trades, table).to.be.at.most(BURST_LIMIT);
    // Receipts come from one look per block, not from each trade polling its own.
    expect(result.burst.byMethod.eth_getTransactionReceipt ?? 0, table).to.be.at.most(5);
  });
});
