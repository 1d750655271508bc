/**
 * Every trade reaches a definite outcome on a real chain: the service (production mode,
 * RPC_URL) against Foundry's anvil, an independent node mining a block a second, through the
 * lost-transaction cases a hot wallet meets: a fee spike that evicts it, a dropped
 * transaction, a reorg, someone else using the wallet's nonce, an expired deadline, a node
 * restart, and an instance killed while it monitors the wallet (the last with PostgreSQL).
 * Each ends definite: confirmed, failed or expired, never paid twice, never after its deadline.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { Interface, Wallet } from "ethers";

import { SWAP_ABI } from "../../../../adapters/chain/index.js";
import { getJson } from "../../transport/helpers.js";
import {
  CUSTOMER,
  EXCHANGE,
  GWEI,
  balanceOf,
  outcome as outcomeOf,
  pendingHash,
  realChain,
  sleep,
  type RealChain,
} from "../../../helpers/real-chain.js";
import { waitFor } from "../../../helpers/wait.js";

const swapInterface = new Interface(SWAP_ABI);

/** Retries the sell with the key until the answer is not 504 (pending). */
const outcome = (chain: RealChain, key: string, ms?: number) => outcomeOf(() => chain.sell(key), key, ms);

const usdcOf = (chain: RealChain, owner: string) => balanceOf(chain.anvil, chain.addresses.stableCoins.USDC, owner);

