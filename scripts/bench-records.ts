/**
 * The chain-side decision records (docs/decisions/0001–0004) at the settings operators run, for
 * `npm run bench` (`--only records` runs this alone): each replacement against the library it
 * replaced, in the whole service.
 *
 * One service process, started by bench.ts as `npm start` runs it (its default logs on a pipe to
 * a collector, metrics on, the SQLite journal, the lifecycle monitor), its embedded chain mining
 * a block a second (CHAIN_BLOCK_TIME_MS=1000), with the records' A/B switches loaded
 * (scripts/bench-records/register.ts, adapters/shared/records.ab.ts). Rounds alternate the
 * service as it is with the service with one replacement switched to its library:
 * A, 0001, A, 0002, A, 0003, A, 0004, then the same with the records in the other order, for
 * each cycle. A round switches, warms up (sells not counted), then keeps `concurrency` sells in
 * flight over JSON HTTP for `seconds`, and waits for the last answer. Every sell is checked (its
 * receipt by the sell target; the wallet's nonce and token balance move by exactly the round's
 * sells).
 *
 * What each round gives: sells/s, the latency of each sell (p50, p99), the service process's CPU
 * time per sell (what a replacement changes: at 1 s blocks the latency is the block time's), and
 * what the switches counted: signatures, encodings, JSON-RPC requests and calls per sell, and the
 * time of each signature and encoding on the event loop, so that each record's threshold can be
 * read at these settings (docs/decisions/README.md).
 */
import { loadavg } from "node:os";

import type { Tally } from "../adapters/shared/records.ab.js";

/** What this bench needs of the service process and of the load (bench.ts provides it). */
export interface RecordsService {
  /** Switches these records' replacements to their library (adapters/shared/records.ab.ts), the others back. */
  library(records: readonly string[]): Promise<void>;
  /** The service process's CPU time so far (µs) and what the switches have counted. */
  usage(): Promise<{ cpuMicros: number; tallies: Record<string, Tally> }>;
  /** One sell over JSON HTTP, checked; its transaction's hash. */
  sell(index: number): Promise<string>;
  /** The exchange wallet's mined nonce and token balance (base units). */
  wallet(): Promise<{ nonce: number; balance: bigint }>;
  /** One sell's tokens, in base units. */
  sellAmount: bigint;
}

export interface RecordsOptions {
  /** Measured seconds per round. */
  seconds: number;
  /** Sells in flight. */
  concurrency: number;
  /** Cycles of eight rounds. */
  cycles: number;
  /** Unmeasured seconds at the start of each round, after its switch. */
  warmupSeconds?: number;
  /** Seconds without sells before each cycle: the service's CPU when idle, at 1 s blocks. */
  idleSeconds?: number;
  progress?: (line: string) => void;
}

/** The library each record's replacement stands in for: what its switch runs instead. */
export const RECORDS = {
  "0001": "ethers' SigningKey.sign",
  "0002": "ethers' Transaction (Wallet.signTransaction) + keccak256",
  "0003": "ethers' Interface.encodeFunctionData",
  "0004": "ethers' JsonRpcProvider (FetchRequest, its batching)",
} as const;
export type RecordId = keyof typeof RECORDS;
const IDS = Object.keys(RECORDS) as RecordId[];

type SideName = "service" | RecordId;

/** One configuration's rounds, summed. */
export interface Side {
  sells: number;
  seconds: number;
  cpuMicros: number;
  latenciesMs: number[];
  tallies: Record<string, Tally>;
}

/** One measured round, in the order run. */
export interface RoundFigures {
  side: SideName;
  sells: number;
  seconds: number;
  cpuMicros: number;
}

export interface RecordsResult {
  /** The service as it is ("A"), and each record's replacement switched to its library. */
  sides: Record<SideName, Side>;
  rounds: RoundFigures[];
  /** The service's CPU when idle (no sells, a block a second), µs per second. */
  idleCpuPerSecond: number;
  /** 1-minute load average before the run, and at each round's start. */
  load: { before: number; rounds: number[]; after: number };
  options: Required<Omit<RecordsOptions, "progress">>;
}

const emptySide = (): Side => ({ sells: 0, seconds: 0, cpuMicros: 0, latenciesMs: [], tallies: {} });

/** The rounds of one cycle: the service before each record, the records forwards or backwards. */
function cycleOrder(cycle: number): Array<"service" | RecordId> {
  const ids = cycle % 2 === 0 ? IDS : [...IDS].reverse();
  return ids.flatMap((id) => ["service" as const, id]);
}

