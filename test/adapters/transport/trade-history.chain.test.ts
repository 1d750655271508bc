/**
 * The trade history end to end on the embedded chain (npm start's composition, a real journal):
 * a few real trades, then GET /api/v1/trades (JSON and CSV), GET /api/v1/trades/summary and
 * ListTrades over gRPC show their exact amounts out and gas, as the chain has them: the amounts
 * from the contract's price formula, the gas from the node's own receipts.
 */
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { expect } from "chai";
import { Contract } from "ethers";

import { TokenService } from "../../../gen/tokentrade/v1/token_pb.js";
import {
  erc20,
  PRICE_1_25,
  stableOutFor,
  startEmbeddedService,
  tokensOutFor,
  type EmbeddedService,
} from "./chain-helpers.js";
import { getJson, postJson, type JsonBody } from "./helpers.js";

const KEY = "history-api-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

describe("the trade history end to end on the embedded chain", function () {
  this.timeout(120_000);
  let s: EmbeddedService;
  /** The trades made, oldest first, with what the chain says of each. */
  const made: Array<{ kind: string; hash: string; out: bigint; gasWei: bigint; stable: string }> = [];

  before(async function () {
    s = await startEmbeddedService(KEY);
    const coins = s.service.addresses.stableCoins;
    const trades = [
      {
        path: "/api/v1/token/sell",
        kind: "sell",
        amount: "250",
        stable: coins.USDT,
        out: stableOutFor(250n * 10n ** 18n, PRICE_1_25, 6),
      },
      {
        path: "/api/v1/token/buy",
        kind: "buy",
        amount: "10.5",
        stable: coins.DAI,
        out: tokensOutFor(105n * 10n ** 17n, PRICE_1_25, 18),
      },
      {
        path: "/api/v1/remmitance",
        kind: "remittance",
        amount: "3.000001",
        stable: coins.USDC,
        out: tokensOutFor(3_000_001n, PRICE_1_25, 6),
      },
      {
        path: "/api/v1/token/sell",
        kind: "sell",
        amount: "0.010000000000000007",
        stable: coins.USDT,
        out: stableOutFor(10n ** 16n + 7n, PRICE_1_25, 6),
      },
    ];
    const usdt = erc20(coins.USDT, s.provider);
    const before = await usdt.balanceOf(CUSTOMER);
    for (const trade of trades) {
      const answer = await postJson(
        `${s.service.apiUrl}${trade.path}`,
        { userAddress: s.wallet, destinatary: CUSTOMER, amount: trade.amount, usdAddress: trade.stable },
        { apiKey: KEY },
      );
      expect(answer.status, answer.text).to.equal(200);
      const onChain = (await s.provider.getTransactionReceipt(answer.body.transactionHash))!;
      made.push({
        kind: trade.kind,
        hash: answer.body.transactionHash,
        out: trade.out,
        gasWei: onChain.gasUsed * onChain.gasPrice,
        stable: trade.stable,
      });
    }
    // The sells' USDT did reach the customer: the formula above is what the chain paid.
    expect((await usdt.balanceOf(CUSTOMER)) - before).to.equal(made[0]!.out + made[3]!.out);
  });

  after(async function () {
    await s?.close();
  });

  it("lists them newest first, each with its receipt, and the CSV gives each amount out and its gas exactly", async function () {
    const list = await getJson(`${s.service.apiUrl}/api/v1/trades`, { apiKey: KEY });
    expect(list.status).to.equal(200);
    expect(list.body.trades.map((t: JsonBody) => t.transactionHash)).to.deep.equal(made.map((m) => m.hash).reverse());
    expect(list.body.trades.map((t: JsonBody) => t.status)).to.satisfy((all: string[]) =>
      all.every((status) => status === "confirmed" || status === "mined"),
    );
    const csv = await fetch(`${s.service.apiUrl}/api/v1/trades?limit=3`, {
      headers: { api_key: KEY, accept: "text/csv" },
    });
    const rows = (await csv.text())
      .trim()
      .split("\r\n")
      .map((line) => line.split(","));
    const column = (name: string) => rows[0]!.indexOf(name);
    expect(rows).to.have.length(4);
    const [smallSell, remittance, buy] = [rows[1]!, rows[2]!, rows[3]!];
    expect(smallSell[column("amountIn")]).to.equal("0.010000000000000007");
    expect(smallSell[column("amountOut")]).to.equal("0.0125"); // the 7 base units were worth less than one of USDT
    expect(remittance[column("amountIn")]).to.equal("3.000001");
    expect(remittance[column("amountOut")]).to.equal(formatUnits18(made[2]!.out));
    expect(buy[column("amountOut")]).to.equal(formatUnits18(made[1]!.out));
    expect(buy[column("gasWei")]).to.equal(made[1]!.gasWei.toString());
    expect(csv.headers.get("link")).to.match(/rel="next"$/);
  });

  it("sums them per kind and stable coin: amounts out and gas as the chain has them, to the base unit and the wei", async function () {
    const { status, body } = await getJson(`${s.service.apiUrl}/api/v1/trades/summary`, { apiKey: KEY });
    expect(status).to.equal(200);
    const group = (kind: string, stable: string) =>
      body.groups.find((g: JsonBody) => g.kind === kind && g.usdAddress === stable.toLowerCase());
    const coins = s.service.addresses.stableCoins;
    const sells = group("sell", coins.USDT);
    expect(sells).to.deep.include({ count: 2, executed: 2, gasWei: (made[0]!.gasWei + made[3]!.gasWei).toString() });
    expect(sells.amountIn).to.deep.equal({ value: "250.010000000000000007", baseUnits: "250010000000000000007" });
    expect(sells.amountOut.baseUnits).to.equal((made[0]!.out + made[3]!.out).toString());
    expect(sells.amountOut.value).to.equal("312.5125");
    const buys = group("buy", coins.DAI);
    expect(buys.amountIn).to.deep.equal({ value: "10.5", baseUnits: "10500000000000000000" });
    expect(buys.amountOut.baseUnits).to.equal(made[1]!.out.toString());
    expect(buys.gasWei).to.equal(made[1]!.gasWei.toString());
    const remittances = group("remittance", coins.USDC);
    expect(remittances.amountOut.baseUnits).to.equal(made[2]!.out.toString());
    expect(body.groups).to.have.length(3);
  });

  it("gives the gas in USD at the native coin's price each trade was signed at, exactly: gasUsed × effectiveGasPrice × price", async function () {
    const native = new Contract(s.service.addresses.feeds.nativeUsd!, FEED_ABI, s.provider);
    const [, answer] = (await native.getFunction("latestRoundData")()) as bigint[];
    expect(answer).to.be.greaterThan(0n);
    // wei (18 decimals) × USD per coin (8 decimals): USD at 26 decimals, as plain decimal text.
    const usd = (gasWei: bigint) => decimalText(gasWei * answer!, 26);
    const { body } = await getJson(`${s.service.apiUrl}/api/v1/trades/summary`, { apiKey: KEY });
    const group = (kind: string) => body.groups.find((g: JsonBody) => g.kind === kind);
    expect(group("sell").gasUsd).to.equal(usd(made[0]!.gasWei + made[3]!.gasWei));
    expect(group("buy").gasUsd).to.equal(usd(made[1]!.gasWei));
    expect(group("remittance").gasUsd).to.equal(usd(made[2]!.gasWei));

    const client = createClient(
      TokenService,
      createConnectTransport({ baseUrl: s.service.apiUrl, httpVersion: "1.1" }),
    );
    const summary = await client.getTradeSummary({}, { headers: { api_key: KEY } });
    expect(summary.groups.find((g) => g.kind === "buy")?.gasUsd).to.equal(usd(made[1]!.gasWei));
  });

  it("answers the same over Connect's gRPC-compatible ListTrades and GetTradeSummary", async function () {
    const client = createClient(
      TokenService,
      createConnectTransport({ baseUrl: s.service.apiUrl, httpVersion: "1.1" }),
    );
    const headers = { api_key: KEY };
    const page = await client.listTrades({ kind: "sell" }, { headers });
    expect(page.trades.map((t) => t.transactionHash)).to.deep.equal([made[3]!.hash, made[0]!.hash]);
    const summary = await client.getTradeSummary({ since: "2000-01-01" }, { headers });
    expect(summary.groups.map((g) => g.gasWei).reduce((a, b) => a + BigInt(b), 0n)).to.equal(
      made.reduce((sum, m) => sum + m.gasWei, 0n),
    );
  });
});

/** Base units as plain decimal text, written independently of core's formatUnits. */
function decimalText(units: bigint, decimals: number): string {
  const text = units.toString().padStart(decimals + 1, "0");
  const fraction = text.slice(-decimals).replace(/0+$/, "");
  return `${text.slice(0, -decimals)}${fraction ? `.${fraction}` : ""}`;
}

const FEED_ABI = ["function latestRoundData() view returns (uint80, int256, uint256, uint256, uint80)"];

/** 18-decimal base units as plain decimal text, written independently of core's formatUnits. */
function formatUnits18(units: bigint): string {
  const text = units.toString().padStart(19, "0");
  const fraction = text.slice(-18).replace(/0+$/, "");
  return `${text.slice(0, -18)}${fraction ? `.${fraction}` : ""}`;
}