describe("on a real chain (anvil, 1 s blocks)", function () {
  this.timeout(180_000);
  let chain: RealChain | undefined;

  afterEach(async function () {
    await chain?.close();
    chain = undefined;
  });

  it("re-sends the same signed bytes of a dropped transaction, which is mined once, with its deadline and minimum in the calldata", async function () {
    chain = await realChain();
    const before = await chain.nonce();
    await chain.pause();
    const hash = pendingHash(await chain.sell("drop-1"));
    await chain.anvil.rpc("anvil_dropTransaction", [hash]);
    expect(await chain.anvil.rpc("eth_getTransactionByHash", [hash])).to.equal(null);
    await chain.resume();

    const done = await outcome(chain, "drop-1");
    expect(done.status, done.text).to.equal(200);
    expect(done.body.transactionHash, "the same bytes, so the same hash").to.equal(hash);
    expect(Object.keys(done.body.events)).to.have.length(5);
    expect(await chain.nonce()).to.equal(before + 1);
    expect(chain.logs.text).to.match(/re-sent a transaction the node no longer knew/);
    const view = await chain.trade(hash);
    expect(view.body).to.deep.include({ status: "confirmed", nonce: before, transactionHash: hash });
    expect(view.body.transactions).to.have.length(1);

    // The calldata bounds the trade: a deadline TRADE_LIFETIME_S (300 s) ahead, and the payout
    // less 1 % (100 bps), rounded up.
    const tx = await chain.anvil.rpc<{ input: string }>("eth_getTransactionByHash", [hash]);
    const [, , , minOut, deadline] = swapInterface.decodeFunctionData("sell", tx.input);
    const block = await chain.anvil.rpc<{ timestamp: string }>("eth_getBlockByNumber", [
      `0x${done.body.blockNumber.toString(16)}`,
      false,
    ]);
    expect(Number(deadline) - Number(block.timestamp)).to.be.within(250, 300);
    const paid = 2_500_000n; // 2 tokens at 1.25 USD, in USDC's 6 decimals
    expect(minOut).to.equal((paid * 9_900n + 9_999n) / 10_000n);
  });

  it("catches a trade evicted by a fee spike up once the spike ends, refusing new trades above the cap meanwhile", async function () {
    chain = await realChain({ MAX_FEE_PER_GAS_GWEI: "50" });
    const before = await chain.nonce();
    await chain.pause();
    const hash = pendingHash(await chain.sell("spike-1"));
    // A spike that lasts: anvil_setNextBlockBaseFeePerGas sets one block's base fee, and the
    // blocks after it fall 12.5 % each (below the 50 gwei cap by the sixth), so it is set again
    // every 200 ms, before each block, until the spike ends.
    const spike = () => chain!.anvil.rpc("anvil_setNextBlockBaseFeePerGas", [`0x${(100n * GWEI).toString(16)}`]);
    await spike();
    let setting: Promise<unknown> = Promise.resolve();
    const spiking = setInterval(() => (setting = spike().catch(() => {})), 200);
    try {
      await chain.resume();
      // The base fee is 100 gwei now, above the trade's maxFeePerGas and the cap: it waits.
      await waitFor("a block at the spiked base fee", async () => {
        const block = await chain!.anvil.rpc<{ baseFeePerGas: string }>("eth_getBlockByNumber", ["latest", false]);
        return BigInt(block.baseFeePerGas) >= 50n * GWEI;
      });
      // The service prices a trade from the head its block watcher read, at most a second ago
      // (blocks/fees.ts), so the refusal is asked for once that head is the spiked block's.
      await sleep(1_500);
      const refused = await chain.sell();
      expect(refused.status, refused.text).to.equal(503);
      expect(refused.body.code).to.equal("unavailable");
      expect(refused.body.message).to.match(
        /base fee is [\d.]+ gwei, above this service's cap of 50 gwei; nothing was sent/,
      );
      await sleep(5_000); // the monitor re-prices up to the cap, then waits
      expect(await chain.nonce("latest")).to.equal(before);
      const during = await chain.trade(hash);
      expect(during.body.status).to.be.oneOf(["signed", "submitted"]);
      const cap = during.body.transactions.at(-1);
      expect(BigInt(cap.maxFeePerGas)).to.be.at.most(50n * GWEI);
    } finally {
      clearInterval(spiking);
      await setting; // none lands after the spike's end
    }

    // The spike ends.
    await chain.anvil.rpc("anvil_setNextBlockBaseFeePerGas", [`0x${GWEI.toString(16)}`]);
    const ended = Date.now();
    const done = await outcome(chain, "spike-1");
    const caughtUpMs = Date.now() - ended;
    expect(done.status, done.text).to.equal(200);
    expect(done.body.status).to.equal(true);
    expect(await chain.nonce()).to.equal(before + 1);
    const view = await chain.trade(hash);
    expect(view.body.status).to.equal("confirmed");
    expect(view.body.transactions.map((t: { hash: string }) => t.hash)).to.include(done.body.transactionHash);
    // Recorded for the issue's note: the time from the end of the spike to the trade mined.
    console.log(
      `      fee spike: mined ${caughtUpMs} ms after the spike ended, after ${view.body.transactions.length} broadcasts`,
    );
    expect(caughtUpMs).to.be.below(15_000);
  });

  it("refuses a trade whose proof ran on a block above the cap, though the head its fees came from was below it", async function () {
    chain = await realChain({ MAX_FEE_PER_GAS_GWEI: "50" });
    // A sell mined: the block watcher has just read the head (under the cap), which fees come
    // from for the next second.
    const first = await chain.sell();
    expect(first.status, first.text).to.equal(200);
    await chain.pause();
    const before = await chain.nonce("pending");
    // Within that second, a block above the cap...
    await chain.anvil.rpc("anvil_setNextBlockBaseFeePerGas", [`0x${(100n * GWEI).toString(16)}`]);
    await chain.anvil.rpc("evm_mine", []);
    // ...on which the next trade's proof runs: refused, not priced from the head before it.
    const refused = await chain.sell();
    expect(refused.status, refused.text).to.equal(503);
    expect(refused.body.message).to.match(
      /base fee is [\d.]+ gwei, above this service's cap of 50 gwei; nothing was sent/,
    );
    expect(await chain.nonce("pending"), "nothing was signed").to.equal(before);
  });

  it("answers a retry after a reorg with the canonical receipt, never the orphaned one", async function () {
    chain = await realChain();
    const before = await chain.nonce();
    const first = await chain.sell("reorg-1");
    expect(first.status, first.text).to.equal(200);
    await waitFor(
      "a block on top",
      async () => Number(await chain!.anvil.rpc<string>("eth_blockNumber")) > first.body.blockNumber,
    );
    // No block between reading the head and the reorg, whose depth is counted from anvil's head.
    await chain.pause();
    const head = Number(await chain.anvil.rpc<string>("eth_blockNumber"));
    await chain.anvil.rpc("anvil_reorg", [head - first.body.blockNumber + 1, []]);
    await chain.resume();

    const canonical = await waitFor("a canonical receipt", async () => {
      const answer = await chain!.sell("reorg-1");
      if (answer.status === 200) {
        expect(answer.body.blockHash, "an orphaned block's receipt").to.not.equal(first.body.blockHash);
        return answer;
      }
      expect(answer.status, answer.text).to.equal(504);
      return undefined;
    });
    const block = await chain.anvil.rpc<{ hash: string }>("eth_getBlockByNumber", [
      `0x${canonical.body.blockNumber.toString(16)}`,
      false,
    ]);
    expect(block.hash).to.equal(canonical.body.blockHash);
    expect(canonical.body.transactionHash, "sent again byte for byte").to.equal(first.body.transactionHash);
    expect(await chain.nonce()).to.equal(before + 1);
    expect(chain.logs.text).to.match(/reorg: transaction's block left the canonical chain/);
    const view = await chain.trade(first.body.transactionHash);
    expect(view.body).to.deep.include({ status: "confirmed" });
    expect(view.body.receipt.blockHash).to.equal(canonical.body.blockHash);
  });

  it("fails a trade whose nonce someone else used, with nothing paid, and trades on", async function () {
    chain = await realChain();
    const before = await chain.nonce();
    const paidBefore = await usdcOf(chain, CUSTOMER);
    await chain.pause();
    const hash = pendingHash(await chain.sell("taken-1"));
    await chain.anvil.rpc("anvil_dropTransaction", [hash]);
    // Someone with the wallet's key sends at that nonce, with fees the service will not outbid.
    const other = await new Wallet(EXCHANGE.privateKey).signTransaction({
      type: 2,
      chainId: Number(await chain.anvil.rpc<string>("eth_chainId")),
      nonce: before,
      to: EXCHANGE.address,
      value: 0n,
      gasLimit: 21_000n,
      maxFeePerGas: 200n * GWEI,
      maxPriorityFeePerGas: 100n * GWEI,
    });
    await chain.anvil.rpc("eth_sendRawTransaction", [other]);
    await chain.resume();

    const done = await outcome(chain, "taken-1");
    expect(done.status, done.text).to.equal(400);
    expect(done.body.code).to.equal("failed_precondition");
    expect(done.body.message).to.match(
      /trade dropped: nonce \d+ of 0x[0-9a-fA-F]{40} was used by a transaction not signed for this trade; nothing was paid/,
    );
    expect(await usdcOf(chain, CUSTOMER)).to.equal(paidBefore);
    expect((await chain.trade(hash)).body.status).to.equal("failed");
    const next = await chain.sell();
    expect(next.status, next.text).to.equal(200);
    expect(await chain.nonce()).to.equal(before + 2);
  });

  it("frees the nonce of a trade not mined by its deadline with a no-op: expired, nothing paid", async function () {
    chain = await realChain({ TRADE_LIFETIME_S: "10" });
    const before = await chain.nonce();
    const paidBefore = await usdcOf(chain, CUSTOMER);
    await chain.pause();
    const hash = pendingHash(await chain.sell("late-1"));
    await waitFor(
      "the no-op",
      async () => /deadline passed: freeing the nonce with a no-op/.test(chain!.logs.text),
      30_000,
    );
    await chain.resume();

    const done = await outcome(chain, "late-1");
    expect(done.status, done.text).to.equal(400);
    expect(done.body.code).to.equal("failed_precondition");
    expect(done.body.message).to.match(
      /^trade expired: not mined before its deadline .*; a no-op took its nonce \d+, so it can never execute; nothing was paid$/,
    );
    expect(await usdcOf(chain, CUSTOMER)).to.equal(paidBefore);
    expect(await chain.nonce()).to.equal(before + 1);
    const view = await chain.trade(hash);
    expect(view.body.status).to.equal("expired");
    expect(view.body.transactions.at(-1).noop).to.equal(true);
    const mined = await chain.anvil.rpc<{ to: string; input: string; value: string }>("eth_getTransactionByHash", [
      view.body.transactionHash,
    ]);
    expect(mined).to.deep.include({ to: EXCHANGE.address.toLowerCase(), input: "0x", value: "0x0" });
  });

  it("sends a pending trade again once a restarted node has forgotten it", async function () {
    const dir = mkdtempSync(join(tmpdir(), "anvil-state-"));
    try {
      chain = await realChain({}, { state: join(dir, "state.json") });
      const before = await chain.nonce();
      await chain.pause();
      const hash = pendingHash(await chain.sell("restart-1"));
      await chain.anvil.stop();
      await sleep(1_500); // the service meets a node that does not answer
      await chain.anvil.restart();
      await chain.resume();
      expect(await chain.nonce(), "the chain survived the restart").to.equal(before);

      const done = await outcome(chain, "restart-1");
      expect(done.status, done.text).to.equal(200);
      expect(done.body.transactionHash).to.equal(hash);
      expect(await chain.nonce()).to.equal(before + 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("answers a trade whose re-priced replacement was mined with the replacement's receipt", async function () {
    chain = await realChain({ RESUBMIT_AFTER_MS: "1000" });
    const before = await chain.nonce();
    await chain.pause();
    const first = pendingHash(await chain.sell("slow-1"));
    const replaced = await waitFor("a replacement", async () => {
      const view = await chain!.trade(first);
      return view.body.transactions.length >= 2 ? view.body : undefined;
    });
    await chain.resume();
    const done = await outcome(chain, "slow-1");
    expect(done.status, done.text).to.equal(200);
    expect(done.body.transactionHash).to.not.equal(first);
    const view = await chain.trade(first);
    expect(view.body.transactions.map((t: { hash: string }) => t.hash)).to.include(done.body.transactionHash);
    expect(view.body).to.deep.include({ status: "confirmed", transactionHash: done.body.transactionHash });
    const [a, b] = replaced.transactions as Array<{ maxFeePerGas: string; maxPriorityFeePerGas: string }>;
    expect(BigInt(b!.maxFeePerGas) * 100n >= BigInt(a!.maxFeePerGas) * 110n).to.equal(true);
    expect(BigInt(b!.maxPriorityFeePerGas) * 100n >= BigInt(a!.maxPriorityFeePerGas) * 110n).to.equal(true);
    expect(await chain.nonce()).to.equal(before + 1);
    expect(chain.logs.text).to.match(/replaced a transaction not mined in time, with higher fees/);
  });

  it("answers a trade only once its receipt has CONFIRMATIONS blocks", async function () {
    chain = await realChain({ CONFIRMATIONS: "3", REORG_DEPTH: "8", RECEIPT_TIMEOUT_MS: "30000" });
    const answer = await chain.sell();
    expect(answer.status, answer.text).to.equal(200);
    const head = Number(await chain.anvil.rpc<string>("eth_blockNumber"));
    expect(head - answer.body.blockNumber + 1).to.be.at.least(3);
    const block = await chain.anvil.rpc<{ hash: string }>("eth_getBlockByNumber", [
      `0x${answer.body.blockNumber.toString(16)}`,
      false,
    ]);
    expect(block.hash).to.equal(answer.body.blockHash);
    const view = await chain.trade(answer.body.transactionHash);
    expect(view.body.status).to.equal("confirmed");
    expect(view.body.confirmations).to.be.at.least(3);
  });

  it("reports a wallet with a nonce stuck unmined on /readyz, and is ready again once it is mined", async function () {
    chain = await realChain({ STUCK_AFTER_MS: "2000" });
    const ready = () => getJson(`${chain!.service.apiUrl}/readyz`, { apiKey: null });
    expect((await ready()).status).to.equal(200);
    await chain.pause();
    pendingHash(await chain.sell("stuck-1"));
    const stuck = await waitFor(
      "/readyz to report the stuck nonce",
      async () => {
        const answer = await ready();
        return answer.status === 503 ? answer : undefined;
      },
      15_000,
    );
    expect(stuck.body).to.deep.include({ code: "unavailable" });
    expect(stuck.body.message).to.match(new RegExp(`^stuck: ${EXCHANGE.address} has nonce \\d+ unmined for \\d+ s$`));
    await chain.resume();
    await waitFor("/readyz to be ready again", async () => (await ready()).status === 200, 15_000);
  });
});
