/**
 * Nothing the exchange wallet sends can revert, on an independent node (anvil): every scenario
 * here once sent a transaction that could not succeed (gas burned), stalled a trade behind
 * someone else's transaction, or signed a trade again while its first transaction could still
 * be mined. Each ends with the wallet's mined transactions checked: none reverted.
 *
 * - what a pending trade spends stays reserved after its 504, across a restart and across
 *   instances on one PostgreSQL journal, for the wallet's balance and the swap's reserves;
 * - an allowance top-up never lands between a proven trade and its execution;
 * - a quote too close to its expiry for the chain's block time is refused, never signed;
 * - a transaction of someone else's pending at the wallet's next nonce costs a trade a block or
 *   two, not its receipt timeout;
 * - an endpoint that does not answer keeps a trade's nonce "unknown": never signed again.
 */
import { expect } from "chai";
import { Interface, JsonRpcProvider, Wallet, id, parseUnits } from "ethers";

import { assembleTrades, createRpcProvider, rawKeySigner } from "../../../../adapters/chain/index.js";
import { MemoryJournal } from "../../../../adapters/journal/index.js";
import { tradeWithoutJournal, type Address, type TradeOrder, type TradePort } from "../../../../core/index.js";
import { hardhatAccount } from "../../../../scripts/embedded-chain/chain.js";
import { startPostgres, type TestPostgres } from "../../../helpers/postgres.js";
import {
  EXCHANGE,
  GWEI,
  balanceOf,
  outcome,
  pendingHash,
  realChain,
  sleep,
  type RealChain,
} from "../../../helpers/real-chain.js";
import { startRpcProxy, type RpcCall, type RpcProxy } from "../../../helpers/rpc-proxy.js";
import { waitFor } from "../../../helpers/wait.js";

const erc20 = new Interface(["function transfer(address,uint256)", "function approve(address,uint256)"]);
/** The swap's paid-out events: Sold, Bought and Remitted. */
const PAID_TOPICS = ["Sold", "Bought", "Remitted"].map((name) =>
  id(`${name}(address,address,address,uint256,uint256,uint256)`),
);
const DEPLOYER = hardhatAccount(0);
const USDC = (whole: string) => parseUnits(whole, 6);

/** Sends `data` to `to` from `key`'s account (the exchange wallet's key, or the deployer's), mined. */
async function sendAs(chain: RealChain, key: string, to: string, data: string): Promise<void> {
  const provider = new JsonRpcProvider(chain.anvil.url, undefined, { staticNetwork: true, cacheTimeout: -1 });
  try {
    const tx = await new Wallet(key, provider).sendTransaction({ to, data });
    const receipt = await tx.wait();
    expect(receipt?.status, "the test's own transaction").to.equal(1);
  } finally {
    provider.destroy();
  }
}

/** Leaves the exchange wallet `whole` USDC (the rest goes to the deployer), before any trade. */
async function leaveWalletUsdc(chain: RealChain, whole: string): Promise<void> {
  const usdc = chain.addresses.stableCoins.USDC;
  const extra = (await balanceOf(chain.anvil, usdc, EXCHANGE.address)) - USDC(whole);
  await sendAs(chain, EXCHANGE.privateKey, usdc, erc20.encodeFunctionData("transfer", [DEPLOYER.address, extra]));
}

/** Leaves the swap `whole` USDC of reserves (the admin withdraws the rest). */
async function leaveSwapUsdc(chain: RealChain, whole: string): Promise<void> {
  const usdc = chain.addresses.stableCoins.USDC;
  const extra = (await balanceOf(chain.anvil, usdc, chain.addresses.swap)) - USDC(whole);
  const data = new Interface(["function withdrawReserves(address,address,uint256)"]).encodeFunctionData(
    "withdrawReserves",
    [usdc, DEPLOYER.address, extra],
  );
  await sendAs(chain, DEPLOYER.privateKey, chain.addresses.swap, data);
}

/** A gate a test holds something at: `entered` once something waits at it, `opened` once `open()` is called. */
function gate() {
  let enter: () => void = () => {};
  let open: () => void = () => {};
  const entered = new Promise<void>((resolve) => (enter = resolve));
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { enter, entered, open, opened };
}

