/**
 * Issue 37, item 2: a spending limit holds across instances and under concurrency. Two service
 * processes (`npm start`'s entry point, production mode, its defaults) on one PostgreSQL journal
 * and one exchange wallet on anvil read the same ACCESS_FILE: one trader key, one limit of
 * 1005 USD a day for that key. Each gets 100 buys and remittances at once (5 to 15 USD each, in
 * DAI, USDT and USDC, to three customers): about twice the cap.
 *
 * Judged on the chain, not on the answers alone: what the exchange wallet paid (the stable-coin
 * Transfer logs from it, each matched to its trade) is exactly the admitted trades' USD and never
 * more than the cap; the customers got exactly those trades' tokens; the admitted total fills
 * the cap to within one trade (below the smallest refused trade, in fact: nothing frees room
 * within the window); the wallet sent exactly one transaction per admitted trade (its nonce) and
 * none reverted. Every refusal is 429 resource_exhausted naming the limit, with Retry-After.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { ZeroAddress, getAddress, zeroPadValue } from "ethers";
import pg from "pg";

import type { DeploymentAddresses } from "../../../adapters/chain/index.js";
import { hardhatAccount } from "../../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../../helpers/anvil.js";
import { startInstance, type Instance } from "../../helpers/anvil-service.js";
import { startPostgres, type TestPostgres } from "../../helpers/postgres.js";
import { seededRandom } from "../../helpers/random.js";
import { freePort } from "../../helpers/service-defaults.js";
import { PRICE_1_25, tokensOutFor } from "./chain-helpers.js";
import { postJson } from "./helpers.js";

const KEY = "pgrace-desk-key-0123456789abcdef";
const LIMIT = "desk daily";
/** The cap, in cents: 1005 USD. */
const CAP_CENTS = 100_500n;
const PER_INSTANCE = 100;
const MIN_CENTS = 500;
const MAX_CENTS = 1500;
const EXCHANGE = hardhatAccount(1);
const CUSTOMERS = [2, 3, 4].map((n) => hardhatAccount(n).address);
const SYMBOLS = ["DAI", "USDT", "USDC"] as const;
const DECIMALS = { DAI: 18, USDT: 6, USDC: 6 } as const;
const TRANSFER = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

interface Order {
  instance: number;
  kind: "buy" | "remittance";
  symbol: (typeof SYMBOLS)[number];
  destinatary: string;
  cents: bigint;
}

interface Log {
  address: string;
  topics: string[];
  data: string;
  transactionHash: string;
}

interface Receipt {
  from: string;
  status: string;
  transactionHash: string;
}

const centsText = (cents: bigint) => `${cents / 100n}.${(cents % 100n).toString().padStart(2, "0")}`;
/** A USD amount as the service writes it ("998.5", "1005") in cents. */
const cents = (text: string) => {
  const [whole, fraction = ""] = text.split(".");
  expect(fraction.length, text).to.be.at.most(2);
  return BigInt(whole!) * 100n + BigInt(fraction.padEnd(2, "0"));
};
/** The order's amount in its coin's base units (what the wallet pays). */
const baseUnits = (order: Order) => order.cents * 10n ** BigInt(DECIMALS[order.symbol] - 2);
const sum = (values: bigint[]) => values.reduce((a, b) => a + b, 0n);

/** 100 orders per instance, interleaved, of random sizes, coins, kinds and customers. */
function orders(seed: number): Order[] {
  const random = seededRandom(seed);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  return Array.from({ length: 2 * PER_INSTANCE }, (_, i) => ({
    instance: i % 2,
    kind: pick(["buy", "remittance"] as const),
    symbol: pick(SYMBOLS),
    destinatary: pick(CUSTOMERS),
    cents: BigInt(MIN_CENTS + Math.floor(random() * (MAX_CENTS - MIN_CENTS + 1))),
  }));
}

