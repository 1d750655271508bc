/**
 * Load on the real in-process chain, through the composition root of `npm start`:
 *
 * - with interval mining (CHAIN_BLOCK_TIME_MS=1000), 100 concurrent buys land in at most
 *   3 consecutive blocks: sends are pipelined and never wait for each other's receipts;
 * - with automine, 500 concurrent mixed trades over JSON HTTP and gRPC (@grpc/grpc-js on the
 *   same port) all succeed, and every balance they touch reconciles to the last base unit
 *   with amounts computed here, independently, with BigInt.
 */
import { expect } from "chai";
import { Contract, getAddress, hexlify } from "ethers";

import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import {
  PRICE_1_25,
  erc20,
  randomBigInt,
  startEmbeddedService,
  stableOutFor,
  toDecimalText,
  tokensOutFor,
  type EmbeddedService,
} from "./chain-helpers.js";
import { grpcCall, grpcClient, postJson } from "./helpers.js";
import { seededRandom } from "../../helpers/random.js";

const KEY = "load-api-key-0123456789abcdef";
const SYMBOLS = ["DAI", "USDT", "USDC"] as const;
type Symbol = (typeof SYMBOLS)[number];
const DECIMALS: Record<Symbol, number> = { DAI: 18, USDT: 6, USDC: 6 };
const CUSTOMER = hardhatAccount(2).address;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("interval mining: CHAIN_BLOCK_TIME_MS=1000 (a block every second)", function () {
  let chain: EmbeddedService;

  before(async function () {
    chain = await startEmbeddedService(KEY, { CHAIN_BLOCK_TIME_MS: "1000" });
  });

  after(async function () {
    await chain?.close();
  });

  it("turns automine off only after the deployment, then mines a block every second", async function () {
    const { provider, wallet } = chain;
    expect(await provider.send("hardhat_getAutomine", [])).to.equal(false);
    // The deployment was automined: each of its transactions (the deployer's, then the exchange
    // wallet's approvals) has a block of its own, and the blocks after it are empty.
    const deployment =
      (await provider.getTransactionCount(hardhatAccount(0).address)) + (await provider.getTransactionCount(wallet));
    expect(deployment).to.be.greaterThan(10);
    for (let n = 1; n <= deployment; n++) {
      expect((await provider.getBlock(n))!.transactions, `block ${n}`).to.have.length(1);
    }
    const first = await provider.getBlockNumber();
    for (let n = deployment + 1; n <= first; n++) {
      expect((await provider.getBlock(n))!.transactions, `block ${n}`).to.have.length(0);
    }
    await sleep(3_200);
    const mined = (await provider.getBlockNumber()) - first;
    expect(mined, "empty blocks mined in 3.2 s").to.be.within(2, 4);
  });

  it("100 concurrent buys (DAI, USDT, USDC) complete within a few blocks (at most 5), not one each, one transaction each", async function () {
    const { provider, wallet, service } = chain;
    const coins = service.addresses.stableCoins;
    const nonceBefore = await provider.getTransactionCount(wallet, "pending");
    expect(await provider.getTransactionCount(wallet, "latest"), "nothing pending before the burst").to.equal(
      nonceBefore,
    );
    const startBlock = await provider.getBlockNumber();

    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => {
        const symbol = SYMBOLS[i % 3]!;
        // 1.x to 100.x USD, with all 6 (USDT, USDC) or 18 (DAI) decimals in use.
        const amount = `${1 + i}.${String((i + 1) * 7_919_123_457)
          .padStart(18, "1")
          .slice(0, DECIMALS[symbol])}`;
        return postJson(
          `${service.apiUrl}/api/v1/token/buy`,
          { userAddress: wallet, destinatary: CUSTOMER, amount, usdAddress: coins[symbol] },
          { apiKey: KEY },
        );
      }),
    );
    const elapsedMs = performance.now() - started;

    for (const result of results) {
      expect(result.status, result.text).to.equal(200);
      expect(result.body.status).to.equal(true);
    }
    const blocks = [...new Set(results.map((r) => r.body.blockNumber as number))].sort((a, b) => a - b);
    const hashes = new Set(results.map((r) => r.body.transactionHash as string));
    console.log(
      `      100 buys in ${Math.round(elapsedMs)} ms, blocks ${blocks.join(", ")} ` +
        `(${blocks.map((b) => results.filter((r) => r.body.blockNumber === b).length).join(" + ")} transactions)`,
    );
    expect(hashes.size).to.equal(100);
    expect(blocks[0]!, "mined after the burst started").to.be.greaterThan(startBlock);
    // Pipelined: a few blocks of 1 s (up to 5, for a loaded machine), where trades waiting for
    // each other's receipts would take 100.
    expect(blocks.length, `distinct blocks: ${blocks.join(", ")}`).to.be.at.most(5);
    expect(
      blocks.at(-1)! - blocks[0]!,
      `blocks ${blocks.join(", ")} span more than 5 consecutive blocks`,
    ).to.be.at.most(4);

    // Exactly the 100 buys left the wallet: no allowance top-up (the deployment approved
    // 1,000,000 of each coin) and nothing else.
    expect(await provider.getTransactionCount(wallet, "latest")).to.equal(nonceBefore + 100);
    expect(await provider.getTransactionCount(wallet, "pending")).to.equal(nonceBefore + 100);
    const fromWallet: string[] = [];
    for (let n = startBlock + 1; n <= blocks.at(-1)!; n++) {
      const block = await provider.getBlock(n, true);
      for (const tx of block!.prefetchedTransactions) {
        if (tx.from === wallet) {
          expect(tx.to).to.equal(service.addresses.swap);
          fromWallet.push(tx.hash);
        }
      }
    }
    expect(new Set(fromWallet)).to.deep.equal(hashes);
  });
});

