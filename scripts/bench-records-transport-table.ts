/**
 * The transport records' result (scripts/bench-records-transport.ts) as markdown: how it ran,
 * each side's figures, then each record's threshold read from them.
 */
import {
  TRANSPORT_RECORDS,
  against,
  grpcAgainstJson,
  paired,
  pairedMedians,
  sideFigures,
  type Spread,
  type TransportRecordId,
  type TransportResult,
  type Via,
} from "./bench-records-transport.js";

type Figures = ReturnType<typeof sideFigures>;
type Kind = "price" | "sell";

const BLOCKS: Array<{ kind: Kind; via: Via; title: string; records: TransportRecordId[] }> = [
  { kind: "price", via: "json", title: "JSON price", records: ["0005", "0008", "0009"] },
  { kind: "price", via: "grpc", title: "gRPC GetPrice", records: ["0007"] },
  { kind: "sell", via: "json", title: "JSON sell", records: ["0005", "0008", "0009"] },
  { kind: "sell", via: "grpc", title: "gRPC Sell", records: ["0007"] },
];

const signed = (n: number, digits = 0) => `${n >= 0 ? "+" : "−"}${Math.abs(n).toFixed(digits)}`;
const micros = (n: number) => `${n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} µs`;
const ms = (n: number) => `${n.toFixed(n < 10 ? 2 : 0)} ms`;
const range = (s: Spread, digits: number, unit = "") =>
  `${signed(s.mean, digits)}${unit} (${signed(s.min, digits)} to ${signed(s.max, digits)})`;
const ratioRange = (s: Spread) => `${s.mean.toFixed(2)} (${s.min.toFixed(2)}–${s.max.toFixed(2)})`;
const scale = (s: Spread, by: number): Spread => ({ mean: s.mean * by, min: s.min * by, max: s.max * by });

function sideRow(title: string, side: string, f: Figures): string {
  const op = (name: string) => {
    const { perCall, median, mean } = f.tally(name);
    return perCall === 0 ? "0" : `${perCall.toFixed(2)} × ${micros(median * 1000)} (${micros(mean * 1000)})`;
  };
  return `| ${[
    title,
    side,
    f.perSecond.toFixed(f.perSecond < 1000 ? 1 : 0),
    ms(f.p50Ms),
    ms(f.p99Ms),
    `${micros(f.cpuPerCall)} / ${micros(f.netCpuPerCall)}`,
    op("0008 line"),
    op("0009 observe"),
    f.tally("0007 lean").perCall.toFixed(2),
  ].join(" | ")} |`;
}

interface Reading {
  figure: string;
  threshold: string;
  verdict: string;
}

/** What a record's rounds of one load say against its threshold. */
function readingOf(
  result: TransportResult,
  id: TransportRecordId,
  kind: Kind,
  via: Via,
  service: Figures,
  library: Figures,
): Reading {
  const { difference, ratio } = paired(result, kind, via, id);
  if (id === "0005")
    return kind === "price"
      ? {
          figure: `Connect ÷ ours ${ratioRange(ratio)}`,
          threshold: "remove at ≤ 1.10, once connect-es serves the SPEC's paths and bodies (it cannot)",
          verdict: against(ratio, 1.1) === "REMOVE" ? "cost met, paths not: keep" : against(ratio, 1.1),
        }
      : { figure: `Connect ÷ ours ${ratioRange(ratio)}`, threshold: "(on the sell path)", verdict: "" };
  if (id === "0007") {
    if (kind === "price")
      return {
        figure: `connect-node ÷ lean ${ratioRange(ratio)}`,
        threshold: "remove at ≤ 1.10 (GetPrice and Sell)",
        verdict: against(ratio, 1.1),
      };
    const second = grpcAgainstJson(result);
    return {
      figure: `connect-node ÷ lean ${ratioRange(ratio)}; gRPC through connect-node ÷ JSON ${ratioRange(second.connect)} (lean ÷ JSON ${ratioRange(second.lean)})`,
      threshold: "remove at ≤ 1.10 (GetPrice and Sell); or gRPC sells through Connect ≤ 1.10 × JSON's",
      verdict: `Sell: ${against(ratio, 1.1)}; the second: ${against(second.connect, 1.1)}`,
    };
  }
  const name = id === "0008" ? "0008 line" : "0009 observe";
  const per = service.tally(name).perCall;
  if (kind === "sell")
    return { figure: `${range(difference, 0)} µs a sell`, threshold: "(on the sell path)", verdict: "" };
  const onLoop = pairedMedians(result, kind, via, id, name);
  const medians = `median ${micros(library.tally(name).median * 1000)} against ${micros(service.tally(name).median * 1000)}`;
  if (id === "0008")
    return {
      figure:
        `on the loop, pino − ours ${range(onLoop, 2)} µs a line (${medians}, the writes left out); ` +
        `service CPU ${range(scale(difference, 1 / per), 2)} µs a line (${per.toFixed(2)} lines a call)`,
      threshold: "remove at ≤ 0.50 µs a line",
      verdict: against(onLoop, 0.5),
    };
  const perObservation = scale(onLoop, 1000);
  return {
    figure:
      `on the loop, prom-client − ours ${range(perObservation, 0)} ns an observation (${medians}, each with the timer's two reads); ` +
      `service CPU ${range(scale(difference, 1000 / per), 0)} ns`,
    threshold: "remove at < 100 ns (prom-client's, ≥ the difference)",
    verdict: against(perObservation, 100),
  };
}

