/**
 * The conformance suite every TradeJournal adapter passes: `describeJournalContract(name, factory)`.
 * The factory gives each test its own empty storage.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

import type { Journal } from "../../../adapters/journal/index.js";
import type {
  Broadcast,
  NewTrade,
  SignedTradeTx,
  TradePageQuery,
  TradeRequest,
  TradeStatus,
  TransactionReceipt,
} from "../../../core/index.js";
import { describeAuditContract } from "./audit.contract.js";
import { describeQuoteContract } from "./quote.contract.js";
import { describeSpendingContract } from "./spending.contract.js";
import { describeTransitionContract } from "./transitions.contract.js";
import { describeWatchContract } from "./watch.contract.js";
import { describeWebhookContract } from "./webhook.contract.js";

export interface JournalStorage {
  /** Opens a journal on this test's storage: each call a separate instance (its own connections). */
  open(): Promise<Journal>;
  /** PostgreSQL: several instances share the storage. SQLite: only one may have it open. */
  shared: boolean;
  /** False for memory: nothing survives a close, and no other process can open it. */
  durable: boolean;
  /** What `openJournal` (adapters/journal/index.ts) needs to open this storage from another process. */
  config: { url?: string; dataDir: string };
  /** Frees the storage after the test. */
  dispose(): Promise<void>;
}

const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const OTHER_WALLET = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const INDEX_MODULE = fileURLToPath(new URL("../../../adapters/journal/index.ts", import.meta.url));
const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

const REQUEST: TradeRequest = {
  userAddress: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
  destinatary: "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
  amount: "12.5",
  usdAddress: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
};

/** A receipt in the SPEC's key order (not alphabetical, not by key length), with nested logs. */
const RECEIPT: TransactionReceipt = {
  blockHash: "0x2d9f1a1b7c3e6f09a1e1a6a8b2e74f1bd4c0e9e0f5b1b0ab0e4a1f73c3ad9b01",
  blockNumber: 42,
  contractAddress: null,
  cumulativeGasUsed: 184_321,
  effectiveGasPrice: 1_875_000_007,
  from: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  gasUsed: 92_160,
  logsBloom: `0x${"00".repeat(255)}01`,
  status: true,
  to: "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512",
  transactionHash: "0x8e3b1a4dfe0c4b2a1f9e8d7c6b5a49382716a5b4c3d2e1f0a9b8c7d6e5f4a3b2",
  transactionIndex: 0,
  type: "0x2",
  events: {
    0: {
      address: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      blockHash: "0x2d9f1a1b7c3e6f09a1e1a6a8b2e74f1bd4c0e9e0f5b1b0ab0e4a1f73c3ad9b01",
      blockNumber: 42,
      logIndex: 0,
      removed: false,
      transactionHash: "0x8e3b1a4dfe0c4b2a1f9e8d7c6b5a49382716a5b4c3d2e1f0a9b8c7d6e5f4a3b2",
      transactionIndex: 0,
      id: "log_1a2b3c4d",
      returnValues: {},
      signature: null,
      raw: {
        data: "0x00000000000000000000000000000000000000000000000000000000000f4240",
        topics: [
          "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
          "0x00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8",
        ],
      },
    },
  },
};

function trade(overrides: Partial<NewTrade> = {}): NewTrade {
  return {
    scope: "api-key-hash-1",
    idempotencyKey: null,
    requestHash: "hash-1",
    kind: "buy",
    request: REQUEST,
    ...overrides,
  };
}

const hashOf = (n: number) => `0x${n.toString(16).padStart(64, "0")}`;
const DEADLINE = 1_900_000_000;

function signedTx(nonce: number): SignedTradeTx {
  return {
    wallet: WALLET,
    nonce,
    txHash: hashOf(nonce),
    rawTx: `0x02f8${nonce.toString(16)}`,
    maxFeePerGas: 2_240_000_000n,
    maxPriorityFeePerGas: 1n,
    deadline: DEADLINE,
  };
}

/** What a trade record says about its transaction once signed with `signedTx(nonce)`. */
function signedFields(nonce: number) {
  const tx = signedTx(nonce);
  return { wallet: tx.wallet, nonce, txHash: tx.txHash, rawTx: tx.rawTx, deadline: DEADLINE };
}

function broadcast(n: number, overrides: Partial<Broadcast> = {}): Broadcast {
  return {
    hash: hashOf(n),
    rawTx: `0x02f9${n.toString(16)}`,
    maxFeePerGas: BigInt(n) * 10n ** 9n,
    maxPriorityFeePerGas: BigInt(n),
    noop: false,
    sentAt: new Date(),
    ...overrides,
  };
}