type Kind = "sell" | "buy" | "remittance";
interface PlannedTrade {
  kind: Kind;
  symbol: Symbol;
  /** Tokens (sell) or USD in the coin's base units (buy, remittance). */
  units: bigint;
  amount: string;
  customer: string;
  via: "json" | "grpc";
}

describe("500 concurrent mixed trades over JSON HTTP and gRPC on one port (automine)", function () {
  const SEED = Number(process.env.LOAD_SEED ?? 20_250_605);
  let chain: EmbeddedService;

  before(async function () {
    chain = await startEmbeddedService(KEY, { MAX_SELL_TOKENS: "1000000", MAX_USD: "1000000" });
  });

  after(async function () {
    await chain?.close();
  });

  it("all succeed with distinct transactions, and every balance reconciles to the last base unit", async function () {
    this.timeout(60_000);
    const { provider, wallet, service } = chain;
    const coins = service.addresses.stableCoins;
    const random = seededRandom(SEED);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const context = `(LOAD_SEED=${SEED})`;

    // Customers: two Hardhat accounts and three fresh addresses, some sent in lower case.
    const fresh = Array.from({ length: 3 }, () =>
      getAddress(hexlify(Uint8Array.from({ length: 20 }, () => Math.floor(random() * 256)))),
    );
    const customers = [hardhatAccount(2).address, hardhatAccount(3).address, ...fresh];

    const plan: PlannedTrade[] = Array.from({ length: 500 }, (_, i) => {
      const kind = pick(["sell", "buy", "remittance"] as const);
      const symbol = pick(SYMBOLS);
      const decimals = kind === "sell" ? 18 : DECIMALS[symbol];
      // 0.001 to 300 tokens, 0.01 to 300 DAI, 0.01 to 300 USDT/USDC: random base units, so
      // most amounts use every decimal the currency has.
      const min = kind === "sell" ? 10n ** 15n : 10n ** BigInt(decimals - 2);
      const units = randomBigInt(random, min, 300n * 10n ** BigInt(decimals));
      const amount = toDecimalText(units, decimals, random() < 0.1 ? 1 + Math.floor(random() * 3) : 0);
      const customer = pick(customers);
      return {
        kind,
        symbol,
        units,
        amount,
        customer: random() < 0.2 ? customer.toLowerCase() : customer,
        via: i % 2 === 0 ? "json" : "grpc",
      };
    });

    // Expected changes, computed from the plan alone.
    const price = PRICE_1_25;
    const [chainPrice, priceDecimals] = (await new Contract(
      service.addresses.swap,
      ["function currentPrice() view returns (uint256, uint8)"],
      provider,
    ).getFunction("currentPrice")()) as [bigint, bigint];
    expect([chainPrice, priceDecimals]).to.deep.equal([price, 8n]);

    const assets = { TTK: service.addresses.token, ...coins };
    type Asset = keyof typeof assets;
    const holders = {
      wallet,
      swap: service.addresses.swap,
      ...Object.fromEntries(customers.map((c, i) => [`customer${i}`, c])),
    };
    const expected = new Map<string, bigint>(); // `${holder}:${asset}` → delta
    const add = (holder: string, asset: Asset, delta: bigint) => {
      const key = `${getAddress(holder)}:${asset}`;
      expected.set(key, (expected.get(key) ?? 0n) + delta);
    };
    let supplyDelta = 0n;
    for (const t of plan) {
      if (t.kind === "sell") {
        const out = stableOutFor(t.units, price, DECIMALS[t.symbol]);
        expect(out > 0n, `${t.amount} tokens must pay something`).to.equal(true);
        add(wallet, "TTK", -t.units);
        add(t.customer, t.symbol, out);
        add(service.addresses.swap, t.symbol, -out);
        supplyDelta -= t.units;
      } else {
        const out = tokensOutFor(t.units, price, DECIMALS[t.symbol]);
        expect(out > 0n).to.equal(true);
        add(wallet, t.symbol, -t.units);
        add(service.addresses.swap, t.symbol, t.units);
        add(t.customer, "TTK", out);
        supplyDelta += out;
      }
    }

    const snapshot = async () => {
      const balances = new Map<string, bigint>();
      for (const holder of Object.values(holders)) {
        for (const [asset, address] of Object.entries(assets)) {
          balances.set(`${getAddress(holder)}:${asset}`, await erc20(address, provider).balanceOf(holder));
        }
      }
      return { balances, supply: await erc20(assets.TTK, provider).totalSupply() };
    };
    const before = await snapshot();
    const nonceBefore = await provider.getTransactionCount(wallet, "pending");

    const client = grpcClient(service.apiUrl);
    const path: Record<Kind, string> = {
      sell: "/api/v1/token/sell",
      buy: "/api/v1/token/buy",
      remittance: "/api/v1/remmitance",
    };
    const method = { sell: "Sell", buy: "Buy", remittance: "Remittance" } as const satisfies Record<Kind, string>;
    const started = performance.now();
    const outcomes = await Promise.all(
      plan.map(async (t) => {
        if (t.via === "json") {
          const res = await postJson(
            `${service.apiUrl}${path[t.kind]}`,
            { userAddress: wallet, destinatary: t.customer, amount: t.amount, usdAddress: coins[t.symbol] },
            { apiKey: KEY },
          );
          return {
            t,
            ok: res.status === 200 && res.body?.status === true,
            detail: res.text.slice(0, 300),
            hash: res.body?.transactionHash as string | undefined,
            from: res.body?.from as string | undefined,
            logs: res.body?.events ? Object.keys(res.body.events).length : -1,
          };
        }
        const { response, error } = await grpcCall(
          client,
          method[t.kind],
          { user_address: wallet, destinatary: t.customer, amount: t.amount, usd_address: coins[t.symbol] },
          KEY,
        );
        return {
          t,
          ok: error === undefined && response?.status === true,
          detail: error ? `${error.code} ${error.details}` : "",
          hash: response?.transaction_hash,
          from: response?.from,
          logs: response?.events.length ?? -1,
        };
      }),
    );
    const elapsedMs = performance.now() - started;
    client.close();

    const failed = outcomes.filter((o) => !o.ok);
    expect(
      failed.map((o) => `${o.t.via} ${o.t.kind} ${o.t.amount} ${o.t.symbol}: ${o.detail}`),
      context,
    ).to.deep.equal([]);
    for (const o of outcomes) {
      expect(o.from).to.equal(wallet.toLowerCase());
      expect(o.logs, `${o.t.kind} logs`).to.equal(o.t.kind === "sell" ? 5 : 3);
    }
    expect(new Set(outcomes.map((o) => o.hash)).size, "distinct transaction hashes").to.equal(500);
    // 500 transactions and not one more (no allowance top-up), none left pending.
    expect(await provider.getTransactionCount(wallet, "latest")).to.equal(nonceBefore + 500);
    expect(await provider.getTransactionCount(wallet, "pending")).to.equal(nonceBefore + 500);

    const after = await snapshot();
    const mismatches: string[] = [];
    for (const [key, value] of after.balances) {
      const delta = value - before.balances.get(key)!;
      const want = expected.get(key) ?? 0n;
      if (delta !== want) mismatches.push(`${key}: changed by ${delta}, expected ${want}`);
    }
    expect(mismatches, context).to.deep.equal([]);
    expect(after.supply - before.supply, `token total supply ${context}`).to.equal(supplyDelta);
    // The reconciliation is not vacuous: every customer and every asset moved.
    for (const customer of customers) {
      expect(expected.get(`${customer}:TTK`) ?? 0n, customer).to.be.greaterThan(0n);
    }

    const counts = (via: string) =>
      (["sell", "buy", "remittance"] as const)
        .map((k) => plan.filter((t) => t.via === via && t.kind === k).length)
        .join("/");
    console.log(
      `      500 trades in ${Math.round(elapsedMs)} ms (${Math.round((500 * 1000) / elapsedMs)} trades/s); ` +
        `sell/buy/remittance json ${counts("json")}, grpc ${counts("grpc")}; ${expected.size} balances reconciled ${context}`,
    );
    expect(elapsedMs, "500 trades took too long").to.be.lessThan(45_000);
  });
});
