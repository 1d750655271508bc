import { expect } from "chai";

import { MemoryJournal } from "../helpers/memory-journal.js";
import {
  decodeCursor,
  encodeCursor,
  InvalidArgumentError,
  listTradesUseCase,
  tradeAmounts,
  tradeSummaryUseCase,
  type StableCoin,
  type TransactionReceipt,
} from "../../core/index.js";

const USDT: StableCoin = { symbol: "USDT", address: "0xdAC17F958D2ee523a2206206994597C13D831ec7", decimals: 6 };
const SOLD = "0x08e6c75843825654ebf8e0105264a482dca551d29d3f74f0568861868f59f3b7";
const word = (n: bigint) => n.toString(16).padStart(64, "0");

function receipt(topic: string, amountIn: bigint, amountOut: bigint): TransactionReceipt {
  return {
    blockHash: `0x${"aa".repeat(32)}`,
    blockNumber: 7,
    contractAddress: null,
    cumulativeGasUsed: 1,
    effectiveGasPrice: 3_000_000_007,
    from: "0x",
    gasUsed: 101_234,
    logsBloom: "0x",
    status: true,
    to: "0x",
    transactionHash: `0x${"bb".repeat(32)}`,
    transactionIndex: 0,
    type: "0x2",
    events: {
      0: {
        address: "0x",
        blockHash: "0x",
        blockNumber: 7,
        logIndex: 0,
        removed: false,
        transactionHash: "0x",
        transactionIndex: 0,
        id: "log_00000000",
        returnValues: {},
        signature: null,
        raw: { data: `0x${word(amountIn)}${word(amountOut)}${word(5n)}`, topics: [topic] },
      },
    },
  };
}

async function refusal(promise: Promise<unknown>): Promise<InvalidArgumentError> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).to.be.instanceOf(InvalidArgumentError);
  return error as InvalidArgumentError;
}

/** A coin the swap trades, which could emit a log with the swap's topic in the same transaction. */
const CUSTOMER_COIN = "0xdAC17F958D2ee523a2206206994597C13D831ec7";

