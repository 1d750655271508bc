import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { openJournal, openSqliteJournal } from "../../../adapters/journal/index.js";
import { describeJournalContract } from "./journal.contract.js";

describeJournalContract("SQLite", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "journal-sqlite-"));
  return {
    // The path openJournal uses; a short busy timeout, so a refused second open fails fast.
    open: () => openSqliteJournal(join(dataDir, "journal.sqlite"), { busyTimeoutMs: 200 }),
    shared: false,
    durable: true,
    config: { dataDir },
    dispose: () => rm(dataDir, { recursive: true, force: true }),
  };
});

describe("the SQLite trade journal file", function () {
  let dataDir: string;

  beforeEach(async function () {
    dataDir = await mkdtemp(join(tmpdir(), "journal-sqlite-"));
  });

  afterEach(async function () {
    await rm(dataDir, { recursive: true, force: true });
  });

  it("is created with its directory when missing", async function () {
    const journal = await openJournal({ dataDir: join(dataDir, "nested", "dir") });
    expect((await journal.open({ scope: "s", idempotencyKey: null, requestHash: "h", kind: "sell", request: { userAddress: "a", destinatary: "b", amount: "1", usdAddress: "c" } })).created).to.equal(true);
    await journal.close();
    await journal.close(); // closing twice is harmless
  });

  it("keeps a write made just before close()", async function () {
    const path = join(dataDir, "journal.sqlite");
    const journal = await openSqliteJournal(path);
    const { record } = await journal.open({ scope: "s", idempotencyKey: null, requestHash: "h", kind: "sell", request: { userAddress: "a", destinatary: "b", amount: "1", usdAddress: "c" } });
    const marked = journal.markFailed(record.id, { code: "reverted", message: "reverted" });
    await journal.close();
    await marked;
    const reopened = await openSqliteJournal(path);
    expect((await reopened.get(record.id))!.status).to.equal("failed");
    await reopened.close();
    expect(await journal.markFailed(record.id, { code: "x", message: "y" }).then(() => "written", (error: unknown) => String(error))).to.match(/journal is closed/);
  });

  it("cannot be opened twice at once, and can be once closed", async function () {
    const path = join(dataDir, "journal.sqlite");
    const first = await openSqliteJournal(path);
    let refused: unknown;
    try {
      await openSqliteJournal(path, { busyTimeoutMs: 100 }).then((second) => second.close());
    } catch (error) {
      refused = error;
    }
    expect(String(refused)).to.match(/journal .*journal\.sqlite is in use by another process/);
    await first.close();
    await (await openSqliteJournal(path)).close();
  });
});

describe("openJournal", function () {
  it("refuses a URL that is neither PostgreSQL nor empty, without echoing it", async function () {
    const error = await openJournal({ url: "mysql://user:secret@db/journal", dataDir: tmpdir() }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(String(error)).to.match(/scheme "mysql" is not supported/);
    expect(String(error)).to.not.include("secret");
  });
});