export async function measureRecords(service: RecordsService, options: RecordsOptions): Promise<RecordsResult> {
  const settings = { warmupSeconds: 3, idleSeconds: 5, ...options };
  const { seconds, concurrency, cycles, warmupSeconds, idleSeconds } = settings;
  const sides = Object.fromEntries(["service", ...IDS].map((name) => [name, emptySide()])) as RecordsResult["sides"];
  const rounds: RoundFigures[] = [];
  const load: RecordsResult["load"] = { before: loadavg()[0]!, rounds: [], after: 0 };
  const idle = { micros: 0, seconds: 0 };
  // The first sells of a service are its slowest (compilation, the first allowance and gas figures).
  let index = (await closedLoop(service, 0, concurrency, 2 * warmupSeconds)).next;
  for (let cycle = 0; cycle < cycles; cycle++) {
    const quiet = await idleWindow(service, idleSeconds);
    idle.micros += quiet.micros;
    idle.seconds += quiet.seconds;
    for (const name of cycleOrder(cycle)) {
      load.rounds.push(loadavg()[0]!);
      options.progress?.(
        `records: cycle ${cycle + 1}/${cycles}, ${name === "service" ? "the service" : RECORDS[name]}…`,
      );
      await service.library(name === "service" ? [] : [name]);
      index = (await closedLoop(service, index, concurrency, warmupSeconds)).next;
      const round = await measuredRound(service, index, concurrency, seconds);
      index = round.next;
      addRound(sides[name], round);
      rounds.push({ side: name, sells: round.sells, seconds: round.seconds, cpuMicros: round.cpuMicros });
    }
  }
  await service.library([]);
  load.after = loadavg()[0]!;
  return {
    sides,
    rounds,
    idleCpuPerSecond: idle.micros / idle.seconds,
    load,
    options: { seconds, concurrency, cycles, warmupSeconds, idleSeconds },
  };
}

/** The service's CPU over `seconds` without sells. */
export async function idleWindow(
  service: RecordsService,
  seconds: number,
): Promise<{ micros: number; seconds: number }> {
  const before = await service.usage();
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const after = await service.usage();
  return { micros: after.cpuMicros - before.cpuMicros, seconds: (performance.now() - started) / 1000 };
}

export interface Round {
  next: number;
  sells: number;
  seconds: number;
  cpuMicros: number;
  latenciesMs: number[];
  tallies: Record<string, Tally>;
}

/** `concurrency` sells in flight for `seconds`, then the last answers awaited; sells numbered from `first`. */
export async function closedLoop(service: RecordsService, first: number, concurrency: number, seconds: number) {
  const latenciesMs: number[] = [];
  let next = first;
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await service.sell(next++);
        latenciesMs.push(performance.now() - t0);
      }
    }),
  );
  return { next, latenciesMs, seconds: (performance.now() - started) / 1000 };
}

/** One measured round: its sells checked against the wallet, the service's CPU and the switches' counts meanwhile. */
export async function measuredRound(service: RecordsService, first: number, concurrency: number, seconds: number) {
  const walletBefore = await service.wallet();
  const before = await service.usage();
  const run = await closedLoop(service, first, concurrency, seconds);
  const after = await service.usage();
  const walletAfter = await service.wallet();
  const sells = run.latenciesMs.length;
  if (walletAfter.nonce - walletBefore.nonce !== sells)
    throw new Error(
      `records: the wallet sent ${walletAfter.nonce - walletBefore.nonce} transactions for ${sells} sells`,
    );
  if (walletBefore.balance - walletAfter.balance !== BigInt(sells) * service.sellAmount)
    throw new Error(
      `records: the wallet's balance fell by ${walletBefore.balance - walletAfter.balance} for ${sells} sells`,
    );
  const tallies: Record<string, Tally> = {};
  for (const [name, { calls, ms, samples }] of Object.entries(after.tallies)) {
    const earlier = before.tallies[name] ?? { calls: 0, ms: 0 };
    tallies[name] = { calls: calls - earlier.calls, ms: ms - earlier.ms, samples };
  }
  return {
    next: run.next,
    sells,
    seconds: run.seconds,
    cpuMicros: after.cpuMicros - before.cpuMicros,
    latenciesMs: run.latenciesMs,
    tallies,
  } satisfies Round;
}

function addRound(side: Side, round: Round): void {
  side.sells += round.sells;
  side.seconds += round.seconds;
  side.cpuMicros += round.cpuMicros;
  side.latenciesMs.push(...round.latenciesMs);
  for (const [name, { calls, ms, samples }] of Object.entries(round.tallies)) {
    const found = side.tallies[name] ?? { calls: 0, ms: 0, samples: [] };
    side.tallies[name] = { calls: found.calls + calls, ms: found.ms + ms, samples: [...found.samples, ...samples] };
  }
}