function verdictRow(result: TransportResult, id: TransportRecordId, kind: Kind, via: Via, title: string): string {
  const service = sideFigures(result, kind, via, "A");
  const library = sideFigures(result, kind, via, id);
  const { difference } = paired(result, kind, via, id);
  const { figure, threshold, verdict } = readingOf(result, id, kind, via, service, library);
  return `| ${[
    id,
    title,
    `${micros(service.netCpuPerCall)} → ${micros(library.netCpuPerCall)}; paired ${range(difference, 1)} µs`,
    `${service.perSecond.toFixed(1)} → ${library.perSecond.toFixed(1)}`,
    `${ms(service.p50Ms)} / ${ms(service.p99Ms)} → ${ms(library.p50Ms)} / ${ms(library.p99Ms)}`,
    figure,
    threshold,
    verdict,
  ].join(" | ")} |`;
}

export function transportTable(
  result: TransportResult,
  where: { machine: string; config: Record<string, string>; priceLoad: string },
): string {
  const { load, options, idleCpuPerSecond, rounds } = result;
  const config = Object.entries(where.config)
    .map(([name, value]) => `${name}=${value}`)
    .join(", ");
  const idle = (r: (typeof rounds)[number]) => (r.cpuMicros - idleCpuPerSecond * r.seconds) / r.ops;
  return [
    "",
    `Decision records 0005, 0007–0009 in the whole service (${where.machine}; ${config}): the price (${where.priceLoad}) in rounds of ` +
      `${options.priceSeconds} s after ${options.priceWarmupSeconds} s, sells ${options.concurrency} in flight in rounds of ${options.sellSeconds} s ` +
      `after ${options.warmupSeconds} s; ${options.cycles} cycles; the service idle ${Math.round(idleCpuPerSecond).toLocaleString("en-US")} µs CPU a second; ` +
      `1-minute load average ${load.before.toFixed(2)} before, ${Math.min(...load.rounds).toFixed(2)}–${Math.max(...load.rounds).toFixed(2)} ` +
      `at the rounds' starts, ${load.after.toFixed(2)} after.`,
    "",
    "| Load | Service | Calls/s | p50 | p99 | Service CPU per call / less idle | Access lines a call × median (mean) | Observations a call × median (mean) | Lean gRPC calls a call |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ...BLOCKS.flatMap(({ kind, via, title, records }) => [
      sideRow(title, "as it is", sideFigures(result, kind, via, "A")),
      ...records.map((id) => sideRow(title, `${id}: ${TRANSPORT_RECORDS[id]}`, sideFigures(result, kind, via, id))),
    ]),
    "",
    "Price p50 and p99: autocannon's per round, weighted by its calls; sells': of every sell.",
    "",
    "| Record | Load | Service CPU per call less idle, with → without | Calls/s | p50 / p99 | At these settings | Threshold (the record's) | Verdict |",
    "|---|---|---|---:|---:|---|---|---|",
    ...BLOCKS.flatMap(({ kind, via, title, records }) => records.map((id) => verdictRow(result, id, kind, via, title))),
    "",
    `The rounds in the order run (CPU µs per call less idle): ${rounds
      .map((r) => `${r.kind}/${r.via} ${r.side} ${idle(r).toFixed(1)}`)
      .join(", ")}.`,
    "",
  ].join("\n");
}
