/**
 * The watch's part of the journal conformance suite (journal.contract.ts runs it on memory, SQLite
 * and PostgreSQL): an outside transaction recorded once, by wallet and nonce, with its event for
 * every watcher scope (and no other), its audit record and the wallet's pause in the same write;
 * alarms whose event is written only when their state changes; events about one subject claimed in
 * order, per scope; a resume that ends the pause with its record; which hashes are the wallet's own.
 */
import { expect } from "chai";

import type { Journal } from "../../../adapters/journal/index.js";
import type { AuditEntry, OutsideTransaction, WatchEvent } from "../../../core/index.js";
import { signedTrade, WEBHOOK_SCOPE } from "../../helpers/webhook-trades.js";

export interface WatchContractContext {
  journal(): Journal;
  peer(): Promise<Journal>;
}

const WALLET = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
/** A watcher: an admin's key, or one whose `sees` is "*". */
const WATCHER = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

const outside = (nonce: number): OutsideTransaction => ({
  wallet: WALLET,
  nonce,
  hash: `0x${nonce.toString(16).padStart(64, "e")}`,
  to: "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65",
  value: 10n ** 18n + 1n,
  blockNumber: 40 + nonce,
});

const eventOf = (type: WatchEvent["type"], subject = WALLET, data: WatchEvent["data"] = {}): WatchEvent => ({
  type,
  subject,
  data: { wallet: WALLET, ...data },
  at: new Date(),
});

const audit = (nonce: number): AuditEntry => ({
  actor: "service",
  action: "wallet.outside_transaction",
  subject: WALLET,
  details: { nonce },
});

