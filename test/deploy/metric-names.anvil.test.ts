/**
 * Issue 40, item 4: every metric the alert rules (deploy/prometheus/alerts.yml) and the dashboard
 * (deploy/grafana/token-trading.json) name is one the service exports: the service runs on anvil
 * as `npm start` runs it (production mode, metrics on), with an access file holding a spending
 * limit and the wallet watch's thresholds set (the metrics of both exist only then), and its
 * /metrics is scraped; each name must be there (a histogram's _bucket, _sum and _count by its
 * name). So a metric renamed in the code, or misspelt in a rule, fails the build. `up` is
 * Prometheus's own.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";
import { pino } from "pino";

import { startService, type RunningService } from "../../adapters/main.js";
import { hardhatAccount } from "../../scripts/embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../helpers/anvil.js";
import { anvilServiceEnv } from "../helpers/anvil-service.js";
import { freePort } from "../helpers/service-defaults.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const KEY = "metric-names-key-0123456789abcdef";
const METRIC = /\b(?:token_service|nodejs|process)_[a-z0-9_]+\b/g;

/** The metric names a file names (rules, the dashboard's expressions and comments alike). */
function namesIn(path: string): Set<string> {
  return new Set(readFileSync(join(ROOT, path), "utf8").match(METRIC) ?? []);
}

/** The names a scrape exports: each `# TYPE`, with a histogram's and a summary's series names. */
function exported(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!);
    if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(`${name}${suffix}`);
    if (type === "summary") for (const suffix of ["_sum", "_count"]) names.add(`${name}${suffix}`);
  }
  return names;
}

describe("the metrics the alert rules and the dashboard name", function () {
  this.timeout(120_000);
  let anvil: Anvil | undefined;
  let service: RunningService | undefined;
  let dir: string | undefined;

  after(async function () {
    await service?.close();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("are each exported by the running service", async function () {
    anvil = await startAnvil({ blockTime: 1 });
    const addresses = await deployOnAnvil(anvil, 1000);
    dir = mkdtempSync(join(tmpdir(), "metric-names-"));
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    const exchange = hardhatAccount(1);
    writeFileSync(
      join(dir, "access.json"),
      JSON.stringify({
        keys: [{ name: "desk", sha256: createHash("sha256").update(KEY).digest("hex"), roles: ["trader", "admin"] }],
        limits: [{ name: "desk daily", per: "key", window: "24h", maxUsd: "1000" }],
      }),
    );
    const { API_KEYS: _none, ...env } = anvilServiceEnv(anvil, dir, KEY, exchange.privateKey);
    service = await startService({
      env: {
        ...env,
        ACCESS_FILE: join(dir, "access.json"),
        METRICS_PORT: String(await freePort()),
        DATA_DIR: join(dir, "data"),
        WATCH_NATIVE_MIN: "1",
        WATCH_USDC_MIN: "1",
        WATCH_RESERVES_USDC_MIN: "1",
      },
      log: pino({ level: "silent" }),
    });
    const scraped = exported(await (await fetch(service.metricsUrl!)).text());
    const named = new Set([
      ...namesIn("deploy/prometheus/alerts.yml"),
      ...namesIn("deploy/grafana/token-trading.json"),
    ]);
    expect(named.size).to.be.at.least(25);
    const missing = [...named].filter((name) => !scraped.has(name)).sort();
    expect(missing, "named by the rules or the dashboard, not exported").to.deep.equal([]);
  });
});
