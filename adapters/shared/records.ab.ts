/**
 * The switch of the records bench (`npm run bench -- --only records`, scripts/bench-records.ts):
 * which decision records' replacements (docs/decisions/) run as the library they replaced, and
 * what each counted meanwhile.
 *
 * Development only. Nothing in the service imports this file or the `*.ab.ts` files beside the
 * replacements that read it: the bench's service process loads each `<module>.ab.ts` in place
 * of `<module>.ts` (scripts/bench-records/hooks.ts), and its driver flips this switch between
 * rounds, so that one process, one chain and one journal serve both sides of each comparison.
 * tsconfig.build.json leaves these files out of dist/.
 */

/** Records (e.g. "0001") whose replacement runs as the library it replaced; empty: the service as it is. */
const library = new Set<string>();

/** What one A/B switch counted: operations, their time where it can be timed (ms), and each one's time. */
export interface Tally {
  calls: number;
  ms: number;
  /** Each timed operation's ms since the previous `tallied()`: a median leaves out the moments the process was not running. */
  samples: number[];
}

const tallies = new Map<string, Tally>();

/** Whether `record`'s replacement runs as its library now. */
export function usesLibrary(record: string): boolean {
  return library.has(record);
}

/** Sets the records whose replacements run as their library; the others run as the service has them. */
export function useLibraryFor(records: readonly string[]): void {
  library.clear();
  for (const record of records) library.add(record);
}

/** Counts `calls` operations of `name` (e.g. "0001 sign"); `ms`, when given, is the time of that one operation. */
export function tally(name: string, calls: number, ms?: number): void {
  let found = tallies.get(name);
  if (found === undefined) {
    found = { calls: 0, ms: 0, samples: [] };
    tallies.set(name, found);
  }
  found.calls += calls;
  if (ms !== undefined) {
    found.ms += ms;
    found.samples.push(ms);
  }
}

/** Everything counted so far, by name, with the samples taken since the previous call (which it clears). */
export function tallied(): Record<string, Tally> {
  return Object.fromEntries(
    [...tallies].map(([name, found]) => [name, { calls: found.calls, ms: found.ms, samples: found.samples.splice(0) }]),
  );
}
