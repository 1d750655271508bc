/**
 * Quotes on real chains, EDR (the embedded chain) and anvil: a quote's expectedOut is what the
 * trade naming it pays, to the base unit, when the price did not move; a price move beyond the
 * quote's slippage refuses the trade before anything is sent; a used, expired or mismatched
 * quote sends nothing (the exchange wallet's nonce does not move); the issues carry the chain's
 * numbers. The service runs as in production (RPC_URL, DEPLOYMENT_FILE).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { Contract, Interface, JsonRpcProvider, Wallet } from "ethers";
import { pino } from "pino";

import { SWAP_ABI, type DeploymentAddresses } from "../../../adapters/chain/index.js";
import { TYPICAL_TRADE_GAS } from "../../../adapters/chain/price/index.js";
import { startService, type RunningService } from "../../../adapters/main.js";
import { EXCHANGE_ACCOUNT, hardhatAccount, startEmbeddedChain } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil } from "../../helpers/anvil.js";
import { defaultLog, freePort } from "../../helpers/service-defaults.js";
import { postJson, type JsonBody } from "./helpers.js";

const KEY = "quote-chain-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const TTL_MS = 6_000;

interface Node {
  url: string;
  addresses: DeploymentAddresses;
  close(): Promise<void>;
}

const NODES: Array<[string, () => Promise<Node>]> = [
  [
    "EDR",
    async () => {
      const chain = await startEmbeddedChain({ chainPort: 0, log: pino({ level: "silent" }) });
      return { url: chain.rpcUrl, addresses: chain.addresses, close: () => chain.close() };
    },
  ],
  [
    "anvil",
    async () => {
      const anvil = await startAnvil();
      const addresses = await deployOnAnvil(anvil, 0); // no interval mining…
      await anvil.rpc("evm_setAutomine", [true]); // …a block per transaction, as on EDR
      return { url: anvil.url, addresses, close: () => anvil.stop() };
    },
  ],
];

const FEED_ABI = [
  "function updateAnswer(int256 answer)",
  "function updateRoundData(int256 answer, uint256 updatedAt, uint256 startedAt)",
  "function latestRoundData() view returns (uint80, int256, uint256, uint256, uint80)",
];
const ERC20 = ["function balanceOf(address) view returns (uint256)"];

for (const [name, start] of NODES) {
  describe(`quotes on ${name}`, function () {
    this.timeout(120_000);
    let node: Node;
    let service: RunningService;
    let provider: JsonRpcProvider;
    let dir: string;
    let feed: Contract;
    let price: bigint;
    const wallet = hardhatAccount(EXCHANGE_ACCOUNT).address;

    before(async function () {
      node = await start();
      dir = mkdtempSync(join(tmpdir(), "quote-chain-"));
      const file = join(dir, "deployment.json");
      writeFileSync(file, JSON.stringify(node.addresses));
      service = await startService({
        env: {
          RPC_URL: node.url,
          DEPLOYMENT_FILE: file,
          EXCHANGE_PRIVATE_KEYS: hardhatAccount(EXCHANGE_ACCOUNT).privateKey,
          API_KEYS: KEY,
          PORT: "0",
          METRICS_PORT: String(await freePort()),
          DATA_DIR: dir,
          PRICE_CACHE_MS: "0",
          QUOTE_TTL_MS: String(TTL_MS),
          MAX_SELL_TOKENS: "100000000",
        },
        log: defaultLog(),
        rootDir: dir,
      });
      provider = new JsonRpcProvider(node.url, undefined, { staticNetwork: true, cacheTimeout: -1 });
      // Account #0 (the deployer), never the exchange wallet: moving the price moves no nonce of the service's.
      const owner = new Wallet(hardhatAccount(0).privateKey, provider);
      feed = new Contract(node.addresses.feeds.tokenUsd, FEED_ABI, owner);
      price = ((await feed.getFunction("latestRoundData")()) as bigint[])[1]!;
    });

    after(async function () {
      provider?.destroy();
      await service?.close();
      await node?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    afterEach(async function () {
      // Every test starts at the deployment's price, updated now.
      await (await feed.getFunction("updateAnswer")(price)).wait();
    });

    const nonce = () => provider.getTransactionCount(wallet, "pending");
    const balanceOf = (asset: string, holder: string) =>
      new Contract(asset, ERC20, provider).getFunction("balanceOf")(holder) as Promise<bigint>;
    const quote = (body: Record<string, unknown>) =>
      postJson(`${service.apiUrl}/api/v1/token/quote`, body, { apiKey: KEY });
    const trade = (path: string, body: Record<string, unknown>, quoteId: string) =>
      postJson(`${service.apiUrl}${path}`, body, { apiKey: KEY, headers: { "Quote-Id": quoteId } });
    const tradeBody = (amount: string, usdAddress: string) => ({
      userAddress: wallet,
      destinatary: CUSTOMER,
      amount,
      usdAddress,
    });

    it("pays a sell exactly its quote's expectedOut, at the feed round the quote names, within its gas", async function () {
      const usdt = node.addresses.stableCoins.USDT;
      const q: JsonBody = (
        await quote({ kind: "sell", amount: "7.123456789", usdAddress: usdt, destinatary: CUSTOMER })
      ).body;
      expect(q.issues).to.deep.equal([]);
      expect(q.gas.estimated).to.equal(true);
      const [roundId, answer, , updatedAt] = (await feed.getFunction("latestRoundData")()) as bigint[];
      expect(q.price).to.deep.equal({
        usd: (Number(answer) / 1e8).toString(),
        roundId: roundId!.toString(),
        updatedAt: new Date(Number(updatedAt) * 1000).toISOString(),
      });
      const before = await balanceOf(usdt, CUSTOMER);
      const res = await trade("/api/v1/token/sell", tradeBody("7.123456789", usdt), q.quoteId);
      expect(res.status, res.text).to.equal(200);
      expect((await balanceOf(usdt, CUSTOMER)) - before).to.equal(BigInt(q.expectedOut.baseUnits));
      expect(res.body.gasUsed).to.be.at.most(Number(q.gas.units));
      // The calldata carries the quote's minOut, and a deadline no later than its expiry.
      const tx = await provider.getTransaction(res.body.transactionHash);
      const call = new Interface(SWAP_ABI).parseTransaction({ data: tx!.data })!;
      expect(call.args[3]).to.equal(BigInt(q.minOut.baseUnits));
      expect(Number(call.args[4])).to.be.at.most(Math.floor(Date.parse(q.expiresAt) / 1000));
      expect(BigInt(q.gas.units)).to.be.at.most(TYPICAL_TRADE_GAS.sell);
    });

    it("prices the network fee in USD at the native coin's feed, rounded up to a millionth of a dollar", async function () {
      const native = new Contract(node.addresses.feeds.nativeUsd!, FEED_ABI, feed.runner);
      const [, answer] = (await native.getFunction("latestRoundData")()) as bigint[];
      const q: JsonBody = (await quote({ kind: "sell", amount: "1", usdAddress: node.addresses.stableCoins.DAI })).body;
      const fee = BigInt(q.gas.units) * BigInt(q.gas.priceWei);
      expect(q.networkFee.wei).to.equal(fee.toString());
      // wei × (USD per coin at 8 decimals) is USD at 26 decimals: up to 6, rounded up.
      const exact = fee * answer!;
      const micro = (exact + 10n ** 20n - 1n) / 10n ** 20n;
      expect(q.networkFee.usd).to.equal(decimalText(micro, 6));
      expect(micro * 10n ** 20n).to.be.at.least(exact);

      // Older than FEED_MAX_AGE_NATIVE_USD_S (25 h by default): no USD figure, and no issue (it refuses no trade).
      const block = (await provider.getBlock("latest"))!;
      await (
        await native.getFunction("updateRoundData")(answer, block.timestamp - 90_001, block.timestamp - 90_001)
      ).wait();
      try {
        const stale: JsonBody = (await quote({ kind: "sell", amount: "1", usdAddress: node.addresses.stableCoins.DAI }))
          .body;
        expect(stale.networkFee.usd).to.equal(null);
        expect(stale.issues).to.deep.equal([]);
      } finally {
        await (await native.getFunction("updateAnswer")(answer)).wait();
      }
    });

    it("leaves the network fee's USD null for a deployment that names no native-coin feed", async function () {
      const { nativeUsd: _, ...feeds } = node.addresses.feeds;
      const file = join(dir, "deployment-without-native.json");
      writeFileSync(file, JSON.stringify({ ...node.addresses, feeds }));
      const older = await startService({
        env: {
          RPC_URL: node.url,
          DEPLOYMENT_FILE: file,
          EXCHANGE_PRIVATE_KEYS: hardhatAccount(EXCHANGE_ACCOUNT).privateKey,
          API_KEYS: KEY,
          PORT: "0",
          METRICS_PORT: String(await freePort()),
          DATA_DIR: join(dir, "without-native"),
        },
        log: defaultLog(),
        rootDir: dir,
      });
      try {
        const res = await postJson(
          `${older.apiUrl}/api/v1/token/quote`,
          { kind: "buy", amount: "1", usdAddress: node.addresses.stableCoins.USDC },
          { apiKey: KEY },
        );
        expect(res.status, res.text).to.equal(200);
        expect(BigInt(res.body.networkFee.wei)).to.be.greaterThan(0n);
        expect(res.body.networkFee.usd).to.equal(null);
      } finally {
        await older.close();
      }
    });

    it("pays a buy and a remittance exactly their quotes' expectedOut in tokens", async function () {
      const dai = node.addresses.stableCoins.DAI;
      for (const [kind, path] of [
        ["buy", "/api/v1/token/buy"],
        ["remittance", "/api/v1/remmitance"],
      ] as const) {
        const q: JsonBody = (await quote({ kind, amount: "3.333333", usdAddress: dai, destinatary: CUSTOMER })).body;
        expect(q.issues).to.deep.equal([]);
        expect(BigInt(q.gas.units)).to.be.at.most(TYPICAL_TRADE_GAS[kind]);
        const before = await balanceOf(node.addresses.token, CUSTOMER);
        const res = await trade(path, tradeBody("3.333333", dai), q.quoteId);
        expect(res.status, res.text).to.equal(200);
        expect((await balanceOf(node.addresses.token, CUSTOMER)) - before).to.equal(BigInt(q.expectedOut.baseUnits));
      }
    });

    it("refuses the trade before sending when the price moved past the quote's slippage, and nothing is paid", async function () {
      const usdc = node.addresses.stableCoins.USDC;
      const q: JsonBody = (await quote({ kind: "sell", amount: "10", usdAddress: usdc, slippageBps: 50 })).body;
      await (await feed.getFunction("updateAnswer")((price * 99n) / 100n)).wait(); // −1 %
      const [sent, paid] = [await nonce(), await balanceOf(usdc, CUSTOMER)];
      const res = await trade("/api/v1/token/sell", tradeBody("10", usdc), q.quoteId);
      expect(res.status, res.text).to.equal(409);
      expect(res.body.code).to.equal("aborted");
      expect(res.body.message).to.include("(quote_slippage)");
      expect(await nonce()).to.equal(sent);
      expect(await balanceOf(usdc, CUSTOMER)).to.equal(paid);
    });

    it("sends nothing for a used, a mismatched or an expired quote", async function () {
      const usdt = node.addresses.stableCoins.USDT;
      const q: JsonBody = (await quote({ kind: "sell", amount: "1", usdAddress: usdt })).body;
      expect((await trade("/api/v1/token/sell", tradeBody("1", usdt), q.quoteId)).status).to.equal(200);
      const sent = await nonce();
      const used = await trade("/api/v1/token/sell", tradeBody("1", usdt), q.quoteId);
      expect([used.status, used.body.code]).to.deep.equal([409, "already_exists"]);
      const other: JsonBody = (await quote({ kind: "sell", amount: "1", usdAddress: usdt })).body;
      const mismatched = await trade("/api/v1/token/sell", tradeBody("2", usdt), other.quoteId);
      expect([mismatched.status, mismatched.body.message]).to.satisfy(
        ([status, message]: [number, string]) => status === 422 && message.includes("(quote_mismatch)"),
      );
      await new Promise((resolve) => setTimeout(resolve, Date.parse(other.expiresAt) - Date.now() + 50));
      const expired = await trade("/api/v1/token/sell", tradeBody("1", usdt), other.quoteId);
      expect(expired.status, expired.text).to.equal(410);
      expect(await nonce()).to.equal(sent);
    });

    it("lists the wallet's balance and the swap's reserves short, with their numbers, and a typical gas", async function () {
      const usdt = node.addresses.stableCoins.USDT;
      const res = await quote({ kind: "sell", amount: "99999999", usdAddress: usdt });
      expect(res.status, res.text).to.equal(200);
      const byType = Object.fromEntries(res.body.issues.map((issue: JsonBody) => [issue.type, issue]));
      const tokens = await balanceOf(node.addresses.token, wallet);
      expect(byType.balance_short.details).to.deep.include({ asset: "TTK", needed: "99999999" });
      expect(BigInt(byType.balance_short.details.balance.split(".")[0])).to.equal(tokens / 10n ** 18n);
      expect(byType.reserves_short.details).to.deep.include({ asset: "USDT", needed: res.body.expectedOut.value });
      expect(res.body.gas).to.deep.include({ units: TYPICAL_TRADE_GAS.sell.toString(), estimated: false });
    });

    it("lists a stale feed with its age, and still prices the quote as the swap would", async function () {
      const head = (await provider.getBlock("latest"))!.timestamp;
      await (await feed.getFunction("updateRoundData")(price, head - 100_000, head - 100_000)).wait();
      const res = await quote({ kind: "buy", amount: "2", usdAddress: node.addresses.stableCoins.USDC });
      expect(res.status, res.text).to.equal(200);
      const stale = res.body.issues.find((issue: JsonBody) => issue.type === "price_stale");
      expect(stale, JSON.stringify(res.body.issues)).to.not.equal(undefined);
      expect(Number(stale.details.ageSeconds)).to.be.at.least(100_000);
      expect(res.body.expectedOut.baseUnits).to.equal(
        ((2n * 10n ** 6n * 10n ** 18n * 10n ** 8n) / (price * 10n ** 6n)).toString(),
      );
    });
  });
}

/** Base units as plain decimal text, written independently of core's formatUnits. */
function decimalText(units: bigint, decimals: number): string {
  const text = units.toString().padStart(decimals + 1, "0");
  const fraction = text.slice(-decimals).replace(/0+$/, "");
  return `${text.slice(0, -decimals)}${fraction ? `.${fraction}` : ""}`;
}
