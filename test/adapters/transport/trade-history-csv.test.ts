import { expect } from "chai";

import type { TradeView } from "../../../core/index.js";
import { TRADE_CSV_COLUMNS, tradesCsv } from "../../../adapters/transport/json/index.js";

const trade = (error: { code: string; message: string } | null): TradeView => ({
  id: "t1",
  kind: "sell",
  status: error === null ? "confirmed" : "failed",
  apiKeyName: null,
  request: {
    userAddress: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    destinatary: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    amount: "1.5",
    usdAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  },
  wallet: null,
  nonce: null,
  deadline: null,
  transactionHash: null,
  transactions: [],
  confirmations: null,
  receipt: null,
  error,
  createdAt: "2026-11-26T00:00:00.000Z",
  updatedAt: "2026-11-26T00:00:01.000Z",
});

describe("the trade history's CSV", function () {
  it("writes RFC 4180: a header, CRLF lines, quotes doubled inside quoted fields", function () {
    const csv = tradesCsv({
      trades: [trade({ code: "chain_error", message: 'the node said "no", twice' })],
      nextCursor: null,
      figures: [{ stableSymbol: "USDT", amountIn: null, amountOut: null, gasWei: null }],
    });
    const [header, line, end] = csv.split("\r\n");
    expect(header).to.equal(TRADE_CSV_COLUMNS.join(","));
    expect(line).to.contain(",1.5,");
    expect(line).to.match(/,"the node said ""no"", twice",,$/);
    expect(end).to.equal("");
  });

  it("defuses a text a spreadsheet would run as a formula (CSV injection)", function () {
    for (const message of ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tx"]) {
      const csv = tradesCsv({
        trades: [trade({ code: "chain_error", message })],
        nextCursor: null,
        figures: [{ stableSymbol: null, amountIn: null, amountOut: null, gasWei: null }],
      });
      const cells = csv.split("\r\n")[1]!;
      expect(cells, message).to.not.match(/,"?[=+\-@\t]/);
      expect(cells, message).to.match(/,"?'[=+\-@\t]/);
    }
  });
});
