/**
 * JSON-RPC calls per trade on anvil at 1 s blocks (issue 29), counted as `npm run bench --only rpc`
 * counts them, with the service's RPC_URL an http:// and then a ws:// endpoint.
 *
 * The goal, at most 4 calls per sequential trade and 1.5 per trade in a burst of 50, is
 * held over a WebSocket endpoint, where new heads are pushed (eth_subscribe newHeads). Over HTTP a
 * sequential trade's floor is 4 (its proof, its send, one head poll and one eth_getBlockReceipts
 * for the block that mines it), and the priority fee read every 30 s and the odd second head poll
 * land on some windows: that figure is held to 4.5.
 */
import { expect } from "chai";

import { measureRpc, rpcTable } from "../../scripts/bench-rpc.js";

const GOAL = { sequential: 4, burst: 1.5 };
/** Over HTTP: the floor of 4, and the occasional tip refresh or second poll (see above). */
const HTTP_SEQUENTIAL_LIMIT = 4.5;

describe("JSON-RPC calls per trade on anvil (1 s blocks)", function () {
  this.timeout(240_000);

  it("stays within the goal over a WebSocket endpoint, and near its floor over HTTP", async function () {
    const result = await measureRpc({ sequential: 10, burst: 50 });
    const table = rpcTable(result);
    const perTrade = (window: { calls: number; trades: number }) => window.calls / window.trades;
    expect(result.ws, table).to.not.equal(undefined);
    expect(perTrade(result.ws!.sequential), table).to.be.at.most(GOAL.sequential);
    expect(perTrade(result.ws!.burst), table).to.be.at.most(GOAL.burst);
    expect(perTrade(result.sequential), table).to.be.at.most(HTTP_SEQUENTIAL_LIMIT);
    expect(perTrade(result.burst), table).to.be.at.most(GOAL.burst);
    // Receipts come from one look per block, not from each trade polling its own.
    expect(result.burst.byMethod.eth_getTransactionReceipt ?? 0, table).to.be.at.most(5);
    // Over a WebSocket the heads are pushed: no head poll while subscribed.
    expect(result.ws!.sequential.byMethod.eth_getBlockByNumber ?? 0, table).to.be.at.most(1);
  });
});
