/** The in-memory journal (adapters/journal/memory/), for the core's and the chain adapter's tests. */
export { MemoryJournal } from "../../adapters/journal/index.js";