/** Broadcasts as the ledger gives them back (dates at millisecond precision, as every store keeps them). */
function stored(b: Broadcast) {
  return { ...b, sentAt: new Date(Math.trunc(b.sentAt.getTime())) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The topics of the swap's trade events (ITokenSwap.sol). */
const SWAP_TOPICS = {
  sell: "0x08e6c75843825654ebf8e0105264a482dca551d29d3f74f0568861868f59f3b7", // Sold
  buy: "0xf60945982f79c9cab3a44143350c7546774426e21d7e50ad46cc065e4e5b1182", // Bought
  remittance: "0x815a3929b4e3699c2c23c3b6aa1c7db13cbc0f96af3adb09b751ca3270d40c53", // Remitted
} as const;

const word = (n: bigint) => n.toString(16).padStart(64, "0");

/** RECEIPT with the swap's event for `kind` after its Transfer log, paying `amountIn` for `amountOut`. */
function swapReceipt(
  kind: keyof typeof SWAP_TOPICS,
  amountIn: bigint,
  amountOut: bigint,
  gas: { gasUsed: number; effectiveGasPrice: number } = { gasUsed: 92_160, effectiveGasPrice: 1_875_000_007 },
): TransactionReceipt {
  const first = RECEIPT.events[0]!;
  return {
    ...RECEIPT,
    ...gas,
    events: {
      0: first,
      1: {
        ...first,
        address: RECEIPT.to, // emitted by the swap, which the trade's transaction calls
        logIndex: 1,
        raw: {
          data: `0x${word(amountIn)}${word(amountOut)}${word(123_000_000n)}`,
          topics: [SWAP_TOPICS[kind], `0x${"00".repeat(32)}`, `0x${"00".repeat(32)}`, `0x${"00".repeat(32)}`],
        },
      },
    },
  };
}

async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`${what} (after ${ms} ms)`)), ms)),
  );
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function describeJournalContract(name: string, factory: () => Promise<JournalStorage>): void {
  describe(`the ${name} trade journal`, function () {
    let storage: JournalStorage;
    let opened: Journal[];
    let journal: Journal;

    /** A second instance on the same storage when the backend allows it, else the same one. */
    async function peer(): Promise<Journal> {
      return storage.shared ? track(await storage.open()) : journal;
    }

    function track(instance: Journal): Journal {
      opened.push(instance);
      return instance;
    }

    beforeEach(async function () {
      storage = await factory();
      opened = [];
      journal = track(await storage.open());
    });

    afterEach(async function () {
      await Promise.allSettled(opened.map((instance) => instance.close()));
      await storage.dispose();
    });

    describeQuoteContract({ journal: () => journal, peer });
    describeWebhookContract({ journal: () => journal, peer });
    describeTransitionContract({ journal: () => journal });
    describeSpendingContract({ journal: () => journal, peer });
    describeAuditContract({ journal: () => journal, peer });
    describeWatchContract({ journal: () => journal, peer });

    describe("when a trade is opened", function () {
      it("records it as accepted, with a fresh UUID and dates", async function () {
        const before = Date.now();
        const { created, record } = await journal.open(trade({ idempotencyKey: "key-1" }));
        expect(created).to.equal(true);
        expect(record.id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        expect(record).to.deep.include({
          scope: "api-key-hash-1",
          idempotencyKey: "key-1",
          requestHash: "hash-1",
          kind: "buy",
          request: REQUEST,
          status: "accepted",
          wallet: null,
          nonce: null,
          txHash: null,
          rawTx: null,
          deadline: null,
          broadcasts: [],
          receipt: null,
          error: null,
        });
        expect(record.createdAt).to.be.instanceOf(Date);
        expect(record.updatedAt).to.be.instanceOf(Date);
        expect(record.createdAt.getTime()).to.be.within(before - 5_000, Date.now() + 5_000);
        expect(await journal.get(record.id)).to.deep.equal(record);
      });

      it("returns the existing record, not a new one, for the same scope and key", async function () {
        const first = await journal.open(trade({ idempotencyKey: "key-1" }));
        const again = await journal.open(trade({ idempotencyKey: "key-1", requestHash: "another body" }));
        expect(again.created).to.equal(false);
        expect(again.record).to.deep.equal(first.record);
      });

      it("creates a separate record for the same key under another scope", async function () {
        const first = await journal.open(trade({ idempotencyKey: "key-1" }));
        const other = await journal.open(trade({ idempotencyKey: "key-1", scope: "api-key-hash-2" }));
        expect(other.created).to.equal(true);
        expect(other.record.id).to.not.equal(first.record.id);
      });

      it("always creates when there is no key", async function () {
        const first = await journal.open(trade());
        const second = await journal.open(trade());
        expect([first.created, second.created]).to.deep.equal([true, true]);
        expect(second.record.id).to.not.equal(first.record.id);
      });

      it("creates exactly one of 20 concurrent opens with one key, across instances", async function () {
        const other = await peer();
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) => (i % 2 ? other : journal).open(trade({ idempotencyKey: "racing" }))),
        );
        expect(results.filter((result) => result.created)).to.have.length(1);
        expect(new Set(results.map((result) => result.record.id)).size).to.equal(1);
      });
    });

    describe("as a trade moves through its states", function () {
      it("records the signed transaction, its fees and deadline, and its nonce's slot", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(7));
        const signed = (await journal.get(record.id))!;
        expect(signed).to.deep.include({ status: "signed", ...signedFields(7) });
        expect(signed.broadcasts).to.have.length(1);
        expect(signed.broadcasts[0]).to.deep.include({
          hash: hashOf(7),
          rawTx: signedTx(7).rawTx,
          maxFeePerGas: 2_240_000_000n,
          maxPriorityFeePerGas: 1n,
          noop: false,
        });
        expect(signed.createdAt).to.deep.equal(record.createdAt);
        expect(signed.updatedAt.getTime()).to.be.at.least(record.createdAt.getTime());
        const [slot] = await (await peer()).openSlots(WALLET);
        expect(slot).to.deep.include({
          wallet: WALLET.toLowerCase(),
          nonce: 7,
          purpose: "trade",
          tradeId: record.id,
          deadline: DEADLINE,
          state: "pending",
          mined: null,
        });
        expect(await journal.findByHash(hashOf(7).toUpperCase().replace("0X", "0x"))).to.deep.include({
          id: record.id,
        });
      });

      it("moves the slot when a trade is signed again at another nonce", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(7));
        await journal.markSigned(record.id, signedTx(9));
        expect((await journal.openSlots(WALLET)).map((slot) => slot.nonce)).to.deep.equal([9]);
        expect((await journal.get(record.id))!.broadcasts.map((b) => b.hash)).to.deep.equal([hashOf(9)]);
        expect(await journal.findByHash(hashOf(7))).to.equal(undefined);
      });

      it("refuses to sign a trade at a nonce another one holds", async function () {
        const [a, b] = [(await journal.open(trade())).record, (await journal.open(trade())).record];
        await journal.markSigned(a.id, signedTx(5));
        const error = await journal.markSigned(b.id, signedTx(5)).then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(error).to.be.instanceOf(Error);
        expect((await journal.get(b.id))!.status).to.equal("accepted");
        expect((await journal.openSlots(WALLET)).map((slot) => slot.tradeId)).to.deep.equal([a.id]);
      });

      it("moves signed → submitted only from signed, and a reorg takes mined or confirmed back to submitted", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(3));
        await journal.markSubmitted(record.id);
        expect((await journal.get(record.id))!.status).to.equal("submitted");
        await journal.markConfirmed(record.id, RECEIPT);
        await journal.markSubmitted(record.id); // late: the confirmation stands
        expect((await journal.get(record.id))!.status).to.equal("confirmed");
        expect((await journal.openSlots(WALLET))[0]).to.deep.include({
          state: "mined",
          mined: { hash: RECEIPT.transactionHash, blockNumber: RECEIPT.blockNumber, blockHash: RECEIPT.blockHash },
        });
        await journal.markReorged(record.id);
        const reorged = (await journal.get(record.id))!;
        expect(reorged).to.deep.include({ status: "submitted", receipt: null });
        expect((await journal.openSlots(WALLET))[0]).to.deep.include({ state: "pending", mined: null });
        await journal.markMined(record.id, RECEIPT);
        expect((await journal.get(record.id))!).to.deep.include({ status: "mined", txHash: RECEIPT.transactionHash });
      });

      it("records an expired trade with its error", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(3));
        await journal.markExpired(record.id, { code: "trade_expired", message: "expired; nothing was paid" });
        expect(await journal.get(record.id)).to.deep.include({
          status: "expired",
          error: { code: "trade_expired", message: "expired; nothing was paid" },
        });
      });

      it("returns the receipt and the request exactly as written, key order included", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(7));
        await journal.markConfirmed(record.id, RECEIPT);
        const confirmed = (await (await peer()).get(record.id))!;
        expect(confirmed.status).to.equal("confirmed");
        expect(confirmed.receipt).to.deep.equal(RECEIPT);
        expect(JSON.stringify(confirmed.receipt)).to.equal(JSON.stringify(RECEIPT));
        expect(JSON.stringify(confirmed.request)).to.equal(JSON.stringify(REQUEST));
      });

      it("records the error of a failed trade", async function () {
        const { record } = await journal.open(trade());
        const error = { code: "reverted", message: "Swap: insufficient liquidity — “USDT” ✓" };
        await journal.markFailed(record.id, error);
        const failed = (await journal.get(record.id))!;
        expect(failed.status).to.equal("failed");
        expect(failed.error).to.deep.equal(error);
        expect(JSON.stringify(failed.error)).to.equal(JSON.stringify(error));
      });

      it("refuses to mark a trade it does not know", async function () {
        const unknown = "00000000-0000-4000-8000-000000000000";
        for (const mark of [
          () => journal.markSigned(unknown, signedTx(1)),
          () => journal.markSubmitted(unknown),
          () => journal.markReorged(unknown),
          () => journal.markMined(unknown, RECEIPT),
          () => journal.markConfirmed(unknown, RECEIPT),
          () => journal.markFailed(unknown, { code: "internal", message: "boom" }),
          () => journal.markExpired(unknown, { code: "trade_expired", message: "boom" }),
        ]) {
          const error = await mark().then(
            () => undefined,
            (caught: unknown) => caught,
          );
          expect(error, "marking an unknown trade").to.be.instanceOf(Error);
        }
      });

      it("keeps the writes made alongside one that is refused", async function () {
        const [a, b, c] = await Promise.all([journal.open(trade()), journal.open(trade()), journal.open(trade())]);
        await journal.markSigned(c.record.id, signedTx(3));
        // Made in one turn of the event loop: the SQLite journal commits them together. Each
        // write's outcome must not depend on the order they reach the database (PostgreSQL runs
        // them on several connections), so the refused discard is of a trade signed before.
        const results = await Promise.allSettled([
          journal.markSigned(a.record.id, signedTx(1)),
          journal.markSigned("00000000-0000-4000-8000-000000000000", signedTx(2)),
          journal.markFailed(b.record.id, { code: "reverted", message: "reverted" }),
          journal.discard(c.record.id), // refused: c's transaction is signed
        ]);
        expect(results.map((result) => result.status)).to.deep.equal([
          "fulfilled",
          "rejected",
          "fulfilled",
          "rejected",
        ]);
        expect(await (await peer()).get(a.record.id)).to.deep.include({ status: "signed", ...signedFields(1) });
        expect((await (await peer()).get(b.record.id))!.status).to.equal("failed");
        expect((await (await peer()).get(c.record.id))!.status).to.equal("signed");
      });

      it("answers undefined for an unknown id, UUID or not", async function () {
        expect(await journal.get("00000000-0000-4000-8000-000000000000")).to.equal(undefined);
        expect(await journal.get("not-a-uuid")).to.equal(undefined);
      });
    });

    describe("when a trade is discarded", function () {
      it("forgets it, so the same key opens afresh", async function () {
        const first = await journal.open(trade({ idempotencyKey: "key-1" }));
        await journal.discard(first.record.id);
        expect(await journal.get(first.record.id)).to.equal(undefined);
        const again = await journal.open(trade({ idempotencyKey: "key-1" }));
        expect(again.created).to.equal(true);
        expect(again.record.id).to.not.equal(first.record.id);
      });

      it("refuses to forget a trade whose transaction was signed", async function () {
        const { record } = await journal.open(trade({ idempotencyKey: "key-1" }));
        await journal.markSigned(record.id, signedTx(3));
        const error = await journal.discard(record.id).then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(error).to.be.instanceOf(Error);
        expect((await journal.get(record.id))?.status).to.equal("signed");
      });

      it("does nothing for an unknown id", async function () {
        await journal.discard("00000000-0000-4000-8000-000000000000");
      });
    });

    describe("forgetUnsigned()", function () {
      it("keeps every trade of a live process, and the signed ones of any", async function () {
        const accepted = (await journal.open(trade({ idempotencyKey: "live" }))).record;
        expect(await journal.forgetUnsigned()).to.equal(0);
        expect(await (await peer()).forgetUnsigned()).to.equal(0);
        expect(await journal.get(accepted.id)).to.not.equal(undefined);
      });

      it("forgets the trades a stopped process accepted and never signed, so their keys open afresh", async function () {
        if (!storage.durable) this.skip();
        const accepted = (await journal.open(trade({ idempotencyKey: "crashed" }))).record;
        const signed = (await journal.open(trade({ idempotencyKey: "sent" }))).record;
        await journal.markSigned(signed.id, signedTx(3));
        await journal.close(); // the process stops (a kill -9 is tested below, and in test/scripts)
        const next = track(await storage.open());
        expect(await next.forgetUnsigned()).to.equal(1);
        expect(await next.get(accepted.id)).to.equal(undefined);
        expect((await next.get(signed.id))?.status).to.equal("signed");
        expect((await next.open(trade({ idempotencyKey: "crashed" }))).created).to.equal(true);
      });
    });

    describe("the nonce ledger", function () {
      it("lists the open slots by nonce, each with its broadcasts oldest first", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(4));
        await journal.recordSlot({ wallet: WALLET, nonce: 2, purpose: "approval", deadline: null }, broadcast(20));
        await journal.recordSlot(
          { wallet: WALLET, nonce: 6, purpose: "filler", deadline: null },
          broadcast(60, { noop: true }),
        );
        await journal.recordSlot(
          { wallet: OTHER_WALLET, nonce: 1, purpose: "filler", deadline: null },
          broadcast(10, { noop: true }),
        );
        const replacement = broadcast(41, { sentAt: new Date(Date.now() + 5) });
        const noop = broadcast(42, { noop: true, maxFeePerGas: 10n ** 30n, sentAt: new Date(Date.now() + 10) });
        expect(await journal.recordBroadcast(WALLET, 4, replacement, hashOf(4))).to.equal(true);
        expect(await journal.recordBroadcast(WALLET.toLowerCase(), 4, noop, hashOf(41))).to.equal(true);

        const slots = await (await peer()).openSlots(WALLET);
        expect(slots.map((slot) => [slot.nonce, slot.purpose])).to.deep.equal([
          [2, "approval"],
          [4, "trade"],
          [6, "filler"],
        ]);
        expect(slots[1]!.broadcasts).to.deep.equal([
          {
            ...stored(broadcast(4)),
            rawTx: signedTx(4).rawTx,
            maxFeePerGas: 2_240_000_000n,
            maxPriorityFeePerGas: 1n,
            sentAt: slots[1]!.broadcasts[0]!.sentAt,
          },
          stored(replacement),
          stored(noop),
        ]);
        expect(slots[2]!.broadcasts).to.deep.equal([
          stored(broadcast(60, { noop: true, sentAt: slots[2]!.broadcasts[0]!.sentAt })),
        ]);
        // The trade's record shows every broadcast, and the latest as the one that counts.
        const record4 = (await journal.get(record.id))!;
        expect(record4.broadcasts.map((b) => b.hash)).to.deep.equal([hashOf(4), hashOf(41), hashOf(42)]);
        expect(record4).to.deep.include({ txHash: hashOf(42), rawTx: noop.rawTx });
        for (const hash of [hashOf(4), hashOf(41), hashOf(42)])
          expect((await journal.findByHash(hash))?.id).to.equal(record.id);
        expect(await journal.findByHash(hashOf(20)), "an approval is no trade").to.equal(undefined);
        expect(await journal.slot(WALLET, 6)).to.deep.include({ purpose: "filler", tradeId: null, state: "pending" });
        expect(await journal.slot(WALLET, 99)).to.equal(undefined);
      });

      it("refuses a second slot at a nonce, and a broadcast at a nonce without one", async function () {
        await journal.recordSlot({ wallet: WALLET, nonce: 2, purpose: "approval", deadline: null }, broadcast(20));
        const twice = await journal
          .recordSlot({ wallet: WALLET, nonce: 2, purpose: "filler", deadline: null }, broadcast(21))
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(twice).to.be.instanceOf(Error);
        expect(await journal.recordBroadcast(WALLET, 3, broadcast(30), hashOf(3)), "no slot").to.equal(false);
        expect((await journal.openSlots(WALLET)).map((slot) => slot.broadcasts.length)).to.deep.equal([1]);
      });

      it("records a broadcast only in place of the slot's last one, while nothing is mined there: a stale replacement is refused and changes nothing", async function () {
        // A cancel or a speed-up read trade T's slot, then waited (the node, the journal). Meanwhile
        // T's send was refused, its slot released, and trade U signed at the same nonce: T's
        // re-signed call must not be recorded (and then broadcast) in U's slot.
        const t = (await journal.open(trade({ idempotencyKey: "t" }))).record;
        await journal.markSigned(t.id, signedTx(5));
        expect(await journal.releaseSlot(WALLET, 5, hashOf(5))).to.equal(true);
        expect(await journal.recordBroadcast(WALLET, 5, broadcast(51), hashOf(5)), "released").to.equal(false);
        const u = (await journal.open(trade({ idempotencyKey: "u" }))).record;
        await journal.markSigned(u.id, { ...signedTx(5), txHash: hashOf(500), rawTx: "0x02f500" });
        expect(await journal.recordBroadcast(WALLET, 5, broadcast(51), hashOf(5)), "another trade's").to.equal(false);
        const slot = (await (await peer()).slot(WALLET, 5))!;
        expect(slot.tradeId).to.equal(u.id);
        expect(slot.broadcasts.map((b) => b.hash)).to.deep.equal([hashOf(500)]);
        expect((await journal.get(u.id))!.txHash).to.equal(hashOf(500));
        expect(await journal.findByHash(hashOf(51))).to.equal(undefined);

        // In place of an older broadcast than the last: refused too (another replacement won).
        expect(await journal.recordBroadcast(WALLET, 5, broadcast(52), hashOf(500))).to.equal(true);
        expect(await journal.recordBroadcast(WALLET, 5, broadcast(53), hashOf(500)), "not the last").to.equal(false);
        // Once something is mined at the nonce, nothing replaces it.
        await journal.markSlot(WALLET, 5, "mined", { hash: hashOf(52), blockNumber: 7, blockHash: hashOf(1007) });
        expect(await journal.recordBroadcast(WALLET, 5, broadcast(54), hashOf(52)), "mined").to.equal(false);
        expect((await journal.slot(WALLET, 5))!.broadcasts.map((b) => b.hash)).to.deep.equal([hashOf(500), hashOf(52)]);
        expect((await journal.get(u.id))!.txHash).to.equal(hashOf(52));
      });

      it("marks slots mined, final, lost or pending again; only pending and mined ones are open", async function () {
        for (const nonce of [1, 2, 3, 4])
          await journal.recordSlot({ wallet: WALLET, nonce, purpose: "approval", deadline: null }, broadcast(nonce));
        const mined = (n: number, block: number) => ({
          hash: hashOf(n),
          blockNumber: block,
          blockHash: hashOf(1000 + block),
        });
        await journal.markSlot(WALLET, 1, "mined", mined(1, 10));
        await journal.markSlot(WALLET, 2, "mined", mined(2, 12));
        await journal.markSlot(WALLET, 3, "lost", null);
        expect(await journal.finalizeSlots(WALLET, 11)).to.equal(1);
        const open = await (await peer()).openSlots(WALLET);
        expect(open.map((slot) => [slot.nonce, slot.state, slot.mined?.blockNumber ?? null])).to.deep.equal([
          [2, "mined", 12],
          [4, "pending", null],
        ]);
        expect(await journal.slot(WALLET, 1)).to.deep.include({ state: "final", mined: mined(1, 10) });
        await journal.markSlot(WALLET, 2, "pending", null); // a reorg
        expect((await journal.slot(WALLET, 2))!.mined).to.equal(null);
        const unknown = await journal.markSlot(WALLET, 9, "mined", mined(9, 1)).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(unknown).to.be.instanceOf(Error);
      });

      it("releases a slot whose only broadcast was refused, and nothing else", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(5));
        await journal.recordSlot({ wallet: WALLET, nonce: 6, purpose: "approval", deadline: null }, broadcast(6));
        await journal.recordBroadcast(WALLET, 6, broadcast(66), hashOf(6));
        expect(await journal.releaseSlot(WALLET, 5, hashOf(99))).to.equal(false); // another hash: kept
        expect(await journal.releaseSlot(WALLET, 6, hashOf(6))).to.equal(false); // two broadcasts: kept
        expect(await journal.releaseSlot(WALLET, 9, hashOf(9))).to.equal(false); // no slot
        expect((await journal.openSlots(WALLET)).map((slot) => slot.nonce)).to.deep.equal([5, 6]);
        expect(await journal.releaseSlot(WALLET, 5, hashOf(5))).to.equal(true);
        expect((await journal.openSlots(WALLET)).map((slot) => slot.nonce)).to.deep.equal([6]);
        expect((await journal.get(record.id))!.broadcasts).to.deep.equal([]);
        // The nonce is free again.
        await journal.recordSlot(
          { wallet: WALLET, nonce: 5, purpose: "filler", deadline: null },
          broadcast(55, { noop: true }),
        );
      });

      it("never releases a slot that is mined, final or lost: what was mined there is seen through", async function () {
        for (const [nonce, state] of [
          [1, "mined"],
          [2, "final"],
          [3, "lost"],
        ] as const) {
          await journal.recordSlot({ wallet: WALLET, nonce, purpose: "approval", deadline: null }, broadcast(nonce));
          await journal.markSlot(
            WALLET,
            nonce,
            state,
            state === "lost" ? null : { hash: hashOf(nonce), blockNumber: 10, blockHash: hashOf(1010) },
          );
          expect(await journal.releaseSlot(WALLET, nonce, hashOf(nonce))).to.equal(false);
          expect((await journal.slot(WALLET, nonce))!.state).to.equal(state);
        }
      });

      it("takes a released slot's trade back to accepted in the same write: never signed without a transaction", async function () {
        const { record } = await journal.open(trade({ idempotencyKey: "released" }));
        await journal.markSigned(record.id, signedTx(5));
        await journal.releaseSlot(WALLET, 5, hashOf(5));
        expect(await journal.get(record.id)).to.deep.include({
          status: "accepted",
          wallet: null,
          nonce: null,
          txHash: null,
          deadline: null,
          broadcasts: [],
        });
        expect(await journal.findByHash(hashOf(5))).to.equal(undefined);
        // Signed again at another nonce, or failed with nothing paid: both go on from accepted.
        await journal.markSigned(record.id, signedTx(6));
        expect((await journal.get(record.id))!.status).to.equal("signed");
        await journal.releaseSlot(WALLET, 6, hashOf(6));
        await journal.markFailed(record.id, { code: "transaction_refused", message: "refused" });
        expect(await journal.get(record.id)).to.deep.include({ status: "failed", broadcasts: [] });
      });

      it("holds back what slots reserve while pending or mined after the block asked about, on every instance", async function () {
        const SWAP = "0x00000000000000000000000000000000000000aa";
        const USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
        const spend = (amount: bigint) => ({ holder: WALLET, asset: USDC, amount });
        const { record } = await journal.open(trade());
        // A sell: its spend and its payout from the swap's reserves, kept with its slot.
        await journal.markSigned(record.id, {
          ...signedTx(5),
          reserves: [spend(10n ** 30n + 7n), { holder: SWAP, asset: USDC, amount: 3n }],
        });
        await journal.recordSlot(
          { wallet: OTHER_WALLET, nonce: 1, purpose: "trade", deadline: null, reserves: [spend(20n)] },
          broadcast(1),
        );
        await journal.recordSlot({ wallet: WALLET, nonce: 6, purpose: "approval", deadline: null }, broadcast(6));
        const other = await peer();
        const held = async (minedAfter: number) =>
          (await other.reservations(minedAfter))
            .map(({ holder, asset, amount }) => `${holder}:${asset}:${amount}`)
            .sort();
        const lower = (address: string) => address.toLowerCase();
        const all = [
          `${lower(SWAP)}:${lower(USDC)}:3`,
          `${lower(WALLET)}:${lower(USDC)}:1000000000000000000000000000007`,
          `${lower(WALLET)}:${lower(USDC)}:20`,
        ].sort();
        expect(await held(100)).to.deep.equal(all);
        // Mined at block 50: held back from a balance read at block 49, not from one at 50.
        await journal.markSlot(OTHER_WALLET, 1, "mined", { hash: hashOf(1), blockNumber: 50, blockHash: hashOf(50) });
        expect(await held(49)).to.deep.equal(all);
        expect(await held(50)).to.deep.equal(all.filter((r) => !r.endsWith(":20")));
        await journal.markSlot(OTHER_WALLET, 1, "final", { hash: hashOf(1), blockNumber: 50, blockHash: hashOf(50) });
        expect(await held(49)).to.have.length(3);
        // Released (nothing of it can be mined), or lost: nothing held back.
        await journal.releaseSlot(WALLET, 5, hashOf(5));
        await journal.markSlot(OTHER_WALLET, 1, "lost", null);
        expect(await held(0)).to.deep.equal([]);
      });

      it("answers the highest nonce that has a slot in any state, open, final or lost", async function () {
        expect(await journal.highestNonce(WALLET)).to.equal(undefined);
        await journal.recordSlot({ wallet: WALLET, nonce: 3, purpose: "approval", deadline: null }, broadcast(3));
        await journal.recordSlot({ wallet: WALLET, nonce: 9, purpose: "filler", deadline: null }, broadcast(9));
        await journal.markSlot(WALLET, 9, "lost", null);
        await journal.recordSlot({ wallet: WALLET, nonce: 7, purpose: "filler", deadline: null }, broadcast(7));
        await journal.markSlot(WALLET, 7, "final", { hash: hashOf(7), blockNumber: 1, blockHash: hashOf(1001) });
        expect(await journal.highestNonce(WALLET.toLowerCase())).to.equal(9);
        expect(await journal.highestNonce(OTHER_WALLET)).to.equal(undefined);
      });

      it("gives a lease to one holder at a time, until it lapses or is released", async function () {
        const other = await peer();
        expect(await journal.acquireLease("monitor:w", "a", 60_000)).to.equal(true);
        expect(await other.acquireLease("monitor:w", "b", 60_000)).to.equal(false);
        expect(await journal.acquireLease("monitor:w", "a", 60_000), "renewed").to.equal(true);
        expect(await other.acquireLease("monitor:other", "b", 60_000), "another name").to.equal(true);
        await journal.releaseLease("monitor:w", "b"); // not b's to release
        expect(await other.acquireLease("monitor:w", "b", 60_000)).to.equal(false);
        await journal.releaseLease("monitor:w", "a");
        expect(await other.acquireLease("monitor:w", "b", 300)).to.equal(true);
        expect(await journal.acquireLease("monitor:w", "a", 60_000)).to.equal(false);
        await sleep(400);
        expect(await journal.acquireLease("monitor:w", "a", 60_000), "b's lease ran out").to.equal(true);
      });

      it("gives a contested lease to exactly one of many holders", async function () {
        const other = await peer();
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            (i % 2 ? other : journal).acquireLease("monitor:race", `holder-${i}`, 60_000),
          ),
        );
        expect(results.filter(Boolean)).to.have.length(1);
      });
    });

    describe("withNonce()", function () {
      it("takes the first nonce from the chain, then counts on without asking it again", async function () {
        let asked = 0;
        const chainNonce = async () => {
          asked++;
          return 7;
        };
        expect(await journal.withNonce(WALLET, chainNonce, async (nonce) => `sent ${nonce}`)).to.equal("sent 7");
        expect(await journal.withNonce(WALLET, chainNonce, async (nonce) => `sent ${nonce}`)).to.equal("sent 8");
        expect(await (await peer()).withNonce(WALLET.toLowerCase(), chainNonce, async (nonce) => nonce)).to.equal(9);
        expect(asked).to.equal(1);
      });

      it("forgets the nonce when send throws, so the next call asks the chain again", async function () {
        let asked = 0;
        const chainNonce = async () => {
          asked++;
          return 20;
        };
        await journal.withNonce(WALLET, chainNonce, async (nonce) => nonce);
        const failure = new Error("nonce too low");
        const thrown = await journal
          .withNonce(WALLET, chainNonce, async () => {
            throw failure;
          })
          .then(
            () => undefined,
            (caught: unknown) => caught,
          );
        expect(thrown).to.equal(failure);
        expect(
          await journal.withNonce(
            WALLET,
            async () => {
              asked++;
              return 30;
            },
            async (nonce) => nonce,
          ),
        ).to.equal(30);
        expect(asked).to.equal(2);
      });

      it("counts on by what a batch send says it consumed, and resyncs when it answers null", async function () {
        let asked = 0;
        const chainNonce = async () => {
          asked++;
          return 40;
        };
        const batch = (size: number) => async (nonce: number) => Array.from({ length: size }, (_, i) => nonce + i);
        expect(await journal.withNonce(WALLET, chainNonce, batch(3), (sent) => sent.length)).to.deep.equal([
          40, 41, 42,
        ]);
        expect(await (await peer()).withNonce(WALLET, chainNonce, batch(2), (sent) => sent.length)).to.deep.equal([
          43, 44,
        ]);
        // Nothing went out: the same nonce again.
        expect(await journal.withNonce(WALLET, chainNonce, batch(0), (sent) => sent.length)).to.deep.equal([]);
        expect(
          await journal.withNonce(
            WALLET,
            chainNonce,
            async (nonce) => nonce,
            () => null,
          ),
        ).to.equal(45);
        expect(asked).to.equal(1);
        // null: some of a batch went out and some did not, so the next send asks the chain.
        expect(
          await journal.withNonce(
            WALLET,
            async () => {
              asked++;
              return 50;
            },
            async (nonce) => nonce,
          ),
        ).to.equal(50);
        expect(asked).to.equal(2);
      });

      it("passes on a failing chainNonce without calling send", async function () {
        const failure = new Error("chain unavailable");
        let sent = false;
        const thrown = await journal
          .withNonce(
            WALLET,
            async () => Promise.reject(failure),
            async () => (sent = true),
          )
          .then(
            () => undefined,
            (caught: unknown) => caught,
          );
        expect(thrown).to.equal(failure);
        expect(sent).to.equal(false);
        expect(
          await journal.withNonce(
            WALLET,
            async () => 5,
            async (nonce) => nonce,
          ),
        ).to.equal(5);
      });

      it("gives 50 concurrent sends on one wallet 50 consecutive nonces, one send at a time", async function () {
        const other = await peer();
        const { record } = await journal.open(trade());
        let running = 0;
        let overlapped = false;
        let asked = 0;
        const nonces = await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            (i % 2 ? other : journal).withNonce(
              WALLET,
              async () => {
                asked++;
                return 100;
              },
              async (nonce) => {
                if (++running > 1) overlapped = true;
                // A send writes the journal while it holds the lock, as the trade use case does.
                await (i % 2 ? journal : other).markSigned(record.id, signedTx(nonce));
                await sleep(i % 3);
                running--;
                return nonce;
              },
            ),
          ),
        );
        expect(overlapped, "two sends ran at once").to.equal(false);
        expect([...nonces].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 50 }, (_, i) => 100 + i));
        expect(asked).to.equal(1);
      });

      it("does not make one wallet wait for another", async function () {
        let otherSent!: () => void;
        const otherHasSent = new Promise<void>((resolve) => (otherSent = resolve));
        // The first send only finishes once the other wallet's send has run: if wallets shared one
        // lock, this would never finish.
        const first = journal.withNonce(
          WALLET,
          async () => 0,
          async (nonce) => {
            await otherHasSent;
            return nonce;
          },
        );
        const second = journal.withNonce(
          OTHER_WALLET,
          async () => 10,
          async (nonce) => {
            otherSent();
            return nonce;
          },
        );
        expect(await within(10_000, Promise.all([first, second]), "the wallets blocked each other")).to.deep.equal([
          0, 10,
        ]);
      });
    });

    describe("the trade history", function () {
      const SCOPE = "history-scope";
      const USDT = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
      const DAI = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";

      /** Opens `n` trades of SCOPE a few ms apart, alternating kinds; returns their ids, oldest first. */
      async function openTrades(n: number, overrides: Partial<NewTrade> = {}): Promise<string[]> {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) {
          const kind = (["sell", "buy", "remittance"] as const)[i % 3]!;
          ids.push((await journal.open(trade({ scope: SCOPE, kind, ...overrides }))).record.id);
          await sleep(2);
        }
        return ids;
      }

      async function allPages(query: Omit<TradePageQuery, "after">) {
        const seen: string[] = [];
        let after: TradePageQuery["after"];
        for (let i = 0; i < 100; i++) {
          const page = await journal.page({ ...query, after });
          seen.push(...page.trades.map((t) => t.id));
          if (page.next === null) return seen;
          after = page.next;
        }
        throw new Error("no last page");
      }

      it("lists a scope's trades newest first, as get() gives them", async function () {
        const ids = await openTrades(5);
        await journal.markSigned(ids[1]!, signedTx(1));
        const page = await journal.page({ visible: { names: [], ids: [SCOPE] }, limit: 50 });
        expect(page.trades.map((t) => t.id)).to.deep.equal([...ids].reverse());
        expect(page.next).to.equal(null);
        expect(page.trades[3]).to.deep.equal(await journal.get(ids[1]!));
      });

      it("orders trades of the same instant by id, and never mixes scopes", async function () {
        const ids = await Promise.all(
          Array.from({ length: 12 }, async () => (await journal.open(trade({ scope: SCOPE }))).record.id),
        );
        await journal.open(trade({ scope: "another-key" }));
        const listed = (await journal.page({ visible: { names: [], ids: [SCOPE] }, limit: 50 })).trades;
        expect(listed.map((t) => t.id).sort()).to.deep.equal([...ids].sort());
        // Ties are ordered by id as the store compares text: the pages below depend on that order only.
        for (let i = 1; i < listed.length; i++)
          expect(listed[i - 1]!.createdAt.getTime()).to.be.at.least(listed[i]!.createdAt.getTime());
        expect((await journal.page({ visible: { names: [], ids: ["another-key"] }, limit: 50 })).trades).to.have.length(
          1,
        );
        expect((await journal.page({ visible: { names: [], ids: ["nobody"] }, limit: 50 })).trades).to.deep.equal([]);
      });

      it("filters by status and by kind", async function () {
        const ids = await openTrades(6);
        await journal.markSigned(ids[0]!, signedTx(1));
        await journal.markConfirmed(ids[0]!, swapReceipt("sell", 1n, 2n));
        await journal.markFailed(ids[4]!, { code: "x", message: "y" });
        const ofStatus = async (status: TradeStatus) =>
          (await journal.page({ visible: { names: [], ids: [SCOPE] }, status, limit: 50 })).trades.map((t) => t.id);
        expect(await ofStatus("confirmed")).to.deep.equal([ids[0]]);
        expect(await ofStatus("failed")).to.deep.equal([ids[4]]);
        expect(await ofStatus("accepted")).to.deep.equal([ids[5], ids[3], ids[2], ids[1]]);
        expect(await ofStatus("expired")).to.deep.equal([]);
        const buys = await journal.page({ visible: { names: [], ids: [SCOPE] }, kind: "buy", limit: 50 });
        expect(buys.trades.map((t) => t.id)).to.deep.equal([ids[4], ids[1]]);
        const acceptedSells = await journal.page({
          visible: { names: [], ids: [SCOPE] },
          kind: "sell",
          status: "accepted",
          limit: 50,
        });
        expect(acceptedSells.trades.map((t) => t.id)).to.deep.equal([ids[3]]);
      });

      it("filters by createdAt in [since, until)", async function () {
        const [a] = await openTrades(1);
        await sleep(10);
        const [b, c] = await openTrades(2);
        await sleep(10);
        const [d] = await openTrades(1);
        const [tb, tc] = [(await journal.get(b!))!.createdAt, (await journal.get(c!))!.createdAt];
        const ids = async (since?: Date, until?: Date) =>
          (await journal.page({ visible: { names: [], ids: [SCOPE] }, since, until, limit: 50 })).trades.map(
            (t) => t.id,
          );
        expect(await ids(tb)).to.deep.equal([d, c, b]);
        expect(await ids(undefined, tb)).to.deep.equal([a]);
        expect(await ids(tb, new Date(tc.getTime() + 1))).to.deep.equal([c, b]);
        expect(await ids(tb, tb)).to.deep.equal([]);
      });

      it("gives at most `limit` trades, and a next position only when more follow", async function () {
        const ids = await openTrades(4);
        const one = await journal.page({ visible: { names: [], ids: [SCOPE] }, limit: 1 });
        expect(one.trades.map((t) => t.id)).to.deep.equal([ids[3]]);
        expect(one.next).to.deep.include({ id: ids[3] });
        const exact = await journal.page({ visible: { names: [], ids: [SCOPE] }, limit: 4 });
        expect(exact.trades).to.have.length(4);
        expect(exact.next).to.equal(null);
        expect((await journal.page({ visible: { names: [], ids: [SCOPE] }, limit: 500 })).trades).to.have.length(4);
      });

      it("pages through every trade exactly once while new trades arrive between pages", async function () {
        const ids = await openTrades(10);
        const seen: string[] = [];
        let after: TradePageQuery["after"];
        for (;;) {
          const page = await journal.page({ visible: { names: [], ids: [SCOPE] }, limit: 3, after });
          seen.push(...page.trades.map((t) => t.id));
          await openTrades(2); // newer than everything listed so far
          if (page.next === null) break;
          after = page.next;
        }
        expect(seen).to.deep.equal([...ids].reverse());
        expect(new Set(seen).size).to.equal(seen.length);
      });

      it("pages exactly through trades of the same instant, under a filter too", async function () {
        const ids = await Promise.all(
          Array.from({ length: 15 }, async () => (await journal.open(trade({ scope: SCOPE, kind: "sell" }))).record.id),
        );
        const pages = await allPages({ visible: { names: [], ids: [SCOPE] }, kind: "sell", limit: 4 });
        expect([...pages].sort()).to.deep.equal([...ids].sort());
        expect(new Set(pages).size).to.equal(15);
        expect(pages).to.deep.equal(
          (await journal.page({ visible: { names: [], ids: [SCOPE] }, limit: 50 })).trades.map((t) => t.id),
        );
      });

      it("sums exactly per kind and stable coin: amounts from the receipts, gas in wei", async function () {
        const big = 10n ** 30n + 7n; // beyond 2^63, and odd
        const [sell1, sell2, buy1, buyDai, failed, other] = [
          await journal.open(trade({ scope: SCOPE, kind: "sell" })),
          await journal.open(
            trade({ scope: SCOPE, kind: "sell", request: { ...REQUEST, usdAddress: USDT.toLowerCase() } }),
          ),
          await journal.open(trade({ scope: SCOPE, kind: "buy" })),
          await journal.open(trade({ scope: SCOPE, kind: "buy", request: { ...REQUEST, usdAddress: DAI } })),
          await journal.open(trade({ scope: SCOPE, kind: "sell" })),
          await journal.open(trade({ scope: "another-key", kind: "sell" })),
        ].map((opened) => opened.record.id);
        await journal.markSigned(sell1!, signedTx(1));
        await journal.markConfirmed(
          sell1!,
          swapReceipt("sell", big, 12_500_000n, { gasUsed: 100_000, effectiveGasPrice: 3_000_000_001 }),
        );
        await journal.markSigned(sell2!, signedTx(2));
        await journal.markMined(sell2!, swapReceipt("sell", big, 1n, { gasUsed: 90_000, effectiveGasPrice: 7 }));
        await journal.markSigned(buy1!, signedTx(3));
        await journal.markConfirmed(buy1!, swapReceipt("buy", 5_000_000n, big));
        await journal.markSigned(buyDai!, signedTx(4));
        await journal.markConfirmed(buyDai!, swapReceipt("buy", 1n, 2n));
        await journal.markReorged(buyDai!); // its block is gone: nothing executed
        await journal.markFailed(failed!, { code: "trade_reverted", message: "reverted" });
        await journal.markSigned(other!, signedTx(5));
        await journal.markConfirmed(other!, swapReceipt("sell", 1n, 1n));

        expect(await journal.summary({ visible: { names: [], ids: [SCOPE] } })).to.deep.equal([
          {
            kind: "buy",
            stable: USDT.toLowerCase(),
            count: 1,
            executed: 1,
            amountIn: 5_000_000n,
            amountOut: big,
            gasWei: 92_160n * 1_875_000_007n,
            gasUsd: null, // signed without the native coin's price
            statuses: { confirmed: 1 },
          },
          {
            kind: "buy",
            stable: DAI.toLowerCase(),
            count: 1,
            executed: 0,
            amountIn: 0n,
            amountOut: 0n,
            gasWei: 0n,
            gasUsd: 0n,
            statuses: { submitted: 1 },
          },
          {
            kind: "sell",
            stable: USDT.toLowerCase(),
            count: 3,
            executed: 2,
            amountIn: 2n * big,
            amountOut: 12_500_001n,
            gasWei: 100_000n * 3_000_000_001n + 90_000n * 7n,
            gasUsd: null,
            statuses: { confirmed: 1, mined: 1, failed: 1 },
          },
        ]);
        expect(await journal.summary({ visible: { names: [], ids: ["nobody"] } })).to.deep.equal([]);
      });

      it("keeps each trade's gas in USD at the native coin's price it was signed at, exactly, and clears it on a reorg", async function () {
        // USD per native coin at 18 decimals: 2512.3456789 and 3; gas USD at 36 decimals (wei × price).
        const [ethUsd1, ethUsd2] = [2_512_345_678_900_000_000_000n, 3n * 10n ** 18n];
        const [a, b, c] = await openTrades(3, { kind: "sell" });
        await journal.markSigned(a!, { ...signedTx(1), nativeUsd: ethUsd1 });
        await journal.markConfirmed(
          a!,
          swapReceipt("sell", 1n, 1n, { gasUsed: 100_000, effectiveGasPrice: 3_000_000_001 }),
        );
        await journal.markSigned(b!, { ...signedTx(2), nativeUsd: ethUsd2 });
        const minedB = swapReceipt("sell", 1n, 1n, { gasUsed: 90_000, effectiveGasPrice: 7 });
        await journal.markMined(b!, minedB);
        const gasUsd = async () =>
          (await journal.summary({ visible: { names: [], ids: [SCOPE] } })).map((t) => [t.executed, t.gasUsd]);
        const [usdA, usdB] = [100_000n * 3_000_000_001n * ethUsd1, 90_000n * 7n * ethUsd2];
        expect(await gasUsd()).to.deep.equal([[2, usdA + usdB]]);

        await journal.markReorged(b!); // its block is gone: its gas is no longer spent
        expect(await gasUsd()).to.deep.equal([[1, usdA]]);
        await journal.markMined(b!, minedB); // mined again: at the price it was signed at
        expect(await gasUsd()).to.deep.equal([[2, usdA + usdB]]);

        // An executed trade signed without the price (no native feed, or an older deployment): the group's is unknown.
        await journal.markSigned(c!, signedTx(3));
        await journal.markConfirmed(c!, swapReceipt("sell", 1n, 1n, { gasUsed: 1, effectiveGasPrice: 1 }));
        expect(await gasUsd()).to.deep.equal([[3, null]]);
        const [totals] = await journal.summary({ visible: { names: [], ids: [SCOPE] } });
        expect(totals!.gasWei).to.equal(100_000n * 3_000_000_001n + 90_000n * 7n + 1n);
      });

      it("sums only the trades created in [since, until)", async function () {
        const [a] = await openTrades(1, { kind: "sell" });
        await sleep(10);
        const [b] = await openTrades(1, { kind: "sell" });
        for (const [id, nonce] of [
          [a!, 1],
          [b!, 2],
        ] as const) {
          await journal.markSigned(id, signedTx(nonce));
          await journal.markConfirmed(
            id,
            swapReceipt("sell", BigInt(nonce), 10n, { gasUsed: 1, effectiveGasPrice: nonce }),
          );
        }
        const tb = (await journal.get(b!))!.createdAt;
        const totals = async (since?: Date, until?: Date) =>
          (await journal.summary({ visible: { names: [], ids: [SCOPE] }, since, until })).map((t) => [
            t.count,
            t.amountIn,
            t.gasWei,
          ]);
        expect(await totals()).to.deep.equal([[2, 3n, 3n]]);
        expect(await totals(tb)).to.deep.equal([[1, 2n, 2n]]);
        expect(await totals(undefined, tb)).to.deep.equal([[1, 1n, 1n]]);
        expect(await totals(tb, tb)).to.deep.equal([]);
      });
    });

    describe("across a restart", function () {
      beforeEach(function () {
        if (!storage.durable) this.skip();
      });

      it("keeps the trades and the next nonce after close and reopen", async function () {
        const { record } = await journal.open(trade({ idempotencyKey: "key-1" }));
        await journal.markSigned(record.id, signedTx(4));
        await journal.markConfirmed(record.id, RECEIPT);
        await journal.withNonce(
          WALLET,
          async () => 4,
          async (nonce) => nonce,
        );
        await journal.close();

        const reopened = track(await storage.open());
        const again = await reopened.open(trade({ idempotencyKey: "key-1" }));
        expect(again.created).to.equal(false);
        expect(JSON.stringify(again.record.receipt)).to.equal(JSON.stringify(RECEIPT));
        expect(
          await reopened.withNonce(
            WALLET,
            async () => 0,
            async (nonce) => nonce,
          ),
        ).to.equal(5);
      });

      it("keeps the native coin's price a trade was signed at, for its gas in USD once mined after a restart", async function () {
        const { record } = await journal.open(trade({ scope: "restart-usd", kind: "sell" }));
        await journal.markSigned(record.id, { ...signedTx(4), nativeUsd: 1_999_990_000_000_000_000_000n });
        await journal.close();

        const reopened = track(await storage.open());
        await reopened.markConfirmed(
          record.id,
          swapReceipt("sell", 1n, 1n, { gasUsed: 92_160, effectiveGasPrice: 1_875_000_007 }),
        );
        const [totals] = await reopened.summary({ visible: { names: [], ids: ["restart-usd"] } });
        expect(totals!.gasUsd).to.equal(92_160n * 1_875_000_007n * 1_999_990_000_000_000_000_000n);
      });

      it("survives kill -9 in the middle of a send: writes kept, lock released, nonce resynced", async function () {
        this.timeout(60_000);
        await journal.close();
        const child = spawnHolder({ ...storage.config, leaseMs: 500 });
        try {
          const { id, nonce: sending } = await within(30_000, child.ready, "the child process did not start");
          expect(sending, "the child's second send used the stored nonce").to.equal(41);
          if (storage.shared) {
            // The child holds the wallet's lock: a call here waits for it.
            const peerJournal = track(await storage.open());
            let asked = 0;
            const waiting = peerJournal.withNonce(
              WALLET,
              async () => {
                asked++;
                return 60;
              },
              async (nonce) => nonce,
            );
            await sleep(500);
            expect(asked, "a send ran while another process held the lock").to.equal(0);
            child.kill();
            expect(await within(10_000, waiting, "the lock was not released")).to.equal(60);
            expect(asked).to.equal(1);
          } else {
            const refused = await storage.open().then(
              (instance) => track(instance) && undefined,
              (caught: unknown) => caught,
            );
            expect(refused, "a second process opened the journal").to.be.instanceOf(Error);
            expect(String(refused)).to.match(/in use by another process/);
            child.kill();
            await child.exited;
          }
          const after = track(await storage.open());
          expect((await after.openSlots(WALLET)).map((slot) => slot.tradeId)).to.include(id);
          // The trade it had accepted and not signed was never paid: forgotten once its lease ran out.
          await sleep(600);
          expect(await after.forgetUnsigned()).to.equal(1);
          expect((await after.open(trade({ idempotencyKey: "accepted-by-the-dead" }))).created).to.equal(true);
          if (!storage.shared) {
            // The child stored 41 as next nonce, then died sending with it: the chain decides now.
            let asked = 0;
            expect(
              await after.withNonce(
                WALLET,
                async () => {
                  asked++;
                  return 77;
                },
                async (nonce) => nonce,
              ),
            ).to.equal(77);
            expect(asked).to.equal(1);
          }
        } finally {
          child.kill();
          await child.exited;
        }
      });
    });

    describe("so that no Idempotency-Key stays stuck", function () {
      it("forgets this process's own trades left accepted longer than the bound it is given, and nothing else", async function () {
        const stale = (await journal.open(trade({ idempotencyKey: "stale" }))).record;
        const signed = (await journal.open(trade({ idempotencyKey: "signed" }))).record;
        await journal.markSigned(signed.id, signedTx(3));
        // Another live instance's trade is that instance's to forget (PostgreSQL only: one process otherwise).
        const others = storage.shared ? (await (await peer()).open(trade({ idempotencyKey: "other's" }))).record : null;
        await sleep(400);
        const fresh = (await journal.open(trade({ idempotencyKey: "fresh" }))).record;
        expect(await journal.forgetUnsigned(300)).to.equal(1);
        expect(await journal.get(stale.id)).to.equal(undefined);
        expect(await journal.get(fresh.id)).to.not.equal(undefined);
        expect((await journal.get(signed.id))?.status).to.equal("signed");
        if (others !== null) expect(await journal.get(others.id)).to.not.equal(undefined);
        expect((await journal.open(trade({ idempotencyKey: "stale" }))).created).to.equal(true);
        // Without a bound, a live process's trades are all kept.
        await sleep(400);
        expect(await journal.forgetUnsigned()).to.equal(0);
      });

      it("refuses to sign a trade it forgot, so nothing of it can be sent", async function () {
        const { record } = await journal.open(trade({ idempotencyKey: "forgotten" }));
        await sleep(400);
        expect(await journal.forgetUnsigned(300)).to.equal(1);
        const error = await journal.markSigned(record.id, signedTx(4)).then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(error, "signing a forgotten trade").to.be.instanceOf(Error);
        expect(await journal.openSlots(WALLET)).to.deep.equal([]);
      });

      it("never overwrites an expired trade as failed: its outcome stays expired, with its error", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(3));
        const expired = { code: "trade_expired", message: "expired; nothing was paid" };
        await journal.markExpired(record.id, expired);
        await journal.markFailed(record.id, { code: "trade_dropped", message: "the nonce was taken" });
        expect(await (await peer()).get(record.id)).to.deep.include({ status: "expired", error: expired });
        // A trade it does not know is still refused.
        const unknown = await journal.markFailed("00000000-0000-4000-8000-000000000000", expired).then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(unknown, "marking an unknown trade failed").to.be.instanceOf(Error);
      });
    });
  });
}

