/**
 * The chain's block time, from the timestamps of the heads the service reads anyway (the block
 * watcher's looks, the fee oracle's reads) and of two blocks read once at start: between each
 * head and the higher one read next, the time per block. What it is for: a trade under a quote
 * needs two blocks' time before the quote's expiry to be mined by its deadline (core's
 * minTimeLeftMs), so an estimate errs long: the larger of the median of the recent rates and the
 * latest one (up to twice the median), so that a chain that slowed down is believed at once.
 *
 * A chain that mines a block per transaction (the embedded chain's automine) has no block time
 * its timestamps tell: its blocks come when a trade is sent, so a quiet minute would read as a
 * one-minute block. Its block time is given (`known`: 0), never measured.
 */
import { type JsonRpcApiProvider, toQuantity } from "ethers";

/** How many recent rates the median is taken over. */
const RATES = 8;

export class BlockTimes {
  readonly #known: number | undefined;
  /** The highest head recorded: its number and timestamp (seconds). */
  #last: { number: number; timestamp: number } | undefined;
  /** Recent ms per block, oldest first. */
  readonly #rates: number[] = [];

  /** @param known the chain's block time in ms when it is known (the embedded chain's), else measured */
  constructor(known?: number) {
    this.#known = known;
  }

  /** A head read: its number, and its timestamp in unix seconds. Lower or equal heads than the last add nothing. */
  record(number: number, timestampS: number): void {
    const last = this.#last;
    if (last !== undefined && number <= last.number) return;
    if (last !== undefined && timestampS >= last.timestamp) {
      this.#rates.push(((timestampS - last.timestamp) * 1000) / (number - last.number));
      if (this.#rates.length > RATES) this.#rates.shift();
    }
    this.#last = { number, timestamp: timestampS };
  }

  /**
   * The block time in ms: the known one, else the larger of the recent rates' median and the
   * latest, the latest counted at most twice the median (one missed slot does not double it);
   * undefined before two heads.
   */
  blockTimeMs(): number | undefined {
    if (this.#known !== undefined) return this.#known;
    const latest = this.#rates.at(-1);
    if (latest === undefined) return undefined;
    const sorted = [...this.#rates].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    return Math.max(median, Math.min(latest, 2 * median));
  }
}

/** How many blocks back the block time is first measured over, at start. */
const FIRST_SPAN = 64;

/**
 * Measures the block time once from the chain: the latest block's timestamp against the one
 * FIRST_SPAN blocks below it (two calls, at start, never on a trade's path).
 */
export async function measureBlockTime(provider: JsonRpcApiProvider, times: BlockTimes): Promise<void> {
  type Header = { number: string; timestamp: string } | null;
  const latest = (await provider.send("eth_getBlockByNumber", ["latest", false])) as Header;
  if (latest === null) return;
  const from = Math.max(0, Number(latest.number) - FIRST_SPAN);
  const earlier = (await provider.send("eth_getBlockByNumber", [toQuantity(from), false])) as Header;
  if (earlier === null) return;
  times.record(from, Number(earlier.timestamp));
  times.record(Number(latest.number), Number(latest.timestamp));
}
