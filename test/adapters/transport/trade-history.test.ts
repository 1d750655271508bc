import { createHash } from "node:crypto";

import { Code, createClient } from "@connectrpc/connect";
import { expect } from "chai";

import { MemoryJournal } from "../../../adapters/journal/index.js";
import type { TradeKind, TransactionReceipt } from "../../../core/index.js";
import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  API_KEY,
  CUSTOMER,
  DAI,
  failure,
  getJson,
  grpcCall,
  grpcClient,
  OTHER_KEY,
  HTTP1_TRANSPORTS,
  startTestServer,
  USDT,
  WALLET,
  type JsonBody,
  type TestServer,
} from "./helpers.js";

/** The scope the service gives API_KEY (api-key.ts): the first 16 bytes of its SHA-256, hex. */
const SCOPE = createHash("sha256").update(API_KEY).digest("hex").slice(0, 32);

const TOPICS: Record<TradeKind, string> = {
  sell: "0x08e6c75843825654ebf8e0105264a482dca551d29d3f74f0568861868f59f3b7",
  buy: "0xf60945982f79c9cab3a44143350c7546774426e21d7e50ad46cc065e4e5b1182",
  remittance: "0x815a3929b4e3699c2c23c3b6aa1c7db13cbc0f96af3adb09b751ca3270d40c53",
};
const word = (n: bigint) => n.toString(16).padStart(64, "0");

function swapReceipt(kind: TradeKind, nonce: number, amountIn: bigint, amountOut: bigint): TransactionReceipt {
  const hash = `0x${nonce.toString(16).padStart(64, "c")}`;
  return {
    blockHash: `0x${"aa".repeat(32)}`,
    blockNumber: 100 + nonce,
    contractAddress: null,
    cumulativeGasUsed: 200_000,
    effectiveGasPrice: 1_875_000_007,
    from: WALLET.toLowerCase(),
    gasUsed: 90_000 + nonce,
    logsBloom: `0x${"00".repeat(256)}`,
    status: true,
    to: "0x000000000000000000000000000000000000c0de",
    transactionHash: hash,
    transactionIndex: 0,
    type: "0x2",
    events: {
      0: {
        address: "0x000000000000000000000000000000000000C0DE",
        blockHash: `0x${"aa".repeat(32)}`,
        blockNumber: 100 + nonce,
        logIndex: 0,
        removed: false,
        transactionHash: hash,
        transactionIndex: 0,
        id: "log_00000000",
        returnValues: {},
        signature: null,
        raw: { data: `0x${word(amountIn)}${word(amountOut)}${word(1n)}`, topics: [TOPICS[kind]] },
      },
    },
  };
}

