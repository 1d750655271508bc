/**
 * Issue 40, item 4: the alert rules and the dashboard that ship with the service, checked by
 * Prometheus's own promtool (Debian's `prometheus` package, installed by scripts/ensure-promtool.sh
 * when missing): the rules' unit tests pass (`promtool test rules` on the series
 * deploy/prometheus/alerts.test.yml writes), and every PromQL expression of the dashboard, its
 * variables filled in as Grafana fills them, is valid (promtool 2.42 has no `promql` command: each
 * goes into a rules file for `promtool check rules`). Each alert's runbook is a heading of
 * docs/operations.md's "On call".
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { expect } from "chai";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const ALERTS = join(ROOT, "deploy/prometheus/alerts.yml");
const DASHBOARD = join(ROOT, "deploy/grafana/token-trading.json");

/** promtool's path, installed first when missing (as root). */
function promtool(): string {
  const run = spawnSync("sh", [join(ROOT, "scripts/ensure-promtool.sh")], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`promtool is not available: ${run.stderr.trim().split("\n").at(-1)}`);
  return run.stdout.trim().split("\n").at(-1)!;
}

function run(tool: string, args: string[]): { status: number | null; output: string } {
  const result = spawnSync(tool, args, { cwd: ROOT, encoding: "utf8" });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

interface Panel {
  title?: string;
  targets?: Array<{ expr?: string }>;
  panels?: Panel[];
}

/** Every panel's PromQL, with the dashboard's variables as Grafana fills them (All: `.*`). */
export function dashboardExpressions(): Array<{ panel: string; expr: string }> {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as { panels: Panel[] };
  const panels = dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
  return panels.flatMap((panel) =>
    (panel.targets ?? []).flatMap((target) =>
      target.expr === undefined
        ? []
        : [
            {
              panel: panel.title ?? "?",
              expr: target.expr
                .replaceAll("$__rate_interval", "5m")
                .replaceAll("$__interval", "1m")
                .replaceAll("$__range", "6h")
                .replaceAll("$instance", ".*")
                .replaceAll("$wallet", ".*"),
            },
          ],
    ),
  );
}

/** `expressions` as recording rules, and what promtool check rules says of them. */
function checkAsRules(tool: string, expressions: string[]): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), "dashboard-rules-"));
  try {
    const rules = expressions.map(
      (expr, i) => `      - record: dashboard:expression_${i}\n        expr: ${JSON.stringify(expr)}`,
    );
    const file = join(dir, "dashboard.rules.yml");
    writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join("\n")}\n`);
    return run(tool, ["check", "rules", file]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the alert rules and the dashboard (promtool)", function () {
  this.timeout(300_000);
  let tool: string;

  before(function () {
    tool = promtool();
  });

  it("holds valid rules, each passing its unit tests on the series the test writes", function () {
    const checked = run(tool, ["check", "rules", ALERTS]);
    expect(checked.status, checked.output).to.equal(0);
    const tested = run(tool, ["test", "rules", "deploy/prometheus/alerts.test.yml"]);
    expect(tested.status, tested.output).to.equal(0);
    expect(tested.output).to.include("SUCCESS");
    // Every rule is tested.
    const alerts = [...readFileSync(ALERTS, "utf8").matchAll(/- alert: (\w+)/g)].map((m) => m[1]!);
    const tests = readFileSync(join(ROOT, "deploy/prometheus/alerts.test.yml"), "utf8");
    expect(alerts.length).to.be.at.least(10);
    for (const alert of alerts) expect(tests, alert).to.include(`alertname: ${alert}`);
  });

  it("checks every expression of the dashboard as promtool parses PromQL, and would catch a broken one", function () {
    const expressions = dashboardExpressions();
    expect(expressions.length).to.be.at.least(20);
    for (const { panel, expr } of expressions) expect(expr, panel).to.not.match(/\$/);
    const checked = checkAsRules(
      tool,
      expressions.map((e) => e.expr),
    );
    expect(checked.status, checked.output).to.equal(0);
    expect(checked.output).to.include(`SUCCESS: ${expressions.length} rules found`);
    const broken = checkAsRules(tool, ["sum by (wallet (token_service_wallet_balance)"]);
    expect(broken.status, "a broken expression").to.not.equal(0);
  });

  it("gives each alert a runbook that is a heading of docs/operations.md", function () {
    const operations = readFileSync(join(ROOT, "docs/operations.md"), "utf8");
    const anchors = new Set(
      [...operations.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
        m[1]!
          .trim()
          .toLowerCase()
          .replace(/[^\w\s-]/g, "")
          .replace(/\s+/g, "-"),
      ),
    );
    const runbooks = [...readFileSync(ALERTS, "utf8").matchAll(/runbook: "docs\/operations\.md#([\w-]+)"/g)].map(
      (m) => m[1]!,
    );
    expect(runbooks.length).to.be.at.least(10);
    for (const anchor of runbooks) expect(anchors.has(anchor), anchor).to.equal(true);
  });
});
