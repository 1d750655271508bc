/**
 * The two per-request metrics, a counter by (route, protocol, code) and a latency histogram by
 * (route, protocol), kept in plain numbers and handed to prom-client's registry as metrics of
 * its own kind: prom-client writes the exposition text, so a scrape reads exactly what its
 * Counter and Histogram would give (test/adapters/observability/request-metrics.test.ts
 * compares the two on the same observations).
 *
 * Why not prom-client's Counter and Histogram: they check the labels, hash them and look the
 * series up on every observation, the largest part of a cached price answer's metrics
 * (docs/decisions/0009-request-metrics.md). Here a request finds its series through three map
 * lookups on the label values and then adds numbers.
 */
import type { Registry } from "prom-client";

/** One (route, protocol) series of the histogram. */
interface LatencySeries {
  readonly labels: { route: string; protocol: string };
  /** Observations per bucket (not cumulative); the last slot is above every bound (+Inf). */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** One (route, protocol, code) series of the counter, with the histogram series it also feeds. */
interface RequestSeries {
  readonly labels: { route: string; protocol: string; code: string };
  value: number;
  readonly latency: LatencySeries;
}

/** What prom-client's Registry reads from a metric (its registerMetric, metrics() and getMetricsAsJSON()). */
interface RegistryMetric {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "histogram";
  readonly aggregator: "sum";
  get(): Promise<{ name: string; help: string; type: string; values: unknown[]; aggregator: "sum" }>;
  reset(): void;
}

export class RequestMetrics {
  readonly #bounds: readonly number[];
  /** route → protocol → code → series. */
  readonly #series = new Map<string, Map<string, Map<string, RequestSeries>>>();
  /**
   * Latency series by route and protocol, in the order first seen (the order prom-client reports
   * them in). Looked up only when a counter series is new, so its string key costs nothing per request.
   */
  readonly #latency = new Map<string, LatencySeries>();
  /** Every counter series in the order it was first seen. */
  readonly #allSeries: RequestSeries[] = [];
  /** The series of the last observation: a run of the same request (the usual load) skips the lookups. */
  #last: RequestSeries | undefined;

  constructor(
    registry: Registry,
    { counter, histogram, buckets }: { counter: NamedHelp; histogram: NamedHelp; buckets: readonly number[] },
  ) {
    this.#bounds = [...buckets].sort((a, b) => a - b);
    registry.registerMetric(this.#counterMetric(counter) as never);
    registry.registerMetric(this.#histogramMetric(histogram) as never);
  }

  /**
   * Counts one answered request and its latency in seconds. A latency that is not a finite number
   * is dropped, request and all (prom-client would throw; a request's end must not).
   */
  observe(route: string, protocol: string, code: string, seconds: number): void {
    if (!Number.isFinite(seconds)) return;
    const series = this.#seriesOf(route, protocol, code);
    series.value += 1;
    const latency = series.latency;
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    latency.counts[i]! += 1;
    latency.sum += seconds;
    latency.count += 1;
  }

  #seriesOf(route: string, protocol: string, code: string): RequestSeries {
    const last = this.#last;
    if (
      last !== undefined &&
      last.labels.route === route &&
      last.labels.protocol === protocol &&
      last.labels.code === code
    )
      return last;
    const series = this.#lookUp(route, protocol, code);
    this.#last = series;
    return series;
  }

  #lookUp(route: string, protocol: string, code: string): RequestSeries {
    const byCode = inner(inner(this.#series, route), protocol);
    let series = byCode.get(code);
    if (series === undefined) {
      series = { labels: { route, protocol, code }, value: 0, latency: this.#latencyOf(route, protocol) };
      byCode.set(code, series);
      this.#allSeries.push(series);
    }
    return series;
  }

  #latencyOf(route: string, protocol: string): LatencySeries {
    const key = `${route}\u0000${protocol}`;
    let series = this.#latency.get(key);
    if (series === undefined) {
      series = { labels: { route, protocol }, counts: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
      this.#latency.set(key, series);
    }
    return series;
  }

  /** Forgets every series (prom-client's Registry.resetMetrics). */
  #reset(): void {
    this.#last = undefined;
    this.#series.clear();
    this.#latency.clear();
    this.#allSeries.length = 0;
  }

  /**
   * The counter as prom-client's Counter reports it: a value and its labels per series. The
   * registry renames counters for OpenMetrics (it strips `_total` from `name`), so reports read
   * the name from the metric each time, as prom-client's own do.
   */
  #counterMetric({ name, help }: NamedHelp): RegistryMetric {
    const metric: RegistryMetric = {
      name,
      help,
      type: "counter",
      aggregator: "sum",
      // Keys in prom-client's order, so that even the JSON text of a report is the same.
      get: async () => ({
        help,
        name: metric.name,
        type: "counter",
        values: this.#allSeries.map((s) => ({ value: s.value, labels: { ...s.labels } })),
        aggregator: "sum",
      }),
      reset: () => this.#reset(),
    };
    return metric;
  }

  /**
   * The histogram as prom-client's Histogram reports it: per series, a cumulative `_bucket` value
   * for each bound and +Inf (the `le` label, then the series' labels), then `_sum` and `_count`.
   * The registry's text format reads `getForPromString` (labels and shared labels apart); its JSON
   * reads `get` (the shared labels merged in after `le`), as prom-client's own.
   */
  #histogramMetric({ name, help }: NamedHelp): RegistryMetric & { getForPromString(): Promise<unknown> } {
    const bounds = this.#bounds;
    const values = () =>
      [...this.#latency.values()].flatMap((s) => {
        const out: HistogramValue[] = [];
        const bucket = `${metric.name}_bucket`;
        let cumulative = 0;
        for (let i = 0; i < bounds.length; i++) {
          cumulative += s.counts[i]!;
          out.push({
            labels: { le: bounds[i]! },
            sharedLabels: s.labels,
            value: cumulative,
            metricName: bucket,
            exemplar: null,
          });
        }
        out.push(
          { labels: { le: "+Inf" }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null },
          { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${metric.name}_sum`, exemplar: undefined },
          {
            labels: {},
            sharedLabels: s.labels,
            value: s.count,
            metricName: `${metric.name}_count`,
            exemplar: undefined,
          },
        );
        return out;
      });
    const report = (splay: boolean) => ({
      name: metric.name,
      help,
      type: "histogram",
      values: splay
        ? values().map(({ labels, sharedLabels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } }))
        : values(),
      aggregator: "sum" as const,
    });
    const metric = {
      name,
      help,
      type: "histogram" as const,
      aggregator: "sum" as const,
      get: async () => report(true),
      getForPromString: async () => report(false),
      reset: () => this.#reset(),
    };
    return metric;
  }
}

/** One line of a histogram's report, as prom-client's Histogram makes it. */
interface HistogramValue {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

/** The map `map` holds under `key`, made empty on first use. */
function inner<K, V>(map: Map<K, Map<string, V>>, key: K): Map<string, V> {
  let found = map.get(key);
  if (found === undefined) {
    found = new Map();
    map.set(key, found);
  }
  return found;
}

interface NamedHelp {
  name: string;
  help: string;
}
