/**
 * The wallet watch's settings (issue 40, item 2): the thresholds read from the environment by
 * their names (WATCH_NATIVE_MIN, WATCH_<SYMBOL>_MIN, WATCH_RESERVES_<SYMBOL>_MIN), a misspelt one
 * refused; made exact in base units once the deployment's assets are known, a symbol it does not
 * have or a value with too many decimals refused naming the setting; where an alarm clears (120 %,
 * rounded up); and the body of a webhook event about a wallet, which carries its state, not a trade.
 */
import { expect } from "chai";

import { amountView, clearsAt, resolveThresholds } from "../../../adapters/chain/watch/index.js";
import { loadConfig } from "../../../adapters/config/env.js";
import { webhookBody } from "../../../adapters/webhooks/deliverer.js";
import type { StableCoin, WebhookEvent } from "../../../core/index.js";

const COINS: StableCoin[] = [
  { symbol: "DAI", address: "0x0000000000000000000000000000000000000001", decimals: 18 },
  { symbol: "USDC", address: "0x0000000000000000000000000000000000000002", decimals: 6 },
];

function problemsOf(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    return (error as { problems?: string[] }).problems ?? [String(error)];
  }
}

describe("the wallet watch's settings", function () {
  it("reads the thresholds by name, the policy and the interval, with their defaults", function () {
    expect(loadConfig({}).watch).to.deep.equal({
      policy: "alert",
      intervalMs: 1000,
      thresholds: { assets: new Map(), reserves: new Map() },
    });
    const { watch } = loadConfig({
      WATCH_NATIVE_MIN: "0.5",
      WATCH_USDC_MIN: "5000",
      WATCH_TTK_MIN: "100",
      WATCH_RESERVES_DAI_MIN: "250000.25",
      WATCH_INTERVAL_MS: "3000",
    });
    expect(watch.intervalMs).to.equal(3000);
    expect(watch.thresholds.native).to.equal("0.5");
    expect([...watch.thresholds.assets]).to.deep.equal([
      ["USDC", "5000"],
      ["TTK", "100"],
    ]);
    expect([...watch.thresholds.reserves]).to.deep.equal([["DAI", "250000.25"]]);
  });

  it("refuses a WATCH_ variable that is no setting, and an amount that is not a positive decimal", function () {
    expect(problemsOf({ WATCH_NATIVE: "1" })).to.deep.equal([
      "WATCH_NATIVE: not a setting of the watch (WATCH_INTERVAL_MS, WATCH_NATIVE_MIN, WATCH_<SYMBOL>_MIN, WATCH_RESERVES_<SYMBOL>_MIN)",
    ]);
    expect(problemsOf({ WATCH_USDC_MIN: "1e3" })[0]).to.match(/^WATCH_USDC_MIN: must be a plain decimal/);
    expect(problemsOf({ WATCH_NATIVE_MIN: "0.000" })[0]).to.match(/^WATCH_NATIVE_MIN: .*greater than 0/);
    expect(problemsOf({ OUTSIDE_TX_POLICY: "stop" })[0]).to.match(/^OUTSIDE_TX_POLICY: must be alert .* or pause/);
  });

  it("makes the thresholds exact for the deployment's assets, naming each that does not fit", function () {
    const problems: string[] = [];
    const thresholds = resolveThresholds(
      {
        native: "0.000000000000000001",
        assets: new Map([
          ["USDC", "5000.123456"],
          ["ttk", "1.5"],
        ]),
        reserves: new Map([["DAI", "250000.25"]]),
      },
      { symbol: "TTK" },
      COINS,
      problems,
    );
    expect(problems).to.deep.equal([]);
    expect(thresholds.native).to.deep.equal({ setting: "WATCH_NATIVE_MIN", min: 1n });
    expect(thresholds.assets.get("USDC")).to.deep.equal({ setting: "WATCH_USDC_MIN", min: 5_000_123_456n });
    expect(thresholds.assets.get("TTK")).to.deep.equal({ setting: "WATCH_TTK_MIN", min: 1_500_000_000_000_000_000n });
    expect(thresholds.reserves.get("DAI")!.min).to.equal(250_000_250_000_000_000_000_000n);

    const refused: string[] = [];
    resolveThresholds(
      {
        assets: new Map([
          ["USDC", "0.0000001"],
          ["USDT", "1"],
        ]),
        reserves: new Map([["TTK", "1"]]),
      },
      { symbol: "TTK" },
      COINS,
      refused,
    );
    expect(refused).to.deep.equal([
      'WATCH_USDC_MIN: "0.0000001" must be a positive amount with at most 6 decimals',
      "WATCH_USDT_MIN: USDT is neither the token nor a stable coin of the swap (TTK, DAI, USDC)",
      "WATCH_RESERVES_TTK_MIN: the swap keeps reserves of its stable coins only (DAI, USDC)",
    ]);
  });

  it("clears an alarm at 120 % of its threshold, rounded up to a base unit", function () {
    expect(clearsAt({ setting: "x", min: 5000n })).to.equal(6000n);
    expect(clearsAt({ setting: "x", min: 1n })).to.equal(2n);
    expect(clearsAt({ setting: "x", min: 11n })).to.equal(14n);
    expect(amountView(1_500_000n, 6)).to.deep.equal({ value: "1.5", baseUnits: "1500000" });
  });

  it("sends a wallet's event with its state as data, and no trade", function () {
    const data = { wallet: "0xAb", asset: "native", balance: { value: "1", baseUnits: "1000000000000000000" } };
    const event: WebhookEvent = {
      seq: 1,
      id: `msg_${"0".repeat(32)}`,
      scope: "s",
      tradeId: null,
      type: "wallet.balance_low",
      trade: null,
      data,
      createdAt: new Date("2026-12-01T00:00:00.000Z"),
      status: "pending",
      attempts: 0,
      nextAttemptAt: new Date(0),
      windowStart: new Date(0),
    };
    expect(JSON.parse(webhookBody(event))).to.deep.equal({
      type: "wallet.balance_low",
      timestamp: "2026-12-01T00:00:00.000Z",
      data,
    });
  });
});
