/**
 * The transport-side decision records (docs/decisions/0005, 0007, 0008, 0009) at the settings
 * operators run, for `npm run bench -- --only records` (`--records transport` runs this part
 * alone): each replacement against the library it replaced, in the whole service.
 *
 * The service process is the chain records' (scripts/bench-records.ts): started by bench.ts as
 * `npm start` runs it (its default logs on a pipe to a collector, metrics on, the SQLite journal,
 * the lifecycle monitor), its embedded chain at CHAIN_BLOCK_TIME_MS=1000, the records' A/B
 * switches loaded. What each record's rounds run instead of the replacement:
 * - 0005: the same calls in Connect's own JSON protocol (`POST /tokentrade.v1.TokenService/GetPrice`
 *   and `/Sell`), the stand-in the record names, as connect-es has no transcoding to the SPEC's
 *   paths: the client's choice, nothing switched in the service;
 * - 0007: every gRPC call through connect-node (rpc/grpc-unary.ab.ts, as `grpcFastPath: false`);
 * - 0008: pino's synchronous destination at the LogBuffer's 32 KiB and pino's own access line
 *   (shared/logger.ab.ts): the same buffering on both sides;
 * - 0009: prom-client's Counter and Histogram (observability/request-metrics.ab.ts).
 *
 * Each cycle has four blocks, each starting and ending with the service as it is (A) and
 * alternating it with the records' rounds (the records backwards on odd cycles): the JSON price
 * (A, 0005, A, 0008, A, 0009, A; autocannon), the gRPC price (A, 0007, A; node:http2 sessions),
 * JSON sells (A, 0005, A, 0008, A, 0009, A) and gRPC sells (A, 0007, A), 50 sells in flight,
 * every sell checked against the wallet's nonce and balance. Every record's round so has an A
 * round of its own load on each side, against the machine's drift: the paired difference.
 */
import { loadavg } from "node:os";

import type { Tally } from "../adapters/shared/records.ab.js";
import { closedLoop, idleWindow, measuredRound, netCpu, quantile, type RecordsService } from "./bench-records.js";

/** What each record's rounds run instead of its replacement. */
export const TRANSPORT_RECORDS = {
  "0005": "Connect's JSON protocol (POST /tokentrade.v1.TokenService/GetPrice, /Sell)",
  "0007": "connect-node for every gRPC call (grpcFastPath: false)",
  "0008": "pino's synchronous destination at 32 KiB, pino's access line",
  "0009": "prom-client's Counter and Histogram",
} as const;
export type TransportRecordId = keyof typeof TRANSPORT_RECORDS;

/** How a round's calls reach the service: the JSON routes, Connect's JSON protocol, or gRPC (HTTP/2). */
export type Via = "json" | "connect" | "grpc";
type Kind = "price" | "sell";
type SideName = "A" | TransportRecordId;

export interface PriceLoad {
  ops: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
}

/** What this bench needs of the service process and of the load (bench.ts provides it). */
export interface TransportService extends Omit<RecordsService, "sell"> {
  /** Loads the price through `via` for `seconds`, every answer checked. */
  price(via: Via, seconds: number): Promise<PriceLoad>;
  /** One sell through `via`, checked; its transaction's hash. */
  sell(via: Via, index: number): Promise<string>;
}

export interface TransportOptions {
  /** Measured seconds per sell round. */
  sellSeconds: number;
  /** Measured seconds per price round. */
  priceSeconds: number;
  /** Sells in flight. */
  concurrency: number;
  cycles: number;
  /** Unmeasured seconds of sells at the start of each sell round, after its switch. */
  warmupSeconds?: number;
  /** Unmeasured seconds of load at the start of each price round, after its switch. */
  priceWarmupSeconds?: number;
  /** Seconds without load before each cycle: the service's CPU when idle, at 1 s blocks. */
  idleSeconds?: number;
  progress?: (line: string) => void;
}

/** One measured round, in the order run. `via` is its block's (A's) way in. */
export interface TransportRound {
  kind: Kind;
  via: Via;
  side: SideName;
  cycle: number;
  ops: number;
  seconds: number;
  cpuMicros: number;
  p50Ms: number;
  p99Ms: number;
  /** Each sell's latency (sell rounds); a price round has autocannon's p50 and p99 only. */
  latenciesMs: number[];
  tallies: Record<string, Tally>;
}

export interface TransportResult {
  rounds: TransportRound[];
  /** The service's CPU when idle (no load, a block a second), µs per second. */
  idleCpuPerSecond: number;
  /** 1-minute load average before the run, at each round's start, and after. */
  load: { before: number; rounds: number[]; after: number };
  options: Required<Omit<TransportOptions, "progress">>;
}

/** A block of rounds: one load through one way in (A's), and the records compared with it. */
interface Block {
  kind: Kind;
  via: Via;
  records: TransportRecordId[];
}
const BLOCKS: Block[] = [
  { kind: "price", via: "json", records: ["0005", "0008", "0009"] },
  { kind: "price", via: "grpc", records: ["0007"] },
  { kind: "sell", via: "json", records: ["0005", "0008", "0009"] },
  { kind: "sell", via: "grpc", records: ["0007"] },
];

