/**
 * A cancel's no-op and a speed-up at a trade's nonce, by its wallet's monitor
 * (adapters/chain/lifecycle/replace-now.ts), against a scripted JSON-RPC node: nothing is signed
 * while the trade's send is on its way, once the nonce is used on chain, at another trade's nonce,
 * or when the node does not answer; a cancel recorded then is sent by a later look (as after a
 * restart); a speed-up above the cap or below the replacement's minimum is refused before anything
 * is read or signed. The anvil suite (test/adapters/transport/cancel.anvil.test.ts) covers the rest.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { expect } from "chai";
import { Transaction, Wallet } from "ethers";

import { DEFAULT_TRADE_SETTINGS, RpcProvider, toSigner } from "../../../../adapters/chain/index.js";
import { Receipts, type FeeOracle } from "../../../../adapters/chain/blocks/index.js";
import { WalletMonitor, type LifecycleSettings } from "../../../../adapters/chain/lifecycle/index.js";
import { signEip1559With } from "../../../../adapters/chain/tx/index.js";
import { MemoryJournal } from "../../../../adapters/journal/index.js";
import { InvalidArgumentError } from "../../../../core/index.js";
import { FakeRpcNode } from "../../../helpers/fake-rpc.js";

const wallet = new Wallet("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
const signer = toSigner(wallet);
const GWEI = 1_000_000_000n;
const FEES = { maxFeePerGas: 2n * GWEI, maxPriorityFeePerGas: GWEI };
const SETTINGS: LifecycleSettings = {
  ...DEFAULT_TRADE_SETTINGS,
  minAgeMs: 200,
  resubmitAfterMs: 600_000,
  feeCap: 50n * GWEI,
};

/** A fee oracle that reads nothing: a quiet market at block 16. */
const quietMarket = {
  read: async () => ({
    baseFee: GWEI,
    priorityFee: GWEI,
    head: { number: 16, hash: `0x${"aa".repeat(32)}`, timestamp: Math.floor(Date.now() / 1000) },
  }),
} as unknown as FeeOracle;

