import { MemoryJournal } from "../../../adapters/journal/index.js";
import { describeJournalContract } from "./journal.contract.js";

describeJournalContract("in-memory", async () => {
  // One store per test: every open() of it is the same instance, as in one process.
  const journal = new MemoryJournal();
  return {
    open: async () => journal,
    shared: false,
    durable: false,
    config: { dataDir: "/nonexistent" },
    dispose: async () => {},
  };
});