describe("the trade history use cases", function () {
  describe("tradeAmounts()", function () {
    it("reads in and out from the swap's event and the gas from the receipt, exactly", function () {
      const big = 2n ** 200n + 1n;
      expect(tradeAmounts(receipt(SOLD, big, 12_345_678n))).to.deep.equal({
        amountIn: big,
        amountOut: 12_345_678n,
        gasWei: 101_234n * 3_000_000_007n,
      });
    });

    it("counts only the swap's own event: a log with its topic from another contract is not the trade", function () {
      const swap = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
      const mined = { ...receipt(SOLD, 7n, 8n), to: swap };
      const log = mined.events[0]!;
      expect(tradeAmounts({ ...mined, events: { 0: { ...log, address: CUSTOMER_COIN } } })).to.deep.include({
        amountIn: null,
        amountOut: null,
      });
      expect(tradeAmounts({ ...mined, events: { 0: { ...log, address: swap.toLowerCase() } } })).to.deep.include({
        amountIn: 7n,
        amountOut: 8n,
      });
    });

    it("gives null amounts when the receipt holds no swap event", function () {
      expect(tradeAmounts(receipt(`0x${"dd".repeat(32)}`, 1n, 2n))).to.deep.include({
        amountIn: null,
        amountOut: null,
      });
    });
  });

  describe("cursors", function () {
    it("round-trip, and anything else is refused as `cursor`", function () {
      const position = { createdAtUs: 1_764_118_781_123_456n, id: "0b9c5a1e-7f3d-4c2a-9e8b-1d2c3b4a5f60" };
      const cursor = encodeCursor(position);
      expect(cursor).to.match(/^[A-Za-z0-9_-]+$/);
      expect(decodeCursor(cursor)).to.deep.equal(position);
      for (const bad of [
        "",
        "!!!",
        `${cursor}A`,
        cursor.slice(0, -2),
        `${cursor}=`,
        btoa("v2.1.x").replace(/=+$/, ""),
        btoa("v1.1.a'b").replace(/=+$/, ""),
        "x".repeat(500),
      ]) {
        expect(() => decodeCursor(bad), bad).to.throw(InvalidArgumentError, /^cursor: /);
      }
    });
  });

  describe("listTrades()", function () {
    let journal: MemoryJournal;
    const list = (query: unknown, scope = "s") => listTradesUseCase(journal, [USDT])(query, { scope });

    beforeEach(async function () {
      journal = new MemoryJournal();
      const request = { userAddress: "0x1", destinatary: "0x2", amount: "250", usdAddress: USDT.address };
      for (let i = 0; i < 3; i++) {
        const { record } = await journal.open({
          scope: "s",
          idempotencyKey: null,
          requestHash: "h",
          kind: "sell",
          request,
        });
        if (i === 0) {
          await journal.markSigned(record.id, {
            wallet: "0x1",
            nonce: 0,
            txHash: `0x${"bb".repeat(32)}`,
            rawTx: "0x02",
            maxFeePerGas: 2n,
            maxPriorityFeePerGas: 1n,
            deadline: 1,
          });
          await journal.markConfirmed(record.id, receipt(SOLD, 250n * 10n ** 18n, 312_500_000n));
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    });

    it("pages newest first with a cursor, items as GET /trades/{hash} shows them, from the journal alone", async function () {
      const first = await list({ limit: "2" });
      expect(first.trades).to.have.length(2);
      expect(first.nextCursor).to.be.a("string");
      const second = await list({ limit: 2, cursor: first.nextCursor });
      expect(second.trades).to.have.length(1);
      expect(second.nextCursor).to.equal(null);
      const confirmed = second.trades[0]!;
      expect(confirmed).to.include({ status: "confirmed", confirmations: null, kind: "sell" });
      expect(Object.keys(confirmed)).to.deep.equal([
        "id",
        "kind",
        "status",
        "apiKeyName",
        "request",
        "wallet",
        "nonce",
        "deadline",
        "transactionHash",
        "transactions",
        "confirmations",
        "receipt",
        "error",
        "createdAt",
        "updatedAt",
      ]);
      expect(second.figures[0]).to.deep.equal({
        stableSymbol: "USDT",
        amountIn: "250",
        amountOut: "312.5",
        gasWei: (101_234n * 3_000_000_007n).toString(),
      });
      expect((await list({}, "someone else")).trades).to.deep.equal([]);
    });

    const refusals: Array<[string, unknown, RegExp]> = [
      ["status", { status: "done" }, /^status: must be one of accepted, signed/],
      ["kind", { kind: "swap" }, /^kind: must be one of sell, buy, remittance/],
      ["since", { since: "yesterday" }, /^since: must be an ISO 8601/],
      ["since", { since: "2026-11-25T10:00:00" }, /^since: must be an ISO 8601/],
      ["since", { since: "2026-02-30" }, /^since: is not a date/],
      ["until", { until: "2026-11-25T24:00:00Z" }, /^until: is not a time/],
      ["since", { since: "2026-11-25T10:00:00.0001Z" }, /^since: must be at most millisecond/],
      ["since", { since: "2026-11-26T00:00:00Z", until: "2026-11-25T00:00:00Z" }, /^since: must not be after until/],
      ["limit", { limit: "0" }, /^limit: must be an integer from 1 to 500/],
      ["limit", { limit: "501" }, /^limit: must be an integer from 1 to 500/],
      ["limit", { limit: "1.5" }, /^limit: /],
      ["limit", { limit: "-1" }, /^limit: /],
      ["limit", { limit: 2.5 }, /^limit: /],
      ["cursor", { cursor: "bm9wZQ" }, /^cursor: /],
      ["page", { page: "2" }, /^page: is not a known field/],
      ["status", { status: ["a"] }, /^status: must be a string/],
    ];
    for (const [field, query, message] of refusals) {
      it(`refuses ${JSON.stringify(query)}, naming ${field}`, async function () {
        const error = await refusal(list(query));
        expect(error.field).to.equal(field);
        expect(error.message).to.match(message);
      });
    }

    it("takes a date, a date-time with an offset, and extra zero digits", async function () {
      expect((await list({ since: "2000-01-01" })).trades).to.have.length(3);
      expect((await list({ until: "2000-01-01T00:00:00.000000+02:00" })).trades).to.have.length(0);
      expect((await list({ since: "2000-01-01T00:00+0100", limit: "500" })).trades).to.have.length(3);
    });
  });

  describe("tradeSummary()", function () {
    it("gives exact decimal strings in the coins' units, base units, gas in wei, and gasUsd null", async function () {
      const journal = new MemoryJournal();
      const request = { userAddress: "0x1", destinatary: "0x2", amount: "1", usdAddress: USDT.address };
      const { record } = await journal.open({
        scope: "s",
        idempotencyKey: null,
        requestHash: "h",
        kind: "buy",
        request,
      });
      await journal.markConfirmed(
        record.id,
        receipt("0xf60945982f79c9cab3a44143350c7546774426e21d7e50ad46cc065e4e5b1182", 1_000_001n, 10n ** 18n + 1n),
      );
      const summary = await tradeSummaryUseCase(journal, [USDT])({ since: "2000-01-01T00:00:00Z" }, { scope: "s" });
      expect(summary).to.deep.equal({
        since: "2000-01-01T00:00:00.000Z",
        until: null,
        groups: [
          {
            kind: "buy",
            usdAddress: USDT.address.toLowerCase(),
            stableSymbol: "USDT",
            count: 1,
            executed: 1,
            amountIn: { value: "1.000001", baseUnits: "1000001" },
            amountOut: { value: "1.000000000000000001", baseUnits: "1000000000000000001" },
            gasWei: (101_234n * 3_000_000_007n).toString(),
            gasUsd: null,
            statuses: { confirmed: 1 },
          },
        ],
      });
      const error = await refusal(tradeSummaryUseCase(journal, [USDT])({ until: "soon" }, { scope: "s" }));
      expect(error.field).to.equal("until");
    });
  });
});
