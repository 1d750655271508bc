/**
 * SQLite fails at once the approved trades the file held when this process opened it (their
 * process is gone), found by status, not by the wall clock: a clock stepped back after the open
 * (NTP correcting a fast clock at boot, a VM resumed) never makes this process's own live run
 * look like one of them.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { openSqliteJournal } from "../../../adapters/journal/index.js";
import { approvedTrade } from "../../helpers/approved-trade.js";

describe("SQLite's approved trades of a process that is gone, and the wall clock", function () {
  it("never fails this process's own live approved run at the next sweep, though the clock stepped back 5 s after the open", async function () {
    const dir = await mkdtemp(join(tmpdir(), "opened-clock-"));
    const journal = await openSqliteJournal(join(dir, "journal.sqlite"));
    const realNow = Date.now;
    try {
      // The clock is stepped back by 5 s just after the service opened its journal.
      const offset = -5_000;
      Date.now = () => realNow() + offset;
      await approvedTrade(journal, "k");
      // Its run is alive in this process; the upkeep's sweep, one second later, with its 10-minute bound:
      const now = Date.now();
      const swept = await journal.expireApprovals(new Date(now), new Date(now - 600_000));
      expect(swept.failed, "this process's own live run must not be failed").to.deep.equal([]);
    } finally {
      Date.now = realNow;
      await journal.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