describe("the trade history (GET /api/v1/trades, /api/v1/trades/summary, ListTrades, GetTradeSummary)", function () {
  let t: TestServer;
  let journal: MemoryJournal;
  /** The trades API_KEY made, oldest first: a confirmed sell, a confirmed buy, a failed remittance with a comma and quotes in its error. */
  let ids: string[];

  before(async function () {
    journal = new MemoryJournal();
    t = await startTestServer({ journal });
    const specs = [
      { kind: "sell", amount: "250", usd: USDT.address, paid: [250n * 10n ** 18n, 312_500_000n] },
      { kind: "buy", amount: "10.5", usd: DAI.address, paid: [105n * 10n ** 17n, 84n * 10n ** 17n] },
      { kind: "remittance", amount: "3", usd: USDT.address, paid: null },
    ] as const;
    ids = [];
    for (const [i, spec] of specs.entries()) {
      const request = { userAddress: WALLET, destinatary: CUSTOMER, amount: spec.amount, usdAddress: spec.usd };
      const { record } = await journal.open({
        scope: SCOPE,
        idempotencyKey: null,
        requestHash: "h",
        kind: spec.kind,
        request,
      });
      ids.push(record.id);
      if (spec.paid) {
        const receipt = swapReceipt(spec.kind, i + 1, spec.paid[0], spec.paid[1]);
        await journal.markSigned(record.id, {
          wallet: WALLET,
          nonce: i,
          txHash: receipt.transactionHash,
          rawTx: "0x02",
          maxFeePerGas: 2n,
          maxPriorityFeePerGas: 1n,
          deadline: 2_000_000_000,
        });
        await journal.markConfirmed(record.id, receipt);
      } else {
        await journal.markFailed(record.id, {
          code: "trade_reverted",
          message: 'trade would revert: "Swap", paused\nagain',
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    // Another key's trade: never listed for API_KEY.
    await journal.open({
      scope: createHash("sha256").update(OTHER_KEY).digest("hex").slice(0, 32),
      idempotencyKey: null,
      requestHash: "h",
      kind: "sell",
      request: { userAddress: WALLET, destinatary: CUSTOMER, amount: "1", usdAddress: USDT.address },
    });
  });

  after(async function () {
    await t?.close();
  });

  describe("over JSON", function () {
    it("lists the caller's trades newest first, each as GET /api/v1/trades/{hash} shows it", async function () {
      const { status, body } = await getJson(`${t.url}/api/v1/trades`);
      expect(status).to.equal(200);
      expect(body.trades.map((trade: JsonBody) => trade.id)).to.deep.equal([...ids].reverse());
      expect(body.nextCursor).to.equal(null);
      const sell = body.trades[2];
      // The lookup asks the chain, which has it mined with 3 confirmations; the list does not ask.
      const resolve = t.trade.resolve;
      t.trade.resolve = async () => ({ state: "mined", receipt: sell.receipt, confirmations: 3, confirmed: true });
      const single = await getJson(`${t.url}/api/v1/trades/${sell.transactionHash}`);
      t.trade.resolve = resolve;
      expect(single.body.confirmations).to.equal(3);
      expect(Object.keys(sell)).to.deep.equal(Object.keys(single.body));
      expect({ ...sell, confirmations: null, updatedAt: null }).to.deep.equal({
        ...single.body,
        confirmations: null,
        updatedAt: null,
      });
      expect(sell.confirmations).to.equal(null);
    });

    it("pages with the cursor, and filters by status, kind and time", async function () {
      const first = await getJson(`${t.url}/api/v1/trades?limit=2`);
      expect(first.body.trades).to.have.length(2);
      const second = await getJson(`${t.url}/api/v1/trades?limit=2&cursor=${first.body.nextCursor}`);
      expect(second.body.trades.map((trade: JsonBody) => trade.id)).to.deep.equal([ids[0]]);
      expect(second.body.nextCursor).to.equal(null);
      const confirmed = await getJson(`${t.url}/api/v1/trades?status=confirmed`);
      expect(confirmed.body.trades.map((trade: JsonBody) => trade.id)).to.deep.equal([ids[1], ids[0]]);
      const buys = await getJson(`${t.url}/api/v1/trades?kind=buy&status=confirmed`);
      expect(buys.body.trades.map((trade: JsonBody) => trade.id)).to.deep.equal([ids[1]]);
      const future = encodeURIComponent(new Date(Date.now() + 60_000).toISOString());
      expect((await getJson(`${t.url}/api/v1/trades?since=${future}`)).body.trades).to.deep.equal([]);
      expect((await getJson(`${t.url}/api/v1/trades?until=${future}`)).body.trades).to.have.length(3);
    });

    it("shows another key none of them", async function () {
      const { body } = await getJson(`${t.url}/api/v1/trades`, { apiKey: OTHER_KEY });
      expect(body.trades).to.have.length(1);
      expect(body.trades[0].id).to.not.be.oneOf(ids);
    });

    it("answers the same page as CSV for Accept: text/csv, the next page in a Link header", async function () {
      const response = await fetch(`${t.url}/api/v1/trades?limit=2&status=`, {
        headers: { api_key: API_KEY, accept: "text/csv" },
      });
      expect(response.status).to.equal(200);
      expect(response.headers.get("content-type")).to.equal("text/csv; charset=utf-8; header=present");
      const text = await response.text();
      const lines = text.split("\r\n");
      expect(lines[0]).to.equal(
        "id,createdAt,updatedAt,kind,status,userAddress,destinatary,usdAddress,stableSymbol,amount,amountIn,amountOut,gasWei,transactionHash,wallet,nonce,blockNumber,errorCode,errorMessage,approvedBy,rejectedBy",
      );
      expect(lines[1]).to.match(
        new RegExp(
          `^${ids[2]},[^,]+,[^,]+,remittance,failed,${WALLET},${CUSTOMER},${USDT.address},USDT,3,,,,,,,,trade_reverted,"trade would revert: ""Swap"", paused\nagain",,$`,
        ),
      );
      expect(lines[2]).to.match(
        new RegExp(
          `^${ids[1]},[^,]+,[^,]+,buy,confirmed,${WALLET},${CUSTOMER},${DAI.address},DAI,10.5,10.5,8.4,${(90_002n * 1_875_000_007n).toString()},0x[0-9c]{63}2,${WALLET},1,102,,,,$`,
        ),
      );
      expect(lines.at(-1)).to.equal("");
      const link = response.headers.get("link");
      expect(link).to.match(/^<\/api\/v1\/trades\?limit=2&status=&cursor=[A-Za-z0-9_-]+>; rel="next"$/);
      const next = await fetch(`${t.url}${/<([^>]+)>/.exec(link!)![1]}`, {
        headers: { api_key: API_KEY, accept: "text/csv" },
      });
      const nextLines = (await next.text()).split("\r\n");
      expect(nextLines).to.have.length(3);
      expect(nextLines[1]).to.match(new RegExp(`^${ids[0]},.*,sell,confirmed,.*,USDT,250,250,312.5,`));
      expect(next.headers.get("link")).to.equal(null);
    });

    it("sums per kind and stable coin, exactly, at /api/v1/trades/summary (not a hash lookup)", async function () {
      const { status, body } = await getJson(`${t.url}/api/v1/trades/summary?since=2000-01-01T00:00:00Z`);
      expect(status).to.equal(200);
      expect(body).to.deep.equal({
        since: "2000-01-01T00:00:00.000Z",
        until: null,
        groups: [
          {
            kind: "buy",
            usdAddress: DAI.address.toLowerCase(),
            stableSymbol: "DAI",
            count: 1,
            executed: 1,
            amountIn: { value: "10.5", baseUnits: "10500000000000000000" },
            amountOut: { value: "8.4", baseUnits: "8400000000000000000" },
            gasWei: (90_002n * 1_875_000_007n).toString(),
            gasUsd: null, // signed without the native coin's price
            statuses: { confirmed: 1 },
          },
          {
            kind: "remittance",
            usdAddress: USDT.address.toLowerCase(),
            stableSymbol: "USDT",
            count: 1,
            executed: 0,
            amountIn: { value: "0", baseUnits: "0" },
            amountOut: { value: "0", baseUnits: "0" },
            gasWei: "0",
            gasUsd: "0", // nothing executed: nothing spent, in wei or USD
            statuses: { failed: 1 },
          },
          {
            kind: "sell",
            usdAddress: USDT.address.toLowerCase(),
            stableSymbol: "USDT",
            count: 1,
            executed: 1,
            amountIn: { value: "250", baseUnits: "250000000000000000000" },
            amountOut: { value: "312.5", baseUnits: "312500000" },
            gasWei: (90_001n * 1_875_000_007n).toString(),
            gasUsd: null,
            statuses: { confirmed: 1 },
          },
        ],
      });
    });

    const refusals: Array<[string, string]> = [
      ["/api/v1/trades?status=done", "status: "],
      ["/api/v1/trades?kind=swap", "kind: "],
      ["/api/v1/trades?since=yesterday", "since: "],
      ["/api/v1/trades?until=2026-13-01", "until: "],
      ["/api/v1/trades?since=2026-11-26&until=2026-11-25", "since: must not be after until"],
      ["/api/v1/trades?limit=0", "limit: "],
      ["/api/v1/trades?limit=501", "limit: "],
      ["/api/v1/trades?limit=ten", "limit: "],
      ["/api/v1/trades?cursor=abc", "cursor: "],
      ["/api/v1/trades?status=mined&status=failed", "status: is given more than once"],
      ["/api/v1/trades?offset=10", "offset: is not a known field"],
      ["/api/v1/trades/summary?since=now", "since: "],
      ["/api/v1/trades/summary?limit=5", "limit: is not a known field"],
    ];
    for (const [path, message] of refusals) {
      it(`refuses ${path} with 400 naming the field`, async function () {
        const { status, body } = await getJson(`${t.url}${path}`);
        expect(status).to.equal(400);
        expect(body.code).to.equal("invalid_argument");
        expect(body.message).to.satisfy((m: string) => m.startsWith(message));
      });
    }

    it("needs the api_key, and answers 405 to a POST", async function () {
      expect((await getJson(`${t.url}/api/v1/trades`, { apiKey: null })).status).to.equal(401);
      expect((await getJson(`${t.url}/api/v1/trades/summary`, { apiKey: null })).status).to.equal(401);
      expect((await getJson(`${t.url}/api/v1/trades`, { method: "POST" })).status).to.equal(405);
    });
  });

  describe("over gRPC (grpc-js)", function () {
    it("lists with ListTrades and pages with next_cursor; bad filters are INVALID_ARGUMENT", async function () {
      const client = grpcClient(t.url);
      try {
        const first = await grpcCall(client, "ListTrades", { limit: 2 }, API_KEY);
        const page = first.response as JsonBody;
        expect(page.trades.map((trade: JsonBody) => trade.id)).to.deep.equal([ids[2], ids[1]]);
        expect(page.trades[1]).to.include({
          kind: "buy",
          status: "confirmed",
          transaction_hash: `0x${"2".padStart(64, "c")}`,
        });
        expect(page.trades[1].receipt.gas_used).to.equal("90002");
        const second = (await grpcCall(client, "ListTrades", { limit: 2, cursor: page.next_cursor }, API_KEY))
          .response as JsonBody;
        expect(second.trades.map((trade: JsonBody) => trade.id)).to.deep.equal([ids[0]]);
        expect(second.next_cursor).to.equal(undefined);
        const bad = await grpcCall(client, "ListTrades", { status: "done" }, API_KEY);
        expect(bad.error?.code).to.equal(3); // INVALID_ARGUMENT
        expect(bad.error?.details).to.match(/^status: /);
        const summary = (await grpcCall(client, "GetTradeSummary", {}, API_KEY)).response as JsonBody;
        expect(summary.groups.map((g: JsonBody) => [g.kind, g.count, g.amount_out.value, g.gas_wei])).to.deep.equal([
          ["buy", "1", "8.4", (90_002n * 1_875_000_007n).toString()],
          ["remittance", "1", "0", "0"],
          ["sell", "1", "312.5", (90_001n * 1_875_000_007n).toString()],
        ]);
        expect(summary.groups[0].gas_usd).to.equal(undefined);
        expect((await grpcCall(client, "ListTrades", {}, undefined)).error?.code).to.equal(16); // UNAUTHENTICATED
      } finally {
        client.close();
      }
    });
  });

  for (const [name, transport] of HTTP1_TRANSPORTS) {
    describe(`over ${name}`, function () {
      it("lists, pages, sums and refuses as gRPC does", async function () {
        const client = createClient(TokenService, transport(t.url));
        const withKey = { headers: { api_key: API_KEY } };
        const first = await client.listTrades({ limit: 1, kind: "sell" }, withKey);
        expect(first.trades.map((trade) => trade.id)).to.deep.equal([ids[0]]);
        expect(first.nextCursor).to.equal(undefined);
        const all = await client.listTrades({ limit: 2 }, withKey);
        const rest = await client.listTrades({ limit: 2, cursor: all.nextCursor ?? "" }, withKey);
        expect([...all.trades, ...rest.trades].map((trade) => trade.id)).to.deep.equal([...ids].reverse());
        const summary = await client.getTradeSummary({ until: new Date(Date.now() + 60_000).toISOString() }, withKey);
        expect(summary.groups.find((g) => g.kind === "sell")?.amountIn).to.deep.include({
          value: "250",
          baseUnits: "250000000000000000000",
        });
        const bad = await failure(client.listTrades({ limit: 501 }, withKey));
        expect(bad.code).to.equal(Code.InvalidArgument);
        expect(bad.rawMessage).to.match(/^limit: /);
        const badSummary = await failure(client.getTradeSummary({ since: "x" }, withKey));
        expect(badSummary.code).to.equal(Code.InvalidArgument);
      });
    });
  }
});