/** A block's rounds in a cycle: A before each record and after the last, the records backwards on odd cycles. */
function blockOrder(block: Block, cycle: number): SideName[] {
  const ids = cycle % 2 === 0 ? block.records : [...block.records].reverse();
  return [...ids.flatMap((id) => ["A" as const, id]), "A"];
}

/** 0005 is the client's choice (Connect's own protocol); the other records are switches in the service. */
const viaOf = (side: SideName, block: Block): Via => (side === "0005" ? "connect" : block.via);
const switchedFor = (side: SideName): string[] => (side === "A" || side === "0005" ? [] : [side]);

/** The service as bench-records.ts's rounds take it: its sells through `via`. */
const through = (service: TransportService, via: Via): RecordsService => ({
  library: (records) => service.library(records),
  usage: () => service.usage(),
  wallet: () => service.wallet(),
  sellAmount: service.sellAmount,
  sell: (index) => service.sell(via, index),
});

export async function measureTransport(service: TransportService, options: TransportOptions): Promise<TransportResult> {
  const settings = { warmupSeconds: 3, priceWarmupSeconds: 1, idleSeconds: 5, ...options };
  const rounds: TransportRound[] = [];
  const load: TransportResult["load"] = { before: loadavg()[0]!, rounds: [], after: 0 };
  const idle = { micros: 0, seconds: 0 };
  const index = { next: 0 };
  // Every way in, once, before anything is measured: the first calls of each are the slowest.
  for (const via of ["json", "connect", "grpc"] as const) {
    index.next = (await closedLoop(through(service, via), index.next, settings.concurrency, 2)).next;
    await service.price(via, 2);
  }
  for (let cycle = 0; cycle < settings.cycles; cycle++) {
    const quiet = await idleWindow(through(service, "json"), settings.idleSeconds);
    idle.micros += quiet.micros;
    idle.seconds += quiet.seconds;
    for (const block of BLOCKS) {
      for (const side of blockOrder(block, cycle)) {
        load.rounds.push(loadavg()[0]!);
        const name = side === "A" ? "the service as it is" : `${side}: ${TRANSPORT_RECORDS[side]}`;
        options.progress?.(`records (transport): cycle ${cycle + 1}/${settings.cycles}, ${block.kind}, ${name}…`);
        await service.library(switchedFor(side));
        const via = viaOf(side, block);
        const round =
          block.kind === "price"
            ? await priceRound(service, via, settings)
            : await sellRound(service, via, index, settings);
        rounds.push({ kind: block.kind, via: block.via, side, cycle, ...round });
      }
    }
  }
  await service.library([]);
  load.after = loadavg()[0]!;
  const { sellSeconds, priceSeconds, concurrency, cycles, warmupSeconds, priceWarmupSeconds, idleSeconds } = settings;
  return {
    rounds,
    idleCpuPerSecond: idle.micros / idle.seconds,
    load,
    options: { sellSeconds, priceSeconds, concurrency, cycles, warmupSeconds, priceWarmupSeconds, idleSeconds },
  };
}

type Measured = Omit<TransportRound, "kind" | "via" | "side" | "cycle">;

/** What the switches counted between two usage marks, with the samples of the second. */
function since(before: Record<string, Tally>, after: Record<string, Tally>): Record<string, Tally> {
  return Object.fromEntries(
    Object.entries(after).map(([name, { calls, ms, samples }]) => {
      const earlier = before[name] ?? { calls: 0, ms: 0 };
      return [name, { calls: calls - earlier.calls, ms: ms - earlier.ms, samples }];
    }),
  );
}

async function priceRound(
  service: TransportService,
  via: Via,
  { priceSeconds, priceWarmupSeconds }: { priceSeconds: number; priceWarmupSeconds: number },
): Promise<Measured> {
  await service.price(via, priceWarmupSeconds);
  // The warm-up's timed samples are sent here, before the mark: their sending is not the round's CPU.
  await service.usage();
  const before = await service.usage();
  const run = await service.price(via, priceSeconds);
  const after = await service.usage();
  const tallies = since(before.tallies, after.tallies);
  return { ...run, cpuMicros: after.cpuMicros - before.cpuMicros, latenciesMs: [], tallies };
}

async function sellRound(
  service: TransportService,
  via: Via,
  index: { next: number },
  { sellSeconds, warmupSeconds, concurrency }: { sellSeconds: number; warmupSeconds: number; concurrency: number },
): Promise<Measured> {
  const view = through(service, via);
  index.next = (await closedLoop(view, index.next, concurrency, warmupSeconds)).next;
  const round = await measuredRound(view, index.next, concurrency, sellSeconds);
  index.next = round.next;
  return {
    ops: round.sells,
    seconds: round.seconds,
    cpuMicros: round.cpuMicros,
    p50Ms: quantile(round.latenciesMs, 0.5),
    p99Ms: quantile(round.latenciesMs, 0.99),
    latenciesMs: round.latenciesMs,
    tallies: round.tallies,
  };
}