describe("a spending limit across two instances on one PostgreSQL journal, under concurrency (anvil)", function () {
  this.timeout(240_000);
  let anvil: Anvil;
  let postgres: TestPostgres;
  let dir: string;
  let addresses: DeploymentAddresses;
  const instances: Instance[] = [];

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "access-limits-"));
    [anvil, postgres] = await Promise.all([startAnvil({ blockTime: 1 }), startPostgres()]);
    addresses = await deployOnAnvil(anvil, 1000);
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    const sha256 = createHash("sha256").update(KEY).digest("hex");
    writeFileSync(
      join(dir, "access.json"),
      JSON.stringify({
        keys: [{ name: "desk", sha256, roles: ["trader"] }],
        limits: [{ name: LIMIT, per: "key", window: "24h", maxUsd: centsText(CAP_CENTS) }],
      }),
    );
    // npm start's defaults otherwise: metrics, access logs, receipts waited for 120 s. The per-key
    // rate limit is off by default (RATE_LIMIT_RPS=0) and 100 connections from one address are
    // under the default 256, so none refuses 100 concurrent trades of one key: nothing is overridden.
    const env = {
      RPC_URL: anvil.url,
      DEPLOYMENT_FILE: join(dir, "deployment.json"),
      EXCHANGE_PRIVATE_KEYS: EXCHANGE.privateKey,
      ACCESS_FILE: join(dir, "access.json"),
      JOURNAL_URL: postgres.url,
      PORT: "0",
    };
    for (let i = 0; i < 2; i++) instances.push(await startInstance({ ...env, METRICS_PORT: String(await freePort()) }));
  });

  after(async function () {
    for (const instance of instances) instance.child.kill("SIGKILL");
    await anvil?.stop();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const hex = (n: number) => `0x${n.toString(16)}`;
  const nonce = async (tag: string) =>
    Number(await anvil.rpc<string>("eth_getTransactionCount", [EXCHANGE.address, tag]));
  const blockNumber = async () => Number(await anvil.rpc<string>("eth_blockNumber"));
  const tokenBalance = async (holder: string) =>
    BigInt(
      await anvil.rpc<string>("eth_call", [
        { to: addresses.token, data: `0x70a08231${zeroPadValue(holder, 32).slice(2)}` },
        "latest",
      ]),
    );
  /** The Transfer logs of `address` in blocks (from, to] whose `from` topic is `sender`. */
  const transfers = (address: string | string[], sender: string, [from, to]: [number, number]) =>
    anvil.rpc<Log[]>("eth_getLogs", [
      { fromBlock: hex(from + 1), toBlock: hex(to), address, topics: [TRANSFER, zeroPadValue(sender, 32)] },
    ]);

  /** The receipts of the transactions the exchange wallet sent in blocks (from, to]. */
  async function walletReceipts([from, to]: [number, number]): Promise<Receipt[]> {
    const sent: Receipt[] = [];
    for (let n = from + 1; n <= to; n++) {
      const receipts = await anvil.rpc<Receipt[]>("eth_getBlockReceipts", [hex(n)]);
      sent.push(...receipts.filter((receipt) => getAddress(receipt.from) === EXCHANGE.address));
    }
    return sent;
  }

  function send(order: Order) {
    const path = order.kind === "buy" ? "/api/v1/token/buy" : "/api/v1/remmitance";
    const body = {
      userAddress: EXCHANGE.address,
      destinatary: order.destinatary,
      amount: centsText(order.cents),
      usdAddress: addresses.stableCoins[order.symbol],
    };
    return postJson(`${instances[order.instance]!.apiUrl}${path}`, body, { apiKey: KEY });
  }

  /**
   * Each answer a mined receipt (admitted, by its transaction) or the limit's refusal, which
   * names the limit, what it had used (returned, in cents) and this trade, and when it frees.
   */
  function judge(all: Order[], answers: Awaited<ReturnType<typeof send>>[], at: string) {
    const admitted = new Map<string, Order>();
    const refused: Array<{ order: Order; used: bigint }> = [];
    answers.forEach((answer, i) => {
      const order = all[i]!;
      if (answer.status === 200) {
        expect(answer.body.status, `${at}: trade ${i} answered 200 with a failed receipt`).to.equal(true);
        admitted.set(answer.body.transactionHash, order);
        return;
      }
      expect(answer.status, `${at}: trade ${i}: ${answer.text}`).to.equal(429);
      expect(answer.body.code, answer.text).to.equal("resource_exhausted");
      const words = new RegExp(
        `^spending limit "${LIMIT}" \\(per key desk, rolling 24h\\): ([0-9.]+) of 1005 USD used, this trade counts ([0-9.]+) USD;`,
      ).exec(answer.body.message);
      expect(words, answer.text).to.not.equal(null);
      const used = cents(words![1]!);
      expect(cents(words![2]!), answer.text).to.equal(order.cents);
      expect(used + order.cents > CAP_CENTS, `${at}: refused with room for it: ${answer.text}`).to.equal(true);
      // Nothing leaves the 24 h window during the test: room frees in about a day.
      expect(Number(answer.headers.get("retry-after")), answer.text).to.be.within(86_000, 86_400);
      refused.push({ order, used });
    });
    expect(admitted.size + refused.length, `${at}: distinct transactions`).to.equal(all.length);
    return { admitted, refused };
  }

  /** The limit's counter in the journal, in USD × 10^18. */
  async function journalUsed(): Promise<bigint> {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ usd: string }>(
        "SELECT usd::text FROM spend_counters WHERE per = 'key' AND value = 'desk'",
      );
      return BigInt(rows[0]?.usd ?? "0");
    } finally {
      await client.end();
    }
  }

  it("admits at most the cap in all, fills it to within one trade, and sends nothing for a refusal", async function () {
    const seed = Math.floor(Math.random() * 2 ** 32);
    const all = orders(seed);
    const at = `seed ${seed}`;
    const fromBlock = await blockNumber();
    const nonceBefore = await nonce("latest");
    const balancesBefore = await Promise.all(CUSTOMERS.map(tokenBalance));

    const started = Date.now();
    const answers = await Promise.all(all.map(send));
    const tookMs = Date.now() - started;
    const { admitted, refused } = judge(all, answers, at);
    const admittedOrders = [...admitted.values()];
    const admittedCents = sum(admittedOrders.map((order) => order.cents));
    const perInstance = [0, 1].map((n) => admittedOrders.filter((order) => order.instance === n).length);
    console.log(
      `      ${at}: ${admitted.size} admitted (${perInstance.join(" + ")}), ${centsText(admittedCents)} of ` +
        `${centsText(CAP_CENTS)} USD, ${refused.length} refused, answered in ${tookMs} ms`,
    );

    // Every transaction the wallet sent since is one of the admitted trades, mined, not reverted.
    const blocks: [number, number] = [fromBlock, await blockNumber()];
    expect(await nonce("latest"), `${at}: the wallet's nonce`).to.equal(nonceBefore + admitted.size);
    expect(await nonce("pending"), `${at}: nothing left pending`).to.equal(nonceBefore + admitted.size);
    const sent = await walletReceipts(blocks);
    expect(sent.map((receipt) => receipt.transactionHash).sort(), at).to.deep.equal([...admitted.keys()].sort());
    const reverted = sent.filter((receipt) => receipt.status !== "0x1").map((receipt) => receipt.transactionHash);
    expect(reverted, `${at}: reverted`).to.deep.equal([]);

    // What the wallet paid: one stable-coin Transfer to the swap per admitted trade, of its coin and amount.
    const coins = SYMBOLS.map((symbol) => addresses.stableCoins[symbol]);
    const paid = await transfers(coins, EXCHANGE.address, blocks);
    expect(paid, `${at}: stable-coin transfers from the wallet`).to.have.length(admitted.size);
    let paidCents = 0n;
    for (const log of paid) {
      const order = admitted.get(log.transactionHash);
      expect(order, `${at}: a payment of no admitted trade, ${log.transactionHash}`).to.not.equal(undefined);
      expect(getAddress(log.address)).to.equal(getAddress(addresses.stableCoins[order!.symbol]));
      expect(getAddress(`0x${log.topics[2]!.slice(26)}`)).to.equal(getAddress(addresses.swap));
      expect(BigInt(log.data), `${at}: ${log.transactionHash}`).to.equal(baseUnits(order!));
      paidCents += BigInt(log.data) / 10n ** BigInt(DECIMALS[order!.symbol] - 2);
    }
    expect(paidCents, `${at}: paid in all`).to.equal(admittedCents);
    expect(paidCents <= CAP_CENTS, `${at}: paid ${centsText(paidCents)} USD, over the cap`).to.equal(true);

    // What the customers got: the admitted trades' tokens (minted), to the base unit.
    expect(await transfers(addresses.token, ZeroAddress, blocks), `${at}: token mints`).to.have.length(admitted.size);
    const balancesAfter = await Promise.all(CUSTOMERS.map(tokenBalance));
    CUSTOMERS.forEach((customer, c) => {
      const theirs = admittedOrders.filter((order) => order.destinatary === customer);
      const expected = sum(theirs.map((order) => tokensOutFor(baseUnits(order), PRICE_1_25, DECIMALS[order.symbol])));
      expect(balancesAfter[c]! - balancesBefore[c]!, `${at}: tokens of ${customer}`).to.equal(expected);
    });

    // Filled to within one trade: room only shrinks within the window, so no refused trade fits in
    // what is left, which is below the smallest refused trade (and so below 15 USD, the largest).
    expect(refused.length, `${at}: demand exceeds the cap`).to.be.greaterThan(0);
    const room = CAP_CENTS - admittedCents;
    for (const { order, used } of refused) {
      const message = `${at}: ${centsText(room)} USD left, a ${centsText(order.cents)} USD trade refused`;
      expect(room < order.cents, message).to.equal(true);
      expect(used <= admittedCents, `${at}: refused at ${centsText(used)} USD used`).to.equal(true);
    }
    expect(room < BigInt(MAX_CENTS), at).to.equal(true);
    expect(perInstance, `${at}: each instance admitted some`).to.satisfy((counts: number[]) => counts.every(Boolean));
    expect(await journalUsed(), `${at}: the journal's counter`).to.equal(admittedCents * 10n ** 16n);
  });
});
