/**
 * The watch's alarms and pauses. An alarm is raised when a balance (or the swap's reserves of a
 * coin) falls below its threshold, and cleared once it is back at 120 % of it, so that a balance
 * hovering at the threshold does not flap; each change is written with its event
 * (`wallet.balance_low` / `_ok`, `swap.reserves_low` / `_ok`) by WatchJournal.setWatchAlarm, once
 * across instances and restarts. The pauses are the journal's, read at each reading and at once
 * after this instance paused a wallet: a trade from a paused wallet is refused before anything is
 * signed (WalletPausedError).
 */
import {
  formatUnits,
  type WalletPause,
  WalletPausedError,
  type WatchData,
  type WatchEvent,
  type WatchJournal,
} from "../../../core/index.js";
import type { Threshold, WatchLog } from "./options.js";

/** An amount as the events and the API show amounts: exact decimal text, and base units. */
export function amountView(units: bigint, decimals: number): { value: string; baseUnits: string } {
  return { value: formatUnits(units, decimals), baseUnits: units.toString() };
}

/** Where an alarm clears: 120 % of its threshold, rounded up to a base unit. */
export function clearsAt(threshold: Threshold): bigint {
  return (threshold.min * 12n + 9n) / 10n;
}

/** One balance against its threshold, at a reading. */
export interface AlarmCheck {
  /** `wallet:<address>:<asset>` or `swap:<coin>`: what the journal keeps it by. */
  name: string;
  kind: "wallet" | "swap";
  /** Lower-case wallet address, or `swap:<coin>`: the event's subject. */
  subject: string;
  asset: string;
  decimals: number;
  units: bigint;
  threshold: Threshold;
  /** The rest of the event's data: the wallet's or the swap's state. */
  state: WatchData;
}

export class Alarms {
  readonly #journal: WatchJournal;
  readonly #log: WatchLog;
  #raised = new Set<string>();

  constructor(journal: WatchJournal, log: WatchLog) {
    this.#journal = journal;
    this.#log = log;
  }

  /** The alarms raised as the journal holds them (at start: none is announced again). */
  async load(): Promise<void> {
    this.#raised = new Set(await this.#journal.watchAlarms());
  }

  raised(name: string): boolean {
    return this.#raised.has(name);
  }

  /** Raises an alarm below its threshold, clears one back at 120 % of it. */
  async evaluate(checks: readonly AlarmCheck[]): Promise<void> {
    for (const check of checks) {
      const low = this.#raised.has(check.name);
      if (!low && check.units < check.threshold.min) await this.#set(check, true);
      else if (low && check.units >= clearsAt(check.threshold)) await this.#set(check, false);
    }
  }

  async #set(check: AlarmCheck, raised: boolean): Promise<void> {
    const type =
      check.kind === "wallet"
        ? raised
          ? "wallet.balance_low"
          : "wallet.balance_ok"
        : raised
          ? "swap.reserves_low"
          : "swap.reserves_ok";
    const amount = amountView(check.units, check.decimals);
    const data: WatchData = {
      ...check.state,
      asset: check.asset,
      // The amount compared: the wallet's balance of the asset, or the swap's (its reserves of the coin).
      balance: amount,
      threshold: amountView(check.threshold.min, check.decimals),
      clearsAt: amountView(clearsAt(check.threshold), check.decimals),
      setting: check.threshold.setting,
    };
    const event: WatchEvent = { type, subject: check.subject, data, at: new Date() };
    const changed = await this.#journal.setWatchAlarm(check.name, raised, event);
    if (raised) this.#raised.add(check.name);
    else this.#raised.delete(check.name);
    if (!changed) return; // another instance wrote it
    const fields = { alarm: check.name, asset: check.asset, amount: amount.value, threshold: check.threshold.setting };
    if (raised) this.#log.warn(fields, `${type}: below ${formatUnits(check.threshold.min, check.decimals)}`);
    else this.#log.info(fields, `${type}: back at 120 % of ${formatUnits(check.threshold.min, check.decimals)}`);
  }
}

/** The wallets paused, as the journal holds them, and the refusal of a trade from one. */
export class WalletPauses {
  readonly #journal: Pick<WatchJournal, "walletPauses">;
  #paused = new Map<string, WalletPause>();
  /** Display form of each wallet (checksummed), by lower-case address. */
  readonly #names: ReadonlyMap<string, string>;

  constructor(journal: Pick<WatchJournal, "walletPauses">, wallets: readonly string[]) {
    this.#journal = journal;
    this.#names = new Map(wallets.map((wallet) => [wallet.toLowerCase(), wallet]));
  }

  /** Reads the pauses again (a read that fails keeps the ones known). */
  async refresh(): Promise<void> {
    const pauses = await this.#journal.walletPauses();
    this.#paused = new Map(pauses.map((pause) => [pause.wallet, pause]));
  }

  /** The pause of `wallet`, if it is paused. */
  of(wallet: string): WalletPause | undefined {
    return this.#paused.get(wallet.toLowerCase());
  }

  list(): WalletPause[] {
    return [...this.#paused.values()];
  }

  /** The error a trade from `wallet` is refused with while it is paused; undefined otherwise. */
  refusal(wallet: string): WalletPausedError | undefined {
    const pause = this.of(wallet);
    if (pause === undefined) return undefined;
    const name = this.#names.get(pause.wallet) ?? wallet;
    return new WalletPausedError(name, pause.since, { nonce: pause.nonce, hash: pause.hash });
  }
}
