/**
 * The access file's metrics (ACCESS_FILE, docs/operations.md "Access and limits"):
 * - `token_service_access_refusals_total{reason, limit}`: requests refused by the policy, by
 *   reason: `role`, `scope` and `denylist` (403), `limit` (429, with the limit's name), and
 *   `key_expired`, `key_address` (a known key refused as unknown, 401); `limit` is "" but for limits;
 * - `token_service_spending_limit_highest_use_ratio{limit, measure}`: each limit's highest use
 *   across what it counts apart (keys, wallets, destinataries), as a share of its maximum, by
 *   measure (`usd`, `trades`), read from the journal at scrape: one series per limit, never one
 *   per destinatary;
 * - `token_service_access_file_info{version}` (1 for the version in force),
 *   `token_service_access_file_loaded_timestamp_seconds` (when it came into force) and
 *   `token_service_access_file_reload_failures_total` (new files refused, the old one kept).
 */
import { Counter, Gauge, type Registry } from "prom-client";

import {
  type AccessPolicy,
  type LimitCheck,
  PermissionDeniedError,
  type SpendingLeader,
  type SpendingLimit,
  SpendingLimitError,
  type TradeJournal,
  type TradeUseCase,
  type UseCases,
} from "../../core/index.js";
import { PREFIX } from "./prefix.js";

/** How many of a limit's top scopes are read at a scrape: the highest use is exact when one of them has it. */
const LEADERS = 16;

/** What the highest-use gauge reads: the policy in force and the journal's counters. */
export interface LimitUseSource {
  policy(): AccessPolicy | undefined;
  journal: Pick<TradeJournal, "spendingLeaders" | "spendingUse">;
}

export class AccessMetrics {
  readonly #refusals: Counter<"reason" | "limit">;
  readonly #info: Gauge<"version">;
  readonly #loaded: Gauge;
  readonly #failures: Counter;
  readonly #registry: Registry;
  #version: string | undefined;

  constructor(registry: Registry) {
    this.#registry = registry;
    this.#refusals = new Counter({
      name: `${PREFIX}access_refusals_total`,
      help: "Requests the access policy refused, by reason (role, scope, denylist, limit, key_expired, key_address) and limit.",
      labelNames: ["reason", "limit"],
      registers: [registry],
    });
    this.#info = new Gauge({
      name: `${PREFIX}access_file_info`,
      help: "The access file in force: 1, labelled with its version (a digest of the file and its denylist).",
      labelNames: ["version"],
      registers: [registry],
    });
    this.#loaded = new Gauge({
      name: `${PREFIX}access_file_loaded_timestamp_seconds`,
      help: "When the access file in force was loaded (at start, or by its last reload), in Unix seconds.",
      registers: [registry],
    });
    this.#failures = new Counter({
      name: `${PREFIX}access_file_reload_failures_total`,
      help: "New access files refused (a problem in the file): the one in force stayed.",
      registers: [registry],
    });
  }

  /** A new version of the file came into force. */
  loaded(policy: AccessPolicy, at: Date): void {
    if (this.#version !== undefined) this.#info.remove({ version: this.#version });
    this.#version = policy.version;
    this.#info.set({ version: policy.version }, 1);
    this.#loaded.set(at.getTime() / 1000);
  }

  /** A new version of the file was refused. */
  refused(): void {
    this.#failures.inc();
  }

  /** A request refused by the policy. */
  refusal(reason: string, limit = ""): void {
    this.#refusals.inc({ reason, limit });
  }

  /** `useCases` with every trade and quote refused by the policy counted. */
  meteredRefusals(useCases: UseCases): UseCases {
    const counted = (run: TradeUseCase): TradeUseCase => {
      return async (input, context) => {
        try {
          return await run(input, context);
        } catch (error) {
          if (error instanceof SpendingLimitError) this.refusal("limit", error.limit);
          else if (error instanceof PermissionDeniedError) this.refusal(error.rule);
          throw error;
        }
      };
    };
    return {
      ...useCases,
      sell: counted(useCases.sell),
      buy: counted(useCases.buy),
      remittance: counted(useCases.remittance),
    };
  }

  /** Each limit's highest use, read at each scrape. */
  watchLimits(source: LimitUseSource): void {
    const gauge = new Gauge({
      name: `${PREFIX}spending_limit_highest_use_ratio`,
      help: "Each spending limit's highest use across what it counts apart, as a share of its maximum, by measure (usd, trades).",
      labelNames: ["limit", "measure"],
      registers: [this.#registry],
      async collect() {
        this.reset();
        const policy = source.policy();
        if (policy === undefined) return;
        for (const limit of policy.limits) {
          for (const measure of ["usd", "trades"] as const) {
            const max = measure === "usd" ? limit.maxUsd : limit.maxTrades;
            if (max === undefined) continue;
            const highest = await highestUse(source.journal, limit, measure);
            this.set({ limit: limit.name, measure }, max === 0 || max === 0n ? 1 : ratio(highest, max));
          }
        }
      },
    });
    void gauge;
  }
}

function ratio(used: bigint | number, max: bigint | number): number {
  // USD at 18 decimals: a ratio to 6 digits is plenty for a gauge.
  return typeof used === "bigint" ? Number((used * 1_000_000n) / BigInt(max)) / 1_000_000 : used / Number(max);
}

/**
 * What the limit's most used scope has used now. The journal's leaders are what each scope had
 * used when last brought up to date, an upper bound; reading them again brings them up to date,
 * and the highest of those is the answer once it is at least the lowest leader's bound (no
 * scope outside the leaders can have more). A per-key limit that names its keys reads them alone.
 */
async function highestUse(
  journal: LimitUseSource["journal"],
  limit: SpendingLimit,
  measure: "usd" | "trades",
): Promise<bigint | number> {
  const of = (use: { usd: bigint; trades: number }) => (measure === "usd" ? use.usd : use.trades);
  let values: string[];
  let leaders: SpendingLeader[] = [];
  if (limit.per === "all") values = ["*"];
  else if (limit.per === "key" && limit.keys !== undefined) values = [...limit.keys];
  else {
    leaders = await journal.spendingLeaders(limit.per, limit.windowMs, measure, LEADERS);
    values = leaders.map((leader) => leader.value);
  }
  const checks: LimitCheck[] = values.map((value) => ({ limit, value }));
  const uses = await journal.spendingUse(checks);
  let best: bigint | number = measure === "usd" ? 0n : 0;
  for (const use of uses) if (of(use) > best) best = of(use);
  // Not all read and a bound beyond the leaders may still exceed `best`: report the bound (never understate).
  if (leaders.length === LEADERS) {
    const bound = of(leaders[LEADERS - 1]!);
    if (bound > best) best = bound;
  }
  return best;
}
