import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";

import { type Journal, MemoryJournal, openSqliteJournal } from "../../../adapters/journal/index.js";
import { ServiceMetrics } from "../../../adapters/observability/metrics.js";
import {
  type AccessPolicy,
  type Caller,
  PermissionDeniedError,
  type SpendingLimit,
  SpendingLimitError,
  type UseCases,
} from "../../../core/index.js";

const USD = 10n ** 18n;
const WALLET = "0x90f79bf6eb2c4f870365e785982e1f101e93b906";

/** Each sample of the registry's text, by name and labels. */
async function samples(metrics: ServiceMetrics): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await metrics.registry.metrics()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

const limits: SpendingLimit[] = [
  { name: "customer daily", per: "destinatary", windowMs: 86_400_000, window: "24h", maxUsd: 100n * USD },
  { name: "desk daily", per: "key", keys: new Set(["desk"]), windowMs: 86_400_000, window: "24h", maxTrades: 40 },
  { name: "service hourly", per: "all", windowMs: 3_600_000, window: "1h", maxUsd: 1_000n * USD },
];
const policy: AccessPolicy = { version: "abc123", keys: [], limits, denylist: new Set() };

async function spend(journal: Journal, destinatary: string, usd: bigint): Promise<void> {
  const spendOf = { key: "desk", wallet: WALLET, destinatary, usd };
  const checks = limits.map((limit) => ({
    limit,
    value: limit.per === "destinatary" ? destinatary : limit.per === "key" ? "desk" : "*",
  }));
  await journal.open(
    {
      scope: "s",
      keyName: "desk",
      idempotencyKey: null,
      requestHash: "h",
      kind: "buy",
      request: { userAddress: WALLET, destinatary, amount: "1", usdAddress: WALLET },
    },
    { spend: spendOf, checks },
  );
}

for (const [name, make] of [
  ["memory", async () => new MemoryJournal()],
  ["SQLite", async (dir: string) => openSqliteJournal(join(dir, "journal.sqlite"))],
] as const) {
  describe(`the access metrics (${name} journal)`, function () {
    let dir: string;
    let journal: Journal;
    beforeEach(async function () {
      dir = mkdtempSync(join(tmpdir(), "access-metrics-"));
      journal = await make(dir);
    });
    afterEach(async function () {
      await journal.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("gauges each limit's highest use as a share of its maximum, one series per limit", async function () {
      const metrics = new ServiceMetrics();
      metrics.access.watchLimits({ policy: () => policy, journal });
      for (let i = 0; i < 20; i++) await spend(journal, `0x${i.toString(16).padStart(40, "0")}`, 2n * USD);
      await spend(journal, `0x${"a".repeat(40)}`, 75n * USD);
      await spend(journal, `0x${"a".repeat(40)}`, 10n * USD);
      const all = await samples(metrics);
      const ratio = (limit: string, measure: string) =>
        all.get(`token_service_spending_limit_highest_use_ratio{limit="${limit}",measure="${measure}"}`);
      expect(ratio("customer daily", "usd")).to.equal(0.85);
      expect(ratio("desk daily", "trades")).to.equal(0.55);
      expect(ratio("service hourly", "usd")).to.equal(0.125);
      expect(ratio("customer daily", "trades"), "no maxTrades: no series").to.equal(undefined);
      expect(
        [...all.keys()].filter((k) => k.startsWith("token_service_spending_limit_highest_use_ratio")),
      ).to.have.length(3);
    });

    it("counts the policy's refusals by reason and limit, and the file's version and loads", async function () {
      const metrics = new ServiceMetrics();
      const refuse = (error: Error) => async () => {
        throw error;
      };
      const useCases = metrics.access.meteredRefusals({
        sell: refuse(new PermissionDeniedError('api key "v" may not trade', "role")),
        buy: refuse(new SpendingLimitError("spending limit", "customer daily")),
        remittance: refuse(new PermissionDeniedError("destinatary: on the denylist", "denylist")),
      } as unknown as UseCases);
      const context = { caller: { id: "x" } as Caller };
      for (const run of [useCases.sell, useCases.buy, useCases.buy, useCases.remittance])
        await run({}, context).catch(() => {});
      metrics.access.loaded(policy, new Date(1_800_000_000_000));
      metrics.access.loaded({ ...policy, version: "def456" }, new Date(1_800_000_060_000));
      metrics.access.refused();
      const all = await samples(metrics);
      expect(all.get('token_service_access_refusals_total{reason="role",limit=""}')).to.equal(1);
      expect(all.get('token_service_access_refusals_total{reason="limit",limit="customer daily"}')).to.equal(2);
      expect(all.get('token_service_access_refusals_total{reason="denylist",limit=""}')).to.equal(1);
      expect(all.get('token_service_access_file_info{version="def456"}')).to.equal(1);
      expect(all.has('token_service_access_file_info{version="abc123"}'), "the old version's series is gone").to.equal(
        false,
      );
      expect(all.get("token_service_access_file_loaded_timestamp_seconds")).to.equal(1_800_000_060);
      expect(all.get("token_service_access_file_reload_failures_total")).to.equal(1);
    });
  });
}