/** The `q` quantile (0..1) of `values`, by the nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * q) - 1))] ?? 0;
}

/** A round's CPU per sell, less the service's CPU when idle over the round's time. */
export const netCpu = (r: { sells: number; seconds: number; cpuMicros: number }, idlePerSecond: number) =>
  (r.cpuMicros - idlePerSecond * r.seconds) / r.sells;

/** A side's figures: sells/s, p50 and p99 (ms), CPU µs per sell (and less the idle service's), what it counted. */
export function figures(side: Side, idlePerSecond: number) {
  return {
    sellsPerSecond: side.sells / side.seconds,
    p50Ms: quantile(side.latenciesMs, 0.5),
    p99Ms: quantile(side.latenciesMs, 0.99),
    cpuPerSell: side.cpuMicros / side.sells,
    netCpuPerSell: netCpu(side, idlePerSecond),
    /** Operations of `name` per sell, and the median and mean µs of one where timed. */
    per: (name: string) => {
      const tally = side.tallies[name] ?? { calls: 0, ms: 0, samples: [] };
      return {
        perSell: tally.calls / side.sells,
        median: quantile(tally.samples, 0.5) * 1000,
        mean: tally.calls === 0 ? 0 : (tally.ms * 1000) / tally.calls,
      };
    },
  };
}
type Figures = ReturnType<typeof figures>;

/**
 * Each round of `id` against the rounds of the service just before and after it (the machine's
 * load drifts): the difference in CPU per sell less the idle service's, its mean and range.
 */
export function pairedDifference(result: RecordsResult, id: RecordId): { mean: number; min: number; max: number } {
  const { rounds, idleCpuPerSecond } = result;
  const differences = rounds.flatMap((round, i) => {
    if (round.side !== id) return [];
    const neighbours = [rounds[i - 1], rounds[i + 1]].filter((r) => r?.side === "service") as RoundFigures[];
    const service = neighbours.reduce((sum, r) => sum + netCpu(r, idleCpuPerSecond), 0) / neighbours.length;
    return [netCpu(round, idleCpuPerSecond) - service];
  });
  return {
    mean: differences.reduce((sum, d) => sum + d, 0) / differences.length,
    min: Math.min(...differences),
    max: Math.max(...differences),
  };
}

/** A record's threshold read at these settings: the figure, the threshold, and what it says (undefined: cannot tell here). */
interface RecordVerdict {
  figure: string;
  threshold: string;
  remove: boolean | undefined;
}

const micros = (n: number) => `${n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} µs`;

/**
 * Each record's "When to remove it" threshold, applied to what the service did with and without
 * it. The gain is the service's CPU per sell, paired rounds (`difference`): over the operations a
 * sell makes, the library's cost above the replacement's, per operation. Where the threshold is a
 * ratio, the replacement's own cost is taken at its mean time on the service's loop, which counts
 * the moments the process was not running too: the smallest ratio these figures allow, so that a
 * "keep" holds however loaded the machine was. The medians' ratio is given beside.
 */
function verdictOf(id: RecordId, service: Figures, library: Figures, difference: number): RecordVerdict {
  const ratio = (name: string, limit: number): RecordVerdict => {
    const ours = service.per(name);
    const more = difference / ours.perSell;
    const atLeast = (ours.mean + more) / ours.mean;
    return {
      figure:
        `${signed(more)} µs of CPU a call; ethers ÷ ours ≥ ${atLeast.toFixed(2)} (ours ${micros(ours.mean)} a call, its mean); ` +
        `medians ${micros(library.per(name).median)} ÷ ${micros(ours.median)} = ${(library.per(name).median / ours.median).toFixed(2)}`,
      threshold: `remove at ≤ ${limit.toFixed(2)}`,
      remove: atLeast <= limit,
    };
  };
  if (id === "0001") return ratio("0001 sign", 1.2);
  if (id === "0002") return ratio("0002 sign", 1.2);
  if (id === "0003") {
    const ours = service.per("0003 encode");
    const fromCpu = ours.median + difference / ours.perSell;
    const theirs = Math.min(library.per("0003 encode").median, fromCpu);
    return {
      figure: `ethers' encoding ≥ ${micros(theirs)} a call (median ${micros(library.per("0003 encode").median)}; ours ${micros(ours.median)} + ${signed(difference / ours.perSell)} µs of CPU)`,
      threshold: "remove at < 5 µs",
      remove: theirs < 5,
    };
  }
  // 0004: a call's CPU cannot be timed (it waits on the node). The difference per call is the
  // paired difference per sell over the calls a sell makes; RpcProvider's own share of a call is
  // less than the service's whole CPU per sell over those calls, so the ratio is at least this.
  const calls = service.per("0004 calls").perSell;
  const atLeast = 1 + difference / service.netCpuPerSell;
  return {
    figure: `${signed(difference / calls)} µs of CPU a call (${calls.toFixed(2)} calls a sell); ethers ÷ ours ≥ ${atLeast.toFixed(2)} (ours at most the whole service's CPU over its calls)`,
    threshold: "remove at ≤ 1.10 a call, if it batches in linear time",
    remove: atLeast > 1.1 ? false : undefined,
  };
}