describe("a cancel's no-op and a speed-up, by the wallet's monitor", function () {
  const nodes: FakeRpcNode[] = [];
  const providers: RpcProvider[] = [];
  let journal: MemoryJournal;

  async function node(): Promise<FakeRpcNode> {
    const started = await FakeRpcNode.start();
    nodes.push(started);
    return started;
  }

  function monitorOn(
    url: string,
    sends?: { sentAt(nonce: number): number | null | undefined },
    overrides: { settings?: Partial<LifecycleSettings>; fees?: FeeOracle; blockTimeMs?: number; holder?: string } = {},
  ): WalletMonitor {
    const provider = new RpcProvider([url], { chainId: 31337n, batchStallMs: 0 });
    providers.push(provider);
    return new WalletMonitor({
      signer,
      chainId: 31337n,
      provider,
      journal,
      fees: overrides.fees ?? quietMarket,
      receipts: new Receipts({ provider, confirmations: 1, timeoutMs: 1000, journalAfterMs: 0 }),
      settings: { ...SETTINGS, ...overrides.settings },
      log: { warn() {}, info() {} },
      holder: overrides.holder ?? "test",
      ...(sends === undefined ? {} : { sends }),
      ...(overrides.blockTimeMs === undefined ? {} : { blockTimeMs: () => overrides.blockTimeMs }),
    });
  }

  /** A trade signed at `nonce` (a call to the swap), journalled as the trade use case does. */
  async function signedTrade(
    nonce: number,
    deadline = Math.floor(Date.now() / 1000) + 3600,
    data = "0x1234",
  ): Promise<{ id: string; hash: string }> {
    const { record } = await journal.open({
      scope: "s",
      idempotencyKey: null,
      requestHash: "h",
      kind: "sell",
      request: { userAddress: wallet.address, destinatary: wallet.address, amount: "1", usdAddress: wallet.address },
    });
    const { rawTx, txHash } = await signEip1559With(signer, {
      to: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      data,
      gasLimit: 100_000n,
      value: 0n,
      ...FEES,
      chainId: 31337n,
      nonce,
    });
    await journal.markSigned(record.id, {
      wallet: wallet.address,
      nonce,
      txHash,
      rawTx,
      ...FEES,
      deadline,
    });
    return { id: record.id, hash: txHash };
  }

  /** A node holding the wallet's transaction at nonce 7, unmined. */
  async function pendingAt7(): Promise<FakeRpcNode> {
    const chain = await node();
    chain.pendingNonce = 8;
    chain.latestNonce = 7;
    return chain;
  }

  const ask = (id: string) => journal.requestCancel(id, { requestedBy: "desk", requestedAt: new Date().toISOString() });

  beforeEach(function () {
    journal = new MemoryJournal();
  });

  afterEach(async function () {
    for (const provider of providers.splice(0)) provider.destroy();
    for (const started of nodes.splice(0)) await started.close();
  });

  it("replaces the trade's transaction with a no-op at its own nonce, 10 % more on both fees, within the cap", async function () {
    const chain = await pendingAt7();
    const { id, hash } = await signedTrade(7);
    await ask(id);
    const done = await monitorOn(chain.url).cancel({ tradeId: id, nonce: 7 });
    expect(done.state).to.equal("replaced");
    const slot = (await journal.slot(wallet.address, 7))!;
    expect(slot.broadcasts.map((b) => [b.hash, b.noop])).to.deep.equal([
      [hash, false],
      [(done as { hash: string }).hash, true],
    ]);
    const [sent] = chain.calls("eth_sendRawTransaction").map((call) => Transaction.from(call.params[0] as string));
    expect([sent!.nonce, sent!.to, sent!.value, sent!.data]).to.deep.equal([7, wallet.address, 0n, "0x"]);
    expect(sent!.maxFeePerGas).to.be.greaterThan((FEES.maxFeePerGas * 11n) / 10n);
    expect(sent!.maxPriorityFeePerGas).to.be.greaterThan((FEES.maxPriorityFeePerGas * 11n) / 10n);
    expect(sent!.maxFeePerGas).to.be.at.most(SETTINGS.feeCap);
  });

  it("signs nothing while the trade's send is on its way; the look after it is answered sends the cancel's no-op", async function () {
    const chain = await pendingAt7();
    const { id } = await signedTrade(7);
    await ask(id);
    let sentAt: number | null = null; // the send queue's request has not come back
    const monitor = monitorOn(chain.url, { sentAt: () => sentAt });
    expect((await monitor.cancel({ tradeId: id, nonce: 7 })).state).to.equal("deferred");
    expect((await monitor.speedUp({ tradeId: id, nonce: 7 })).state).to.equal("unchanged");
    await monitor.look();
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
    expect((await journal.slot(wallet.address, 7))!.broadcasts).to.have.length(1);
    // Answered a while ago: the look sends the no-op the recorded cancel asks for (after a restart too).
    sentAt = Date.now() - 1000;
    await new Promise((resolve) => setTimeout(resolve, SETTINGS.minAgeMs));
    await monitor.look();
    const broadcasts = (await journal.slot(wallet.address, 7))!.broadcasts;
    expect(broadcasts.map((b) => b.noop)).to.deep.equal([false, true]);
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(1);
  });

  it("signs nothing once the nonce is used on chain, at another trade's nonce, or when the node does not answer", async function () {
    const chain = await node();
    chain.pendingNonce = 8;
    chain.latestNonce = 8; // nonce 7 is mined: by the trade's own transaction, most likely
    const { id } = await signedTrade(7);
    const other = await signedTrade(9);
    await ask(id);
    const monitor = monitorOn(chain.url);
    expect(await monitor.cancel({ tradeId: id, nonce: 7 })).to.deep.equal({ state: "taken" });
    expect((await monitor.cancel({ tradeId: other.id, nonce: 7 })).state).to.equal("deferred");
    expect((await monitor.cancel({ tradeId: id, nonce: 9 })).state).to.equal("deferred");
    const gone = http.createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
    try {
      const silent = monitorOn(`http://127.0.0.1:${(gone.address() as AddressInfo).port}`);
      expect((await silent.cancel({ tradeId: id, nonce: 7 })).state).to.equal("deferred");
    } finally {
      gone.closeAllConnections();
      await new Promise((resolve) => gone.close(resolve));
    }
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
    expect((await journal.slot(wallet.address, 7))!.broadcasts).to.have.length(1);
    expect((await journal.slot(wallet.address, 9))!.broadcasts).to.have.length(1);
  });

  it("speeds up at the fee asked, refusing one above the cap or below the replacement's minimum before asking the node", async function () {
    const chain = await pendingAt7();
    const { id } = await signedTrade(7);
    const monitor = monitorOn(chain.url);
    for (const [fee, message] of [
      [SETTINGS.feeCap + 1n, /^maxFeePerGasGwei: must be at most 50 gwei/],
      [FEES.maxFeePerGas, /^maxFeePerGasGwei: must be at least 2.200000001 gwei/],
    ] as const) {
      const refused = await monitor.speedUp({ tradeId: id, nonce: 7 }, fee).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).to.be.instanceOf(InvalidArgumentError);
      expect((refused as Error).message).to.match(message);
    }
    expect(chain.requests).to.have.length(0);
    const done = await monitor.speedUp({ tradeId: id, nonce: 7 }, 30n * GWEI);
    expect(done).to.deep.include({ state: "replaced", maxFeePerGas: 30n * GWEI });
    const [sent] = chain.calls("eth_sendRawTransaction").map((call) => Transaction.from(call.params[0] as string));
    expect([sent!.nonce, sent!.data, sent!.maxFeePerGas]).to.deep.equal([7, "0x1234", 30n * GWEI]);
  });
  it("signs no speed-up once the trade's deadline is too near for it to be mined before: it would revert", async function () {
    const chain = await pendingAt7();
    const { id } = await signedTrade(7, Math.floor(Date.now() / 1000) + 2);
    const done = await monitorOn(chain.url).speedUp({ tradeId: id, nonce: 7 });
    expect(done.state).to.equal("unchanged");
    expect((done as { reason: string }).reason).to.match(/deadline/);
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
    expect((await journal.slot(wallet.address, 7))!.broadcasts).to.have.length(1);
  });

  it("counts two of the chain's blocks in the time a speed-up needs before the deadline", async function () {
    const chain = await pendingAt7();
    // 8 s left: more than the 3 s floor, less than two 5-second blocks.
    const { id } = await signedTrade(7, Math.floor(Date.now() / 1000) + 8);
    const slow = await monitorOn(chain.url, undefined, { blockTimeMs: 5_000 }).speedUp({ tradeId: id, nonce: 7 });
    expect(slow.state).to.equal("unchanged");
    expect((slow as { reason: string }).reason).to.match(/deadline/);
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
    // At a 1-second block time, 8 s is time enough.
    const fast = await monitorOn(chain.url, undefined, { blockTimeMs: 1_000 }).speedUp({ tradeId: id, nonce: 7 });
    expect(fast.state).to.equal("replaced");
  });

  it("re-prices a cancel's no-op before the trade's deadline, never above the fee cap", async function () {
    const chain = await pendingAt7();
    chain.onSend = () => ({ accept: true }); // the node holds each replacement: not mined, so re-priced
    // A market above the cap: each re-pricing would bid 10 % more than the last.
    const dear = {
      read: async () => ({
        baseFee: 40n * GWEI,
        priorityFee: GWEI,
        head: { number: 16, hash: `0x${"aa".repeat(32)}`, timestamp: Math.floor(Date.now() / 1000) },
      }),
    } as unknown as FeeOracle;
    const { id } = await signedTrade(7);
    await ask(id);
    const monitor = monitorOn(chain.url, undefined, { settings: { resubmitAfterMs: 1 }, fees: dear });
    expect((await monitor.cancel({ tradeId: id, nonce: 7 })).state).to.equal("replaced");
    for (let look = 0; look < 4; look++) {
      await new Promise((resolve) => setTimeout(resolve, SETTINGS.minAgeMs + 20));
      await monitor.look();
    }
    const broadcasts = (await journal.slot(wallet.address, 7))!.broadcasts;
    expect(broadcasts.slice(1).every((b) => b.noop)).to.equal(true);
    expect(broadcasts.map((b) => b.maxFeePerGas).filter((fee) => fee > SETTINGS.feeCap)).to.deep.equal([]);
    const sent = chain.calls("eth_sendRawTransaction").map((call) => Transaction.from(call.params[0] as string));
    expect(sent.filter((tx) => tx.maxFeePerGas! > SETTINGS.feeCap)).to.deep.equal([]);
  });

  it("signs no cancel while another instance holds the wallet's lease: its monitor sends the recorded cancel", async function () {
    const chain = await pendingAt7();
    const { id } = await signedTrade(7);
    expect(await journal.acquireLease(`monitor:${wallet.address.toLowerCase()}`, "another instance", 60_000)).to.equal(
      true,
    );
    await ask(id);
    const monitor = monitorOn(chain.url);
    const cancelled = await monitor.cancel({ tradeId: id, nonce: 7 });
    expect(cancelled.state).to.equal("deferred");
    expect((cancelled as { reason: string }).reason).to.match(/another instance/);
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
    expect((await journal.slot(wallet.address, 7))!.broadcasts).to.have.length(1);
    // The lease holder's next look sends the recorded cancel's no-op, once.
    const leader = monitorOn(chain.url, undefined, { holder: "another instance" });
    await new Promise((resolve) => setTimeout(resolve, SETTINGS.minAgeMs + 20));
    await leader.look();
    await leader.look();
    const broadcasts = (await journal.slot(wallet.address, 7))!.broadcasts;
    expect(broadcasts.map((b) => b.noop)).to.deep.equal([false, true]);
    const [sent] = chain.calls("eth_sendRawTransaction").map((call) => Transaction.from(call.params[0] as string));
    expect([sent!.nonce, sent!.to, sent!.value, sent!.hash]).to.deep.equal([
      7,
      wallet.address,
      0n,
      broadcasts[1]!.hash,
    ]);
  });

  it("speeds up on an instance without the wallet's lease, the cap checked there too; the lease holder's replacement read before it is not sent", async function () {
    const chain = await pendingAt7();
    chain.onSend = () => ({ accept: true });
    const { id, hash } = await signedTrade(7);
    const leader = monitorOn(chain.url, undefined, { settings: { resubmitAfterMs: 1 } });
    await leader.look(); // takes the wallet's lease
    const other = monitorOn(chain.url);
    const above = await other.speedUp({ tradeId: id, nonce: 7 }, SETTINGS.feeCap + 1n).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(above).to.be.instanceOf(InvalidArgumentError);
    // The leader's look reads the slot, and the speed-up is recorded while it reads the fees.
    const slow = {
      read: async () => {
        const done = await other.speedUp({ tradeId: id, nonce: 7 }, 10n * GWEI);
        expect(done).to.deep.include({ state: "replaced", maxFeePerGas: 10n * GWEI });
        return quietMarket.read();
      },
    } as unknown as FeeOracle;
    await new Promise((resolve) => setTimeout(resolve, SETTINGS.minAgeMs + 20));
    await monitorOn(chain.url, undefined, { settings: { resubmitAfterMs: 1 }, fees: slow }).look();
    const broadcasts = (await journal.slot(wallet.address, 7))!.broadcasts;
    expect(broadcasts.map((b) => [b.noop, b.maxFeePerGas])).to.deep.equal([
      [false, FEES.maxFeePerGas],
      [false, 10n * GWEI],
    ]);
    expect(broadcasts[0]!.hash).to.equal(hash);
    // Nothing went out that the ledger does not hold (the look may re-send the first's own bytes).
    const sent = chain.calls("eth_sendRawTransaction").map((call) => Transaction.from(call.params[0] as string).hash);
    expect(sent.filter((h) => h === broadcasts[1]!.hash)).to.have.length(1);
    expect(sent.filter((h) => !broadcasts.some((b) => b.hash === h))).to.deep.equal([]);
  });

  it("signs no speed-up of a trade a cancel was asked of meanwhile (read in its turn)", async function () {
    const chain = await pendingAt7();
    const { id } = await signedTrade(7);
    await ask(id);
    const done = await monitorOn(chain.url).speedUp({ tradeId: id, nonce: 7 });
    expect(done.state).to.equal("unchanged");
    expect((done as { reason: string }).reason).to.match(/cancel/);
    expect(chain.calls("eth_sendRawTransaction")).to.have.length(0);
  });

  it("records and sends nothing in another trade's slot: the trade's send was refused and its nonce used by the next trade while the cancel or speed-up waited for the node", async function () {
    for (const what of ["cancel", "speedUp"] as const) {
      journal = new MemoryJournal();
      const chain = await pendingAt7();
      const t = await signedTrade(7);
      if (what === "cancel") await ask(t.id);
      let next: { id: string; hash: string } | undefined;
      // While this instance reads the fees, another instance's send of the trade is refused: its
      // slot is released, and the next trade is signed at nonce 7.
      const meanwhile = {
        read: async () => {
          expect(await journal.releaseSlot(wallet.address, 7, t.hash)).to.equal(true);
          next = await signedTrade(7, undefined, "0x5678");
          return quietMarket.read();
        },
      } as unknown as FeeOracle;
      const monitor = monitorOn(chain.url, undefined, { fees: meanwhile });
      const done = await monitor[what]({ tradeId: t.id, nonce: 7 });
      expect(done.state, what).to.equal(what === "cancel" ? "deferred" : "unchanged");
      expect((done as { reason: string }).reason).to.match(/changed/);
      expect(chain.calls("eth_sendRawTransaction"), what).to.have.length(0);
      const slot = (await journal.slot(wallet.address, 7))!;
      expect([slot.tradeId, slot.broadcasts.map((b) => b.hash)]).to.deep.equal([next!.id, [next!.hash]]);
      expect((await journal.get(next!.id))!.txHash).to.equal(next!.hash);
      expect((await journal.get(t.id))!.status).to.equal(what === "cancel" ? "cancelled" : "accepted");
    }
  });
});