/**
 * Another process that opens the journal through `openJournal`, signs a trade, sends with nonce 40,
 * then starts sending with 41 and never finishes, until killed.
 */
function spawnHolder(config: { url?: string; dataDir: string; leaseMs?: number }) {
  const script = `
    const { openJournal } = await import(process.env.JOURNAL_MODULE);
    const journal = await openJournal(JSON.parse(process.env.JOURNAL_CONFIG));
    await journal.open(${JSON.stringify(trade({ idempotencyKey: "accepted-by-the-dead" }))});
    const { record } = await journal.open(${JSON.stringify(trade())});
    const signed = ${JSON.stringify({ ...signedTx(40), maxFeePerGas: "2240000000", maxPriorityFeePerGas: "1" })};
    await journal.markSigned(record.id, { ...signed, maxFeePerGas: BigInt(signed.maxFeePerGas), maxPriorityFeePerGas: BigInt(signed.maxPriorityFeePerGas) });
    await journal.withNonce(${JSON.stringify(WALLET)}, async () => 40, async (nonce) => nonce);
    setInterval(() => {}, 60_000);
    journal.withNonce(${JSON.stringify(WALLET)}, async () => 0, async (nonce) => {
      process.stdout.write(JSON.stringify({ id: record.id, nonce }) + "\\n");
      await new Promise(() => {});
    });
  `;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: REPO_ROOT,
    env: { ...process.env, JOURNAL_MODULE: INDEX_MODULE, JOURNAL_CONFIG: JSON.stringify(config) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const ready = new Promise<{ id: string; nonce: number }>((resolve, reject) => {
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes("\n")) resolve(JSON.parse(stdout.split("\n")[0]!) as { id: string; nonce: number });
    });
    void exited.then(() => reject(new Error(`the child process exited early: ${stderr}`)));
  });
  return {
    ready,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}
