/**
 * The records bench's A/B switch for decision 0009 (docs/decisions/0009-request-metrics.md):
 * loaded in place of request-metrics.ts in the bench's service process only
 * (adapters/shared/records.ab.ts says how). With the switch on, each answered request is counted
 * as metrics.ts counted it before the record (commit b3a232d): prom-client's `Counter.inc` and
 * `Histogram.observe`, with the same names, labels and buckets, through the labelled children
 * made once per label set and found again by a joined string. They live in a registry of their
 * own (the service's holds this class's series under the same names), which
 * `Symbol.for("records.ab 0009 registry")` on the instance gives to the bench's test. Off, by
 * `RequestMetrics.observe`. Either way each observation is counted and timed on the event loop
 * ("0009 observe"; the timer's own two reads are in the time, on both sides).
 */
import { Counter, Histogram, Registry } from "prom-client";

import { tally, usesLibrary } from "../shared/records.ab.js";
import { RequestMetrics as Replacement } from "./request-metrics.js";

type Options = ConstructorParameters<typeof Replacement>[1];

/** Where the bench's test finds the library's registry on an instance. */
export const LIBRARY_REGISTRY = Symbol.for("records.ab 0009 registry");

export class RequestMetrics extends Replacement {
  readonly [LIBRARY_REGISTRY] = new Registry();
  readonly #counter: Counter<"route" | "protocol" | "code">;
  readonly #histogram: Histogram<"route" | "protocol">;
  readonly #children = new Map<string, { count: { inc(): void }; seconds: { observe(value: number): void } }>();

  constructor(registry: Registry, options: Options) {
    super(registry, options);
    const registers = [this[LIBRARY_REGISTRY]];
    this.#counter = new Counter({ ...options.counter, labelNames: ["route", "protocol", "code"], registers });
    this.#histogram = new Histogram({
      ...options.histogram,
      labelNames: ["route", "protocol"],
      buckets: [...options.buckets],
      registers,
    });
  }

  override observe(route: string, protocol: string, code: string, seconds: number): void {
    const started = performance.now();
    if (usesLibrary("0009")) {
      const key = `${route}\u0000${protocol}\u0000${code}`;
      let child = this.#children.get(key);
      if (child === undefined) {
        child = {
          count: this.#counter.labels(route, protocol, code),
          seconds: this.#histogram.labels(route, protocol),
        };
        this.#children.set(key, child);
      }
      child.count.inc();
      child.seconds.observe(seconds);
    } else super.observe(route, protocol, code, seconds);
    tally("0009 observe", 1, performance.now() - started);
  }
}
