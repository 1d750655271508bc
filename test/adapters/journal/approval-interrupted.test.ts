/**
 * An approved trade the upkeep fails as approval_interrupted ("nothing was paid: send it again")
 * while its run is still alive (a slow proof, the wallet's queue, a slow signer, or another
 * instance's sweep on PostgreSQL) is never signed by that run: its client was told to send it
 * again, and its room in the limits was given back.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { openSqliteJournal } from "../../../adapters/journal/index.js";
import type { SignedTradeTx } from "../../../core/index.js";
import { approvedTrade } from "../../helpers/approved-trade.js";

const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const tx: SignedTradeTx = {
  wallet: WALLET,
  nonce: 7,
  txHash: `0x${"7".padStart(64, "0")}`,
  rawTx: "0x02f807",
  maxFeePerGas: 2_000_000_000n,
  maxPriorityFeePerGas: 1n,
  deadline: 1_900_000_000,
};

describe("an approved trade failed as interrupted while its run goes on (SQLite)", function () {
  it("fails at once an approved trade a process that is gone left unsigned, and never this process's own before its time", async function () {
    const dir = await mkdtemp(join(tmpdir(), "interrupted-"));
    const path = join(dir, "journal.sqlite");
    const first = await openSqliteJournal(path);
    let id: string;
    try {
      id = await approvedTrade(first, "k-restart");
      // Its run is alive in this process: the sweep with the 10-minute bound leaves it.
      expect((await first.expireApprovals(new Date(), new Date(Date.now() - 600_000))).failed).to.deep.equal([]);
    } finally {
      await first.close();
    }
    // The process stopped before signing it; on SQLite the next process is the only one.
    const next = await openSqliteJournal(path);
    try {
      const swept = await next.expireApprovals(new Date(), new Date(Date.now() - 600_000));
      expect(swept.failed, "failed at the first sweep after the restart, not 10 minutes later").to.deep.equal([id]);
      expect((await next.get(id))?.error?.code).to.equal("approval_interrupted");
      const own = await approvedTrade(next, "k-own");
      expect((await next.expireApprovals(new Date(), new Date(Date.now() - 600_000))).failed).to.deep.equal([]);
      expect((await next.get(own))?.status).to.equal("approved");
    } finally {
      await next.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("never signs a trade the sweep failed as approval_interrupted", async function () {
    const dir = await mkdtemp(join(tmpdir(), "interrupted-"));
    const journal = await openSqliteJournal(join(dir, "journal.sqlite"));
    try {
      const record = { id: await approvedTrade(journal, "k1") };
      // The run is in prove/reserve/sign (the wallet's queue, the signer) when the sweep runs
      // APPROVED_STALE_MS later: simulated by a staleBefore after the approval.
      const swept = await journal.expireApprovals(new Date(), new Date(Date.now() + 1000));
      expect(swept.failed).to.deep.equal([record.id]);
      const failed = await journal.get(record.id);
      expect(failed?.error?.code).to.equal("approval_interrupted");
      // The run goes on and journals its signature before broadcasting:
      let signedError: unknown;
      await journal.markSigned(record.id, tx).catch((error: unknown) => (signedError = error));
      const after = await journal.get(record.id);
      expect(signedError, "markSigned must be refused on a trade failed as approval_interrupted").to.not.equal(
        undefined,
      );
      expect(after?.status).to.equal("failed");
    } finally {
      await journal.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