export function describeWatchContract(context: WatchContractContext): void {
  describe("the watch", function () {
    let journal: Journal;

    beforeEach(async function () {
      journal = context.journal();
      // WEBHOOK_SCOPE is a trader's endpoint; WATCHER's key watches everything.
      await journal.registerWebhookScopes("instance-a", [WEBHOOK_SCOPE, WATCHER], 60_000, [WATCHER]);
    });

    const deliveries = async (scope: string) =>
      (await journal.listWebhookDeliveries({ scopes: [scope], limit: 100 })).deliveries.reverse();

    it("records an outside transaction once, with its event for the watchers only, its audit record and the pause", async function () {
      const tx = outside(7);
      const data = { transaction: { hash: tx.hash, nonce: 7, value: { value: "1.000000000000000001" } } };
      const event = eventOf("wallet.outside_transaction", WALLET, data);
      expect(await journal.recordOutsideTransaction(tx, event, audit(7), true)).to.equal(true);
      expect(await (await context.peer()).recordOutsideTransaction(tx, event, audit(7), true)).to.equal(false);
      const [written, ...more] = await deliveries(WATCHER);
      expect(more).to.deep.equal([]);
      expect(written).to.deep.include({
        scope: WATCHER,
        tradeId: null,
        trade: null,
        type: "wallet.outside_transaction",
      });
      expect(written!.data).to.deep.equal(event.data);
      expect(await deliveries(WEBHOOK_SCOPE)).to.deep.equal([]);
      const records = (await journal.auditPage({ action: "wallet.outside_transaction", limit: 10 })).records;
      expect(records.map((r) => [r.subject, r.details])).to.deep.equal([[WALLET, { nonce: 7 }]]);
      const [pause, ...others] = await (await context.peer()).walletPauses();
      expect(others).to.deep.equal([]);
      expect(pause).to.deep.include({ wallet: WALLET, nonce: 7, hash: tx.hash });
      // A second one while paused: recorded, the pause kept as the first made it.
      expect(await journal.recordOutsideTransaction(outside(8), event, audit(8), true)).to.equal(true);
      expect((await journal.walletPauses()).map((p) => p.nonce)).to.deep.equal([7]);
    });

    it("writes no event for a lapsed or a non-watcher registration, and pauses only when asked", async function () {
      await journal.registerWebhookScopes("instance-a", [WEBHOOK_SCOPE, WATCHER], 60_000, []);
      expect(
        await journal.recordOutsideTransaction(outside(3), eventOf("wallet.outside_transaction"), audit(3), false),
      ).to.equal(true);
      expect(await deliveries(WATCHER)).to.deep.equal([]);
      expect(await journal.walletPauses()).to.deep.equal([]);
      const unknown = { ...outside(4), hash: null, to: null, value: null };
      expect(
        await journal.recordOutsideTransaction(unknown, eventOf("wallet.outside_transaction"), audit(4), false),
      ).to.equal(true);
    });

    it("ends a pause with its audit record, once", async function () {
      await journal.recordOutsideTransaction(outside(5), eventOf("wallet.outside_transaction"), audit(5), true);
      const resumed: AuditEntry = { actor: "ops", action: "wallet.resumed", subject: WALLET, details: {} };
      const ended = await (await context.peer()).resumeWallet(WALLET.toUpperCase().replace("0X", "0x"), resumed);
      expect(ended).to.deep.include({ wallet: WALLET, nonce: 5 });
      expect(await journal.resumeWallet(WALLET, resumed)).to.equal(undefined);
      expect(await journal.walletPauses()).to.deep.equal([]);
      const records = (await journal.auditPage({ action: "wallet.resumed", limit: 10 })).records;
      expect(records).to.have.length(1);
    });

    it("writes an alarm's event only when it is raised or cleared, and knows which are raised", async function () {
      const low = eventOf("wallet.balance_low", WALLET, { asset: "native" });
      const ok = eventOf("wallet.balance_ok", WALLET, { asset: "native" });
      expect(await journal.setWatchAlarm("wallet:native", false, ok)).to.equal(false);
      expect(await journal.setWatchAlarm("wallet:native", true, low)).to.equal(true);
      expect(await (await context.peer()).setWatchAlarm("wallet:native", true, low)).to.equal(false);
      expect(await journal.watchAlarms()).to.deep.equal(["wallet:native"]);
      expect(await journal.setWatchAlarm("wallet:native", false, ok)).to.equal(true);
      expect(await journal.setWatchAlarm("wallet:native", false, ok)).to.equal(false);
      expect(await journal.watchAlarms()).to.deep.equal([]);
      expect((await deliveries(WATCHER)).map((d) => d.type)).to.deep.equal(["wallet.balance_low", "wallet.balance_ok"]);
    });

    it("claims one subject's events in order, per scope, beside a trade's", async function () {
      await journal.setWatchAlarm("swap:USDC", true, eventOf("swap.reserves_low", "swap:usdc"));
      await journal.setWatchAlarm("swap:USDC", false, eventOf("swap.reserves_ok", "swap:usdc"));
      await journal.setWatchAlarm("wallet:native", true, eventOf("wallet.balance_low"));
      const claimed = await journal.claimWebhookEvents("b", new Map([[WATCHER, 10]]), 60_000);
      expect(claimed.map((e) => e.type)).to.deep.equal(["swap.reserves_low", "wallet.balance_low"]);
      for (const event of claimed)
        await journal.recordWebhookAttempt(
          event.id,
          "b",
          { at: new Date(), statusCode: 204, error: null },
          {
            status: "delivered",
          },
        );
      const next = await journal.claimWebhookEvents("b", new Map([[WATCHER, 10]]), 60_000);
      expect(next.map((e) => e.type)).to.deep.equal(["swap.reserves_ok"]);
    });

    it("tells the hashes no slot of the wallet holds a broadcast of", async function () {
      const trade = await signedTrade(journal, WEBHOOK_SCOPE, WALLET);
      const stranger = `0x${"ab".repeat(32)}`;
      expect(
        await journal.unknownTransactions(WALLET, [trade.txHash.toUpperCase().replace("0X", "0x"), stranger]),
      ).to.deep.equal([stranger]);
      expect(
        await journal.unknownTransactions("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc", [trade.txHash]),
      ).to.deep.equal([trade.txHash]);
    });

    it("keeps where the watch left each wallet per chain: forward only, back only when asked, seen by another instance", async function () {
      expect(await journal.watchedNonce(WALLET, 31337)).to.equal(undefined);
      await journal.saveWatchedNonce(WALLET.toUpperCase().replace("0X", "0x"), { chainId: 31337, nonce: 5, block: 40 });
      expect(await journal.watchedNonce(WALLET, 31337)).to.deep.equal({ chainId: 31337, nonce: 5, block: 40 });
      // An instance whose reading is behind never takes it back.
      await journal.saveWatchedNonce(WALLET, { chainId: 31337, nonce: 4, block: 41 });
      expect(await journal.watchedNonce(WALLET, 31337)).to.deep.equal({ chainId: 31337, nonce: 5, block: 40 });
      await journal.saveWatchedNonce(WALLET, { chainId: 31337, nonce: 9, block: 52 });
      // Another chain, another wallet: apart.
      await journal.saveWatchedNonce(WALLET, { chainId: 1, nonce: 2, block: 7 });
      expect(await journal.watchedNonce("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc", 31337)).to.equal(undefined);
      expect(await journal.watchedNonce(WALLET, 1)).to.deep.equal({ chainId: 1, nonce: 2, block: 7 });
      // A chain started again under the same id: back, when asked.
      await journal.saveWatchedNonce(WALLET, { chainId: 31337, nonce: 1, block: 3 }, true);
      expect(await journal.watchedNonce(WALLET, 31337)).to.deep.equal({ chainId: 31337, nonce: 1, block: 3 });
      const peer = await context.peer();
      expect(await peer.watchedNonce(WALLET, 31337)).to.deep.equal({ chainId: 31337, nonce: 1, block: 3 });
    });
  });
}
