/**
 * The conformance suite every TradeJournal adapter passes: `describeJournalContract(name, factory)`.
 * The factory gives each test its own empty storage.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

import type { NewTrade, TradeJournal } from "../../../core/ports/journal.port.js";
import type { TradeRequest, TransactionReceipt } from "../../../core/types.js";

export interface JournalStorage {
  /** Opens a journal on this test's storage: each call a separate instance (its own connections). */
  open(): Promise<TradeJournal>;
  /** PostgreSQL: several instances share the storage. SQLite: only one may have it open. */
  shared: boolean;
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
  return { scope: "api-key-hash-1", idempotencyKey: null, requestHash: "hash-1", kind: "buy", request: REQUEST, ...overrides };
}

function signedTx(nonce: number) {
  return { wallet: WALLET, nonce, txHash: `0x${nonce.toString(16).padStart(64, "0")}`, rawTx: `0x02f8${nonce.toString(16)}` };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} (after ${ms} ms)`)), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function describeJournalContract(name: string, factory: () => Promise<JournalStorage>): void {
  describe(`the ${name} trade journal`, function () {
    let storage: JournalStorage;
    let opened: TradeJournal[];
    let journal: TradeJournal;

    /** A second instance on the same storage when the backend allows it, else the same one. */
    async function peer(): Promise<TradeJournal> {
      return storage.shared ? track(await storage.open()) : journal;
    }

    function track(instance: TradeJournal): TradeJournal {
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
      it("records the signed transaction", async function () {
        const { record } = await journal.open(trade());
        await journal.markSigned(record.id, signedTx(7));
        const signed = (await journal.get(record.id))!;
        expect(signed).to.deep.include({ status: "signed", ...signedTx(7) });
        expect(signed.createdAt).to.deep.equal(record.createdAt);
        expect(signed.updatedAt.getTime()).to.be.at.least(record.createdAt.getTime());
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
          () => journal.markConfirmed(unknown, RECEIPT),
          () => journal.markFailed(unknown, { code: "internal", message: "boom" }),
        ]) {
          const error = await mark().then(() => undefined, (caught: unknown) => caught);
          expect(error, "marking an unknown trade").to.be.instanceOf(Error);
        }
      });

      it("keeps the writes made alongside one that is refused", async function () {
        const [a, b] = await Promise.all([journal.open(trade()), journal.open(trade())]);
        // Made in one turn of the event loop: the SQLite journal commits them together.
        const results = await Promise.allSettled([
          journal.markSigned(a.record.id, signedTx(1)),
          journal.markSigned("00000000-0000-4000-8000-000000000000", signedTx(2)),
          journal.markFailed(b.record.id, { code: "reverted", message: "reverted" }),
          journal.discard(a.record.id), // refused: a's transaction is signed by then
        ]);
        expect(results.map((result) => result.status)).to.deep.equal(["fulfilled", "rejected", "fulfilled", "rejected"]);
        expect(await (await peer()).get(a.record.id)).to.deep.include({ status: "signed", ...signedTx(1) });
        expect((await (await peer()).get(b.record.id))!.status).to.equal("failed");
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
        const error = await journal.discard(record.id).then(() => undefined, (caught: unknown) => caught);
        expect(error).to.be.instanceOf(Error);
        expect((await journal.get(record.id))?.status).to.equal("signed");
      });

      it("does nothing for an unknown id", async function () {
        await journal.discard("00000000-0000-4000-8000-000000000000");
      });
    });

    describe("unresolved()", function () {
      it("lists only the signed trades, oldest first", async function () {
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push((await journal.open(trade())).record.id);
        // Signed out of creation order; one of them then confirmed, one failed.
        for (const i of [3, 0, 4, 1]) await journal.markSigned(ids[i]!, signedTx(i));
        await journal.markConfirmed(ids[4]!, RECEIPT);
        await journal.markFailed(ids[1]!, { code: "reverted", message: "reverted" });
        const unresolved = await journal.unresolved();
        expect(unresolved.map((record) => record.id)).to.deep.equal([ids[0], ids[3]]);
        expect(unresolved[0]).to.deep.include({ status: "signed", ...signedTx(0) });
      });

      it("is empty for an empty journal", async function () {
        expect(await journal.unresolved()).to.deep.equal([]);
      });
    });

    describe("withNonce()", function () {
      it("takes the first nonce from the chain, then counts on without asking it again", async function () {
        let asked = 0;
        const chainNonce = async () => (asked++, 7);
        expect(await journal.withNonce(WALLET, chainNonce, async (nonce) => `sent ${nonce}`)).to.equal("sent 7");
        expect(await journal.withNonce(WALLET, chainNonce, async (nonce) => `sent ${nonce}`)).to.equal("sent 8");
        expect(await (await peer()).withNonce(WALLET.toLowerCase(), chainNonce, async (nonce) => nonce)).to.equal(9);
        expect(asked).to.equal(1);
      });

      it("forgets the nonce when send throws, so the next call asks the chain again", async function () {
        let asked = 0;
        const chainNonce = async () => (asked++, 20);
        await journal.withNonce(WALLET, chainNonce, async (nonce) => nonce);
        const failure = new Error("nonce too low");
        const thrown = await journal
          .withNonce(WALLET, chainNonce, async () => {
            throw failure;
          })
          .then(() => undefined, (caught: unknown) => caught);
        expect(thrown).to.equal(failure);
        expect(await journal.withNonce(WALLET, async () => (asked++, 30), async (nonce) => nonce)).to.equal(30);
        expect(asked).to.equal(2);
      });

      it("counts on by what a batch send says it consumed, and resyncs when it answers null", async function () {
        let asked = 0;
        const chainNonce = async () => (asked++, 40);
        const batch = (size: number) => async (nonce: number) => Array.from({ length: size }, (_, i) => nonce + i);
        expect(await journal.withNonce(WALLET, chainNonce, batch(3), (sent) => sent.length)).to.deep.equal([40, 41, 42]);
        expect(await (await peer()).withNonce(WALLET, chainNonce, batch(2), (sent) => sent.length)).to.deep.equal([43, 44]);
        // Nothing went out: the same nonce again.
        expect(await journal.withNonce(WALLET, chainNonce, batch(0), (sent) => sent.length)).to.deep.equal([]);
        expect(await journal.withNonce(WALLET, chainNonce, async (nonce) => nonce, () => null)).to.equal(45);
        expect(asked).to.equal(1);
        // null: some of a batch went out and some did not, so the next send asks the chain.
        expect(await journal.withNonce(WALLET, async () => (asked++, 50), async (nonce) => nonce)).to.equal(50);
        expect(asked).to.equal(2);
      });

      it("passes on a failing chainNonce without calling send", async function () {
        const failure = new Error("chain unavailable");
        let sent = false;
        const thrown = await journal
          .withNonce(WALLET, async () => Promise.reject(failure), async () => (sent = true))
          .then(() => undefined, (caught: unknown) => caught);
        expect(thrown).to.equal(failure);
        expect(sent).to.equal(false);
        expect(await journal.withNonce(WALLET, async () => 5, async (nonce) => nonce)).to.equal(5);
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
              async () => (asked++, 100),
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
        const first = journal.withNonce(WALLET, async () => 0, async (nonce) => {
          await otherHasSent;
          return nonce;
        });
        const second = journal.withNonce(OTHER_WALLET, async () => 10, async (nonce) => {
          otherSent();
          return nonce;
        });
        expect(await within(10_000, Promise.all([first, second]), "the wallets blocked each other")).to.deep.equal([0, 10]);
      });
    });

    describe("across a restart", function () {
      it("keeps the trades and the next nonce after close and reopen", async function () {
        const { record } = await journal.open(trade({ idempotencyKey: "key-1" }));
        await journal.markSigned(record.id, signedTx(4));
        await journal.markConfirmed(record.id, RECEIPT);
        await journal.withNonce(WALLET, async () => 4, async (nonce) => nonce);
        await journal.close();

        const reopened = track(await storage.open());
        const again = await reopened.open(trade({ idempotencyKey: "key-1" }));
        expect(again.created).to.equal(false);
        expect(JSON.stringify(again.record.receipt)).to.equal(JSON.stringify(RECEIPT));
        expect(await reopened.withNonce(WALLET, async () => 0, async (nonce) => nonce)).to.equal(5);
      });

      it("survives kill -9 in the middle of a send: writes kept, lock released, nonce resynced", async function () {
        this.timeout(60_000);
        await journal.close();
        const child = spawnHolder(storage.config);
        try {
          const { id, nonce: sending } = await within(30_000, child.ready, "the child process did not start");
          expect(sending, "the child's second send used the stored nonce").to.equal(41);
          if (storage.shared) {
            // The child holds the wallet's lock: a call here waits for it.
            const peerJournal = track(await storage.open());
            let asked = 0;
            const waiting = peerJournal.withNonce(WALLET, async () => (asked++, 60), async (nonce) => nonce);
            await sleep(500);
            expect(asked, "a send ran while another process held the lock").to.equal(0);
            child.kill();
            expect(await within(10_000, waiting, "the lock was not released")).to.equal(60);
            expect(asked).to.equal(1);
          } else {
            const refused = await storage.open().then((instance) => track(instance) && undefined, (caught: unknown) => caught);
            expect(refused, "a second process opened the journal").to.be.instanceOf(Error);
            expect(String(refused)).to.match(/in use by another process/);
            child.kill();
            await child.exited;
          }
          const after = track(await storage.open());
          expect((await after.unresolved()).map((record) => record.id)).to.include(id);
          if (!storage.shared) {
            // The child stored 41 as next nonce, then died sending with it: the chain decides now.
            let asked = 0;
            expect(await after.withNonce(WALLET, async () => (asked++, 77), async (nonce) => nonce)).to.equal(77);
            expect(asked).to.equal(1);
          }
        } finally {
          child.kill();
          await child.exited;
        }
      });
    });
  });
}

/**
 * Another process that opens the journal through `openJournal`, signs a trade, sends with nonce 40,
 * then starts sending with 41 and never finishes, until killed.
 */
function spawnHolder(config: { url?: string; dataDir: string }) {
  const script = `
    const { openJournal } = await import(process.env.JOURNAL_MODULE);
    const journal = await openJournal(JSON.parse(process.env.JOURNAL_CONFIG));
    const { record } = await journal.open(${JSON.stringify(trade())});
    await journal.markSigned(record.id, ${JSON.stringify(signedTx(40))});
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