const signed = (n: number, digits = 0) => `${n >= 0 ? "+" : "−"}${Math.abs(n).toFixed(digits)}`;

function sideRow(name: string, f: Figures): string {
  const op = (tally: string) => {
    const { perSell, median, mean } = f.per(tally);
    return `${perSell.toFixed(2)} × ${micros(median)} (${micros(mean)})`;
  };
  return `| ${[
    name,
    f.sellsPerSecond.toFixed(1),
    `${f.p50Ms.toFixed(0)} ms`,
    `${f.p99Ms.toFixed(0)} ms`,
    `${f.cpuPerSell.toFixed(0)} µs / ${f.netCpuPerSell.toFixed(0)} µs`,
    op("0001 sign"),
    op("0002 sign"),
    op("0003 encode"),
    `${f.per("0004 requests").perSell.toFixed(2)} / ${f.per("0004 calls").perSell.toFixed(2)}`,
  ].join(" | ")} |`;
}

function verdictRow(result: RecordsResult, id: RecordId, service: Figures): string {
  const library = figures(result.sides[id], result.idleCpuPerSecond);
  const paired = pairedDifference(result, id);
  const { figure, threshold, remove } = verdictOf(id, service, library, paired.mean);
  return `| ${[
    id,
    `${service.netCpuPerSell.toFixed(0)} → ${library.netCpuPerSell.toFixed(0)} µs; paired ${signed(paired.mean)} µs (${signed(paired.min)} to ${signed(paired.max)}), ${signed((paired.mean / service.netCpuPerSell) * 100, 1)} %`,
    `${service.sellsPerSecond.toFixed(1)} → ${library.sellsPerSecond.toFixed(1)}`,
    `${service.p50Ms.toFixed(0)} / ${service.p99Ms.toFixed(0)} → ${library.p50Ms.toFixed(0)} / ${library.p99Ms.toFixed(0)} ms`,
    figure,
    threshold,
    remove === undefined ? "not decided here" : remove ? "REMOVE" : "keep",
  ].join(" | ")} |`;
}

/** The result as markdown: how it ran, each side's figures, then each record's verdict. */
export function recordsTable(
  result: RecordsResult,
  where: { machine: string; config: Record<string, string> },
): string {
  const { sides, load, options, idleCpuPerSecond } = result;
  const service = figures(sides.service, idleCpuPerSecond);
  const config = Object.entries(where.config)
    .map(([name, value]) => `${name}=${value}`)
    .join(", ");
  return [
    "",
    `Decision records 0001–0004 in the whole service (${where.machine}; ${config}): ${options.concurrency} JSON sells in flight, ` +
      `${options.cycles} cycles of 8 alternating rounds of ${options.seconds} s, each after ${options.warmupSeconds} s of warm-up; ` +
      `the service idle (no sells) ${fmtMicros(idleCpuPerSecond)} CPU a second; 1-minute load average ${load.before.toFixed(2)} before, ` +
      `${Math.min(...load.rounds).toFixed(2)}–${Math.max(...load.rounds).toFixed(2)} at the rounds' starts, ${load.after.toFixed(2)} after.`,
    "",
    "| Service | Sells/s | p50 | p99 | Service CPU per sell / less idle | Signatures a sell × median (mean) | 0002 signings a sell × median (mean) | Encodings a sell × median (mean) | JSON-RPC requests / calls a sell |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    sideRow("as it is (every replacement)", service),
    ...IDS.map((id) => sideRow(`${id} switched to ${RECORDS[id]}`, figures(sides[id], idleCpuPerSecond))),
    "",
    "| Record | Service CPU per sell less idle, with → without | Sells/s | p50 / p99 | At these settings | Threshold (the record's) | Verdict |",
    "|---|---|---:|---:|---|---|---|",
    ...IDS.map((id) => verdictRow(result, id, service)),
    "",
    `The rounds in the order run (CPU µs per sell less idle; A: the service as it is): ${result.rounds
      .map((r) => `${r.side === "service" ? "A" : r.side} ${netCpu(r, idleCpuPerSecond).toFixed(0)}`)
      .join(", ")}.`,
    "",
  ].join("\n");
}

const fmtMicros = (n: number) => `${Math.round(n).toLocaleString("en-US")} µs`;
