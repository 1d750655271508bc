/**
 * The wallet watch: OUTSIDE_TX_POLICY (alert, or pause, which needs an admin key of the access
 * file to resume a wallet), WATCH_INTERVAL_MS, and the thresholds, in whole units:
 * WATCH_NATIVE_MIN, WATCH_<SYMBOL>_MIN for the token and each stable coin, and
 * WATCH_RESERVES_<SYMBOL>_MIN for the swap's reserves of a coin. Their names hold a symbol, so
 * they are read from the environment as it is: a WATCH_ variable that is none of these is a
 * problem (a misspelt threshold would watch nothing). Which symbols exist, and how many decimals
 * each takes, is the deployment's: checked once the chain is read (adapters/chain/watch/options.ts).
 */
import type { WatchSettings } from "../../chain/index.js";
import type { AppConfig } from "./config.js";
import type { Env } from "./schema.js";

const AMOUNT = /^\d+(\.\d+)?$/;
const NATIVE = "WATCH_NATIVE_MIN";
const RESERVES = /^WATCH_RESERVES_([A-Z0-9]+)_MIN$/;
const ASSET = /^WATCH_([A-Z0-9]+)_MIN$/;
/** The WATCH_ variables of the schema (schema.ts). */
const FIXED = new Set(["WATCH_INTERVAL_MS"]);

export function watchSettings(
  e: Env,
  env: NodeJS.ProcessEnv,
  access: AppConfig["access"],
  problems: string[],
): WatchSettings {
  const assets = new Map<string, string>();
  const reserves = new Map<string, string>();
  let native: string | undefined;
  for (const [name, raw] of Object.entries(env)) {
    if (!name.startsWith("WATCH_") || FIXED.has(name)) continue;
    const value = raw?.trim() ?? "";
    if (value === "") continue;
    const reserve = RESERVES.exec(name);
    const asset = reserve === null ? ASSET.exec(name) : null;
    if (name !== NATIVE && reserve === null && asset === null) {
      problems.push(
        `${name}: not a setting of the watch (WATCH_INTERVAL_MS, WATCH_NATIVE_MIN, WATCH_<SYMBOL>_MIN, WATCH_RESERVES_<SYMBOL>_MIN)`,
      );
      continue;
    }
    if (!AMOUNT.test(value) || !/[1-9]/.test(value)) {
      problems.push(`${name}: must be a plain decimal number of whole units greater than 0, such as "0.5"`);
      continue;
    }
    if (name === NATIVE) native = value;
    else if (reserve !== null) reserves.set(reserve[1]!, value);
    else assets.set(asset![1]!, value);
  }
  if (e.OUTSIDE_TX_POLICY === "pause" && !access?.policy.keys.some((key) => key.roles.has("admin")))
    problems.push(
      "OUTSIDE_TX_POLICY: pause needs a key with the admin role in ACCESS_FILE, to resume a paused wallet (POST /api/v1/wallets/{address}/resume)",
    );
  return {
    policy: e.OUTSIDE_TX_POLICY,
    intervalMs: e.WATCH_INTERVAL_MS,
    thresholds: { ...(native === undefined ? {} : { native }), assets, reserves },
  };
}