/** A round's service CPU per call, less the idle service's over the round's time. */
const net = (r: TransportRound, idle: number) =>
  netCpu({ sells: r.ops, seconds: r.seconds, cpuMicros: r.cpuMicros }, idle);

/** One side's rounds of one block, summed: calls/s, p50 and p99, CPU per call, what the switches counted. */
export function sideFigures(result: TransportResult, kind: Kind, via: Via, side: SideName) {
  const rounds = result.rounds.filter((r) => r.kind === kind && r.via === via && r.side === side);
  const ops = rounds.reduce((n, r) => n + r.ops, 0);
  const seconds = rounds.reduce((n, r) => n + r.seconds, 0);
  const cpuMicros = rounds.reduce((n, r) => n + r.cpuMicros, 0);
  const latencies = rounds.flatMap((r) => r.latenciesMs);
  // A price round has autocannon's quantiles only: theirs weighted by the round's calls.
  const weighted = (pick: (r: TransportRound) => number) => rounds.reduce((n, r) => n + pick(r) * r.ops, 0) / ops;
  const tally = (name: string) => {
    const all = rounds.map((r) => r.tallies[name] ?? { calls: 0, ms: 0, samples: [] });
    const calls = all.reduce((n, t) => n + t.calls, 0);
    return {
      perCall: calls / ops,
      median: quantile(
        all.flatMap((t) => t.samples),
        0.5,
      ),
      mean: calls === 0 ? 0 : all.reduce((n, t) => n + t.ms, 0) / calls,
    };
  };
  return {
    perSecond: ops / seconds,
    p50Ms: kind === "sell" ? quantile(latencies, 0.5) : weighted((r) => r.p50Ms),
    p99Ms: kind === "sell" ? quantile(latencies, 0.99) : weighted((r) => r.p99Ms),
    cpuPerCall: cpuMicros / ops,
    netCpuPerCall: (cpuMicros - result.idleCpuPerSecond * seconds) / ops,
    tally,
  };
}

/** Each round of `id` in a block against the A rounds just before and after it: differences and ratios of net CPU per call. */
export function paired(result: TransportResult, kind: Kind, via: Via, id: TransportRecordId) {
  const { rounds, idleCpuPerSecond: idle } = result;
  const pairs = rounds.flatMap((round, i) => {
    if (round.kind !== kind || round.via !== via || round.side !== id) return [];
    const beside = [rounds[i - 1], rounds[i + 1]].filter(
      (r) => r?.side === "A" && r.kind === kind && r.via === via,
    ) as TransportRound[];
    const a = beside.reduce((n, r) => n + net(r, idle), 0) / beside.length;
    return [{ difference: net(round, idle) - a, ratio: net(round, idle) / a }];
  });
  return { difference: spread(pairs.map((p) => p.difference)), ratio: spread(pairs.map((p) => p.ratio)) };
}

/**
 * The median time of one `name` operation on the service's loop (µs), each round of `id` in a
 * block against the A rounds beside it: the operation's own cost, library less replacement (the
 * timer's reads, in both, cancel). A median leaves out the moments the process was not running.
 */
export function pairedMedians(result: TransportResult, kind: Kind, via: Via, id: TransportRecordId, name: string) {
  const { rounds } = result;
  const median = (r: TransportRound) => quantile(r.tallies[name]?.samples ?? [], 0.5) * 1000;
  return spread(
    rounds.flatMap((round, i) => {
      if (round.kind !== kind || round.via !== via || round.side !== id) return [];
      const beside = [rounds[i - 1], rounds[i + 1]].filter(
        (r) => r?.side === "A" && r.kind === kind && r.via === via,
      ) as TransportRound[];
      return [median(round) - beside.reduce((n, r) => n + median(r), 0) / beside.length];
    }),
  );
}

/**
 * 0007's second condition: each cycle's gRPC sells through connect-node (net CPU per sell)
 * against the same cycle's JSON sells of the service as it is; and the lean path's, beside.
 */
export function grpcAgainstJson(result: TransportResult) {
  const { rounds, idleCpuPerSecond: idle } = result;
  const perCycle = (side: SideName) =>
    [...new Set(rounds.map((r) => r.cycle))].map((cycle) => {
      const of = (s: SideName, via: Via) =>
        rounds.filter((r) => r.cycle === cycle && r.kind === "sell" && r.via === via && r.side === s);
      const mean = (list: TransportRound[]) => list.reduce((n, r) => n + net(r, idle), 0) / list.length;
      return mean(of(side, "grpc")) / mean(of("A", "json"));
    });
  return { connect: spread(perCycle("0007")), lean: spread(perCycle("A")) };
}

export interface Spread {
  mean: number;
  min: number;
  max: number;
}
const spread = (values: number[]): Spread => ({
  mean: values.reduce((n, v) => n + v, 0) / values.length,
  min: Math.min(...values),
  max: Math.max(...values),
});

/** Below the threshold in every round: the record's "remove"; above in every round: keep; else not clear, keep. */
export function against(range: Spread, removeAtOrBelow: number): "REMOVE" | "keep" | "not clear: keep" {
  if (range.max <= removeAtOrBelow) return "REMOVE";
  return range.min > removeAtOrBelow ? "keep" : "not clear: keep";
}
