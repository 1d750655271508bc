/**
 * What the `*.bench.ts` files beside the code use to check a decision record's "When to remove
 * it" threshold (docs/decisions/): they time this code and the library it replaced on the same
 * inputs, and print one line: the record, the figure its threshold is about, and whether that
 * says keep or remove. `npm run bench:micro` (scripts/bench-micro.ts) runs every bench, each in
 * a process of its own.
 *
 * Development only, like the benches: tsconfig.build.json leaves this file and them out of
 * dist/, and tinybench is a devDependency.
 *
 * The machine these run on is shared, so the cases are timed in alternating rounds (the order
 * reversed each round) and each case's best round counts, as the records' own measurements did
 * ("best rounds of three runs"). Within a round a case's figure is tinybench's median sample.
 */
import { Bench } from "tinybench";

/** What a bench concludes from its figures. */
export interface Verdict {
  /** The figure the threshold is about, e.g. "ethers ÷ ours = 2.71". */
  figure: string;
  /** The threshold as the record states it, e.g. "remove at ≤ 1.20". */
  threshold: string;
  remove: boolean;
  /** The figures behind it, when each case's time per run does not say it best. */
  detail?: string;
}

/** One thing timed: a label for the line, and one run of it. */
export interface Case {
  label: string;
  run: () => unknown;
}

export interface Comparison<K extends string> {
  /** The decision record's number, e.g. "0001". */
  record: string;
  /** The file the record justifies, e.g. "adapters/chain/tx/signing-key.ts". */
  subject: string;
  cases: Record<K, Case>;
  /**
   * Runs of a case per sample, for operations well under a microsecond, where the timer's own
   * cost would count; figures are per run. Cases must then be synchronous. Default 1.
   */
  loop?: number;
  /**
   * "cpu": the main thread's CPU time instead of the clock on the wall, for cases that wait on
   * timers or the network (their cost to the event loop is what the record is about). Default "wall".
   */
  clock?: "wall" | "cpu";
  /** Time per case and round, in ms of the clock used. Default 300. */
  time?: number;
  /** Default 3. */
  rounds?: number;
  /** The verdict, from each case's best figure in ns per run. */
  verdict(ns: Record<K, number>): Verdict;
}

/** Times the cases, prints the record's line, and returns the figures (ns per run, best round). */
export async function compare<K extends string>(comparison: Comparison<K>): Promise<Record<K, number>> {
  const { cases, loop = 1, time = 300, rounds = 3 } = comparison;
  const keys = Object.keys(cases) as K[];
  const best = Object.fromEntries(keys.map((key) => [key, Number.POSITIVE_INFINITY])) as Record<K, number>;
  const now = comparison.clock === "cpu" ? cpuMs : () => performance.now();
  for (let round = 0; round < rounds; round++) {
    // Few iterations at least (tinybench's default is 64): the time budget decides, even for slow cases.
    const bench = new Bench({ now, time, warmupTime: time / 3, iterations: 10, warmupIterations: 5, throws: true });
    for (const key of round % 2 === 0 ? keys : [...keys].reverse()) bench.add(key, repeated(cases[key].run, loop));
    await bench.run();
    for (const task of bench.tasks) {
      const result = task.result;
      if (result.state !== "completed") throw new Error(`${task.name}: ${result.state}`);
      const key = task.name as K;
      best[key] = Math.min(best[key], (result.latency.p50 * 1e6) / loop);
    }
  }
  const { figure, threshold, remove, detail } = comparison.verdict(best);
  const figures = detail ?? keys.map((key) => `${cases[key].label} ${formatNs(best[key])}`).join(", ");
  console.log(
    `${comparison.record}  ${comparison.subject.padEnd(42)} ${figure}  (${threshold}): ${remove ? "REMOVE" : "keep"}  [${figures}]`,
  );
  return best;
}

/** A ratio threshold: remove when the library's cost is at most `limit` times ours. */
export function ratioAtMost(library: string, theirs: number, ours: number, limit: number): Verdict {
  const ratio = theirs / ours;
  return {
    figure: `${library} ÷ ours = ${ratio.toFixed(2)}`,
    threshold: `remove at ≤ ${limit.toFixed(2)}`,
    remove: ratio <= limit,
  };
}

/** An absolute threshold: remove when the library's cost per run is under `limitNs`. */
export function costUnder(library: string, theirs: number, limitNs: number): Verdict {
  return {
    figure: `${library} = ${formatNs(theirs)}`,
    threshold: `remove at < ${formatNs(limitNs)}`,
    remove: theirs < limitNs,
  };
}

/** `ns` nanoseconds, in the unit that reads best. */
export function formatNs(ns: number): string {
  if (ns < 1_000) return `${ns.toFixed(0)} ns`;
  if (ns < 1_000_000) return `${(ns / 1_000).toFixed(ns < 10_000 ? 2 : 1)} µs`;
  return `${(ns / 1_000_000).toFixed(2)} ms`;
}

/** `run` `loop` times per sample; the function itself when once. */
function repeated(run: () => unknown, loop: number): () => unknown {
  if (loop === 1) return run;
  return () => {
    for (let i = 0; i < loop; i++) run();
  };
}

/**
 * The main thread's CPU time in ms (user and system): what the event loop spends, not what a
 * worker thread or the kernel's waiting does. Node 22 lacks threadCpuUsage: the process's then.
 */
function cpuMs(): number {
  const usage = typeof process.threadCpuUsage === "function" ? process.threadCpuUsage() : process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}