/** How many of the swap's paid-out events (Sold, Bought, Remitted) name `destinatary` since the test began. */
async function paymentsTo(chain: RealChain, destinatary: string): Promise<number> {
  const logs = await chain.anvil.rpc<Array<{ topics: string[] }>>("eth_getLogs", [
    {
      fromBlock: `0x${chain.startBlock.toString(16)}`,
      toBlock: "latest",
      address: chain.addresses.swap,
      topics: [PAID_TOPICS],
    },
  ]);
  return logs.filter((log) => `0x${log.topics[2]!.slice(26)}`.toLowerCase() === destinatary.toLowerCase()).length;
}

/** The nonce a mined or pending transaction was signed at. */
async function nonceOf(chain: RealChain, hash: string): Promise<number> {
  const tx = await chain.anvil.rpc<{ nonce: string }>("eth_getTransactionByHash", [hash]);
  return Number(tx.nonce);
}

describe("nothing the wallet sends can revert (anvil, 1 s blocks)", function () {
  this.timeout(180_000);
  let chain: RealChain | undefined;
  let postgres: TestPostgres | undefined;
  const proxies: RpcProxy[] = [];

  afterEach(async function () {
    await chain?.close();
    chain = undefined;
    for (const proxy of proxies.splice(0)) await proxy.close();
  });

  after(async function () {
    await postgres?.stop();
  });

  describe("what a pending trade spends stays reserved until it is final", function () {
    /**
     * Buy A (80 of the wallet's 100 USDC) left pending, its 504 answered; then buy B (80) on the
     * service `next` gives (default: the same one).
     */
    async function pendingThenSecond(
      env: Record<string, string> = {},
      next: () => Promise<RealChain["service"]> = async () => chain!.service,
    ) {
      chain = await realChain(env);
      await leaveWalletUsdc(chain, "100");
      await chain.pause();
      const first = pendingHash(await chain.post("token/buy", { amount: "80" }, { "idempotency-key": "buy-a" }));
      const service = await next();
      const pending = await chain.nonce("pending");
      const second = await chain.post("token/buy", { amount: "80" }, {}, service);
      return { first, pending, second, service };
    }

    /** Buy A is mined once blocks resume, and answered on `service`; nothing the wallet sent reverted. */
    async function firstIsMined(firstHash: string, service: RealChain["service"]) {
      await chain!.resume();
      const done = await outcome(
        () => chain!.post("token/buy", { amount: "80" }, { "idempotency-key": "buy-a" }, service),
        "buy A",
      );
      expect(done.status, done.text).to.equal(200);
      expect(done.body.transactionHash).to.equal(firstHash);
      expect(await chain!.reverted(), "reverted transactions of the wallet").to.deep.equal([]);
    }

    it("refuses a buy the wallet's balance covers only without a buy still pending after its 504", async function () {
      const { first, pending, second, service } = await pendingThenSecond();
      expect(second.status, second.text).to.equal(400);
      expect(second.body.code).to.equal("failed_precondition");
      expect(second.body.message).to.match(/holds 100\.0 USDC \(80\.0 already committed\), the trade needs 80\.0/);
      expect(await chain!.nonce("pending"), "nothing was signed").to.equal(pending);
      await firstIsMined(first, service);
    });

    it("keeps the pending buy's reservation across a restart of the service", async function () {
      const { first, pending, second, service } = await pendingThenSecond({}, async () => {
        await chain!.service.close();
        return chain!.another();
      });
      expect(second.status, second.text).to.equal(400);
      expect(second.body.message).to.match(/holds 100\.0 USDC \(80\.0 already committed\)/);
      expect(await chain!.nonce("pending"), "nothing was signed").to.equal(pending);
      await firstIsMined(first, service);
    });

    it("counts another instance's pending buy on one PostgreSQL journal", async function () {
      postgres ??= await startPostgres();
      const { first, pending, second, service } = await pendingThenSecond({ JOURNAL_URL: postgres.url }, () =>
        chain!.another(),
      );
      expect(second.status, second.text).to.equal(400);
      expect(second.body.message).to.match(/holds 100\.0 USDC \(80\.0 already committed\)/);
      expect(await chain!.nonce("pending"), "nothing was signed").to.equal(pending);
      await firstIsMined(first, service);
    });

    it("refuses a sell the swap's reserves cover only without a sell still pending after its 504", async function () {
      chain = await realChain();
      await leaveSwapUsdc(chain, "100");
      await chain.pause();
      // 64 tokens at 1.25 USD pay out 80 USDC.
      const first = pendingHash(await chain.sell("sell-a", { amount: "64" }));
      const pending = await chain.nonce("pending");
      const second = await chain.sell(undefined, { amount: "64" });
      expect(second.status, second.text).to.equal(400);
      expect(second.body.message).to.match(/the swap's reserves hold 100\.0 USDC \(80\.0 already committed/);
      expect(await chain.nonce("pending"), "nothing was signed").to.equal(pending);
      await chain.resume();
      const done = await outcome(() => chain!.sell("sell-a", { amount: "64" }), "sell A");
      expect(done.status, done.text).to.equal(200);
      expect(done.body.transactionHash).to.equal(first);
      expect(await chain.reverted()).to.deep.equal([]);
    });
  });

  for (const coin of ["DAI", "USDT"] as const) {
    it(`tops a short ${coin} allowance up without a proven trade executing behind a reset`, async function () {
      // The trade adapter on anvil, so that trade A can be held between its reservation and its
      // signing (its feed check waits on a gate) while trade B tops the allowance up.
      chain = await realChain();
      await chain.service.close();
      const stable = chain.addresses.stableCoins[coin];
      const decimals = coin === "DAI" ? 18 : 6;
      const unit = parseUnits("1", decimals);
      // The swap may spend 100 of the wallet's coin: buys of 60 and 60 need a top-up.
      if (coin === "USDT")
        await sendAs(
          chain,
          EXCHANGE.privateKey,
          stable,
          erc20.encodeFunctionData("approve", [chain.addresses.swap, 0n]),
        );
      await sendAs(
        chain,
        EXCHANGE.privateKey,
        stable,
        erc20.encodeFunctionData("approve", [chain.addresses.swap, 100n * unit]),
      );
      const provider = createRpcProvider(chain.anvil.url);
      const { trade, lifecycle } = assembleTrades({
        provider,
        chainId: BigInt(await chain.anvil.rpc<string>("eth_chainId")),
        wallets: [rawKeySigner(EXCHANGE.privateKey)],
        swap: chain.addresses.swap,
        token: { address: chain.addresses.token, symbol: "TTK" },
        journal: new MemoryJournal(),
        receiptTimeoutMs: 20_000,
      });
      // Trade A is held between its reservation and its signing, until `open()`.
      const held = gate();
      let signings = 0;
      const port: TradePort = {
        prove: (order) => trade.prove(order),
        reserve: (proven) => trade.reserve(proven),
        sign: async (reserved, options) => {
          if (signings++ === 0) {
            held.enter();
            await held.opened;
          }
          return trade.sign(reserved, options);
        },
        send: (signed) => trade.send(signed),
        abandon: (signed, error) => trade.abandon(signed, error),
        settle: (sent) => trade.settle(sent),
        release: (reserved) => trade.release(reserved),
        resolve: (onChain) => trade.resolve(onChain),
        blockTimeMs: () => trade.blockTimeMs(),
      };
      try {
        const order = (destinatary: Address): TradeOrder => ({
          kind: "buy" as const,
          wallet: EXCHANGE.address as Address,
          destinatary,
          amount: 60n * unit,
          stable: { symbol: coin, address: stable as Address, decimals },
        });
        await chain.pause();
        const nonce = await chain.nonce("pending");
        // A reserves 60 of the 100, proven on the old allowance, and waits before it is signed.
        const a = tradeWithoutJournal(port, order("0x00000000000000000000000000000000000000a1"));
        a.catch(() => {});
        await held.entered;
        await sleep(500);
        // B finds the allowance short and tops it up (DAI: its approval waits in the pool; USDT:
        // the reset waits for A to be signed first).
        const b = tradeWithoutJournal(port, order("0x00000000000000000000000000000000000000b2"));
        b.catch(() => {});
        await sleep(1_500);
        if (coin === "DAI") expect(await chain.nonce("pending"), "the approval sent").to.equal(nonce + 1);
        else expect(await chain.nonce("pending"), "no reset before A is signed").to.equal(nonce);
        held.open();
        await sleep(1_000);
        await chain.resume();
        const [doneA, doneB] = await Promise.allSettled([a, b]);
        expect(doneA.status, String((doneA as PromiseRejectedResult).reason)).to.equal("fulfilled");
        expect(doneB.status, String((doneB as PromiseRejectedResult).reason)).to.equal("fulfilled");
        expect(await chain.reverted(), "reverted transactions of the wallet").to.deep.equal([]);
      } finally {
        await lifecycle.stop();
        provider.destroy();
      }
    });
  }

  it("refuses a quote with less time left than two of the chain's blocks, and signs nothing", async function () {
    // Blocks every 6 s: the service measures the chain's block time from the heads it reads.
    chain = await realChain({ QUOTE_TTL_MS: "20000", RECEIPT_TIMEOUT_MS: "15000" }, { blockTimeMs: 6_000 });
    const quote = async () => {
      const answer = await chain!.post("token/quote", { kind: "buy", amount: "5" });
      expect(answer.status, answer.text).to.equal(200);
      return answer.body as { quoteId: string; expiresAt: string };
    };
    const early = await quote();
    // Redeemed at once, with 20 s left, more than two blocks: mined before its deadline.
    const mined = await chain.post("token/buy", { amount: "5" }, { "quote-id": early.quoteId });
    expect(mined.status, mined.text).to.equal(200);

    const late = await quote();
    const pending = await chain.nonce("pending");
    // 8 s before its expiry: more than the fixed 3 s, less than two 6 s blocks.
    await sleep(Date.parse(late.expiresAt) - Date.now() - 8_000);
    const refused = await chain.post("token/buy", { amount: "5" }, { "quote-id": late.quoteId });
    expect(refused.status, refused.text).to.equal(410);
    expect(refused.body.message).to.match(/a trade needs at least 1\d\.\d s to be mined before it .*\(quote_expired\)/);
    expect(await chain.nonce("pending"), "nothing was signed").to.equal(pending);
    expect(await chain.reverted()).to.deep.equal([]);
  });

  it("signs a trade again at the next nonce a block after someone else's pending transaction at its nonce is mined", async function () {
    chain = await realChain({ RECEIPT_TIMEOUT_MS: "12000" });
    const first = await chain.post("token/buy", { amount: "1" });
    expect(first.status, first.text).to.equal(200); // the service now holds the next nonce
    await chain.pause();
    const nonce = await chain.nonce("pending");
    // The wallet's key used elsewhere: a transfer at that nonce, with a tip the service does not match.
    const outsider = await new Wallet(EXCHANGE.privateKey).signTransaction({
      type: 2,
      chainId: Number(await chain.anvil.rpc<string>("eth_chainId")),
      nonce,
      to: EXCHANGE.address,
      value: 0n,
      gasLimit: 21_000n,
      maxFeePerGas: 200n * GWEI,
      maxPriorityFeePerGas: 50n * GWEI,
    });
    const outsiderHash = await chain.anvil.rpc<string>("eth_sendRawTransaction", [outsider]);
    const started = Date.now();
    const buy = chain.post("token/buy", { amount: "2" });
    await sleep(500);
    await chain.resume();
    const answer = await buy;
    const tookMs = Date.now() - started;
    expect(answer.status, answer.text).to.equal(200);
    expect(await nonceOf(chain, outsiderHash)).to.equal(nonce);
    expect(await nonceOf(chain, answer.body.transactionHash), "signed again at the next nonce").to.equal(nonce + 1);
    console.log(`      a trade behind someone else's transaction at its nonce: answered in ${tookMs} ms`);
    expect(await chain.reverted()).to.deep.equal([]);
  });

  it("refuses a trade proven on a block above the fee cap though its node's head reads still answer the block before", async function () {
    // The service's endpoint answers its head reads from a stale view (the block before the
    // latest), while its calls run on the latest block: the trade's proof runs on the spiked one.
    const base = await realChain();
    const stale = await startRpcProxy(base.anvil.url);
    proxies.push(stale);
    await base.service.close();
    chain = base;
    const service = await chain.another({ RPC_URL: stale.url, MAX_FEE_PER_GAS_GWEI: "50" });
    const first = await chain.post("token/sell", { amount: "2" }, {}, service);
    expect(first.status, first.text).to.equal(200);
    await chain.pause();
    // From now on the endpoint answers "latest" with the head as it is now.
    let frozen: unknown;
    stale.rewrite((call, result) => {
      if (call.method !== "eth_getBlockByNumber" || call.params?.[0] !== "latest") return result;
      frozen ??= result;
      return frozen;
    });
    await fetch(stale.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["latest", false] }),
    });
    const pending = await chain.nonce("pending");
    await chain.anvil.rpc("anvil_setNextBlockBaseFeePerGas", [`0x${(100n * GWEI).toString(16)}`]);
    await chain.anvil.rpc("evm_mine", []);
    await sleep(1_100); // past the fee oracle's reuse of a head read (1 s)
    const refused = await chain.post("token/sell", { amount: "2" }, {}, service);
    expect(refused.status, refused.text).to.equal(503);
    expect(refused.body.message).to.match(
      /base fee is [\d.]+ gwei, above this service's cap of 50 gwei; nothing was sent/,
    );
    expect(await chain.nonce("pending"), "nothing was signed").to.equal(pending);
    expect(await chain.reverted()).to.deep.equal([]);
  });

  it("never signs a trade again while an endpoint that may hold it is silent, though another says its nonce is taken", async function () {
    // Two endpoints on one anvil. The first takes the send and loses its answer, then answers
    // nothing; the second takes it too and answers 502, and is wrong: its chain is a nonce ahead
    // and knows none of the trade's hashes.
    const base = await realChain(); // the suite deployed; the service on it is not used
    const { anvil } = base;
    const first = await startRpcProxy(anvil.url);
    const wrong = await startRpcProxy(anvil.url);
    proxies.push(first, wrong);
    await base.service.close();
    chain = base;
    const service = await chain.another({ RPC_URL: `${first.url},${wrong.url}`, RECEIPT_TIMEOUT_MS: "20000" });
    const destinatary = "0x00000000000000000000000000000000000d1ce5";
    const warm = await chain.post("token/buy", { amount: "1" }, {}, service);
    expect(warm.status, warm.text).to.equal(200);

    await chain.pause();
    const nonce = await chain.nonce("pending");
    let lost = false;
    const sends = (calls: RpcCall[]) => calls.some((call) => call.method === "eth_sendRawTransaction");
    const probe = (calls: RpcCall[]) => calls.length === 1 && calls[0]!.method === "eth_chainId";
    first.intercept((calls) => {
      if (sends(calls) && !lost) {
        lost = true;
        return "drop"; // forwarded: anvil holds it; the answer never comes
      }
      return lost && !probe(calls) ? "502" : "pass";
    });
    wrong.intercept((calls) => (sends(calls) ? "502" : "pass"));
    wrong.rewrite((call, result) => {
      if (call.method === "eth_getTransactionCount") return `0x${(Number(result) + 1).toString(16)}`;
      if (call.method === "eth_getTransactionByHash" || call.method === "eth_getTransactionReceipt") return null;
      return result;
    });
    const buy = chain.post("token/buy", { amount: "3", destinatary }, {}, service);
    await waitFor("the send's answer lost", async () => lost);
    await sleep(4_000); // time for two "taken" looks a second apart, and a new round
    first.intercept(() => "pass");
    wrong.intercept(() => "pass");
    wrong.rewrite((_, result) => result);
    await chain.resume();
    const answer = await buy;
    expect(answer.status, answer.text).to.equal(200);
    expect(await nonceOf(chain, answer.body.transactionHash)).to.equal(nonce);
    await sleep(2_000); // a second transaction, if one was signed, is mined by now
    expect(await paymentsTo(chain, destinatary), "payments to the destinatary").to.equal(1);
    expect(await chain.nonce("latest")).to.equal(nonce + 1);
    expect(await chain.reverted()).to.deep.equal([]);
  });
});
