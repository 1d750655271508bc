/**
 * What the service's readiness probe and its metrics read of the chain adapter
 * (create-chain-adapter.ts): whether the node answers, the swap runs, every exchange wallet holds
 * gas money and none has a nonce stuck unmined; and each wallet's unconfirmed nonces and balances.
 */
import { Contract, formatUnits, type JsonRpcApiProvider } from "ethers";

import { formatUnits as exactUnits, type NonceLedger, type StableCoin } from "../../core/index.js";
import { isChainUnreachable, RpcProvider } from "./rpc/index.js";
import type { Lifecycle } from "./assembly.js";
import { ERC20_ABI, type TransactionSigner } from "./tx/index.js";
import type { WatchState } from "./watch/index.js";

/** What the metrics' wallet gauges read at each scrape. */
export interface WalletSource {
  /** Each wallet's unconfirmed nonces: how many, and since when the oldest waits. */
  unconfirmed(): Promise<Array<{ wallet: string; count: number; oldestSince?: Date }>>;
  /** Each wallet's balances, in whole units, by asset symbol. */
  balances(): Promise<Array<{ wallet: string; asset: string; amount: number }>>;
  /** The latest block's timestamp, in unix seconds. */
  headTimestamp(): Promise<number>;
}

/** What readiness looks at: the wallets' oldest unmined nonces, the swap, the wallets' gas money, the endpoints. */
export interface ReadinessParts {
  lifecycle: Pick<Lifecycle, "oldestPending">;
  stuckAfterMs: number;
  swap: Contract;
  wallets: readonly TransactionSigner[];
  provider: JsonRpcApiProvider;
  /** The wallet watch's last reading: its balances, alarms and pauses go in the detail (they do not make it unready). */
  watch?: () => WatchState | undefined;
}

/** Ready when the node answers, every exchange wallet holds gas money, and no wallet has a nonce stuck unmined. */
export async function readiness(parts: ReadinessParts): Promise<{ ready: boolean; detail: string }> {
  const { lifecycle, stuckAfterMs, swap, wallets, provider } = parts;
  const watched = parts.watch?.();
  // With several JSON-RPC endpoints, readiness says which are up ("; endpoints: 1/2 up, https://b… down (ECONNREFUSED)").
  const endpoints = () => {
    const watch = watched === undefined ? "" : `; ${watchDetail(watched)}`;
    if (!(provider instanceof RpcProvider)) return watch;
    const all = provider.endpoints();
    if (all.length < 2) return watch;
    const down = all.filter((e) => !e.up).map((e) => `${e.url} down (${e.reason ?? "failing"})`);
    return `; endpoints: ${all.length - down.length}/${all.length} up${down.length > 0 ? `, ${down.join(", ")}` : ""}${watch}`;
  };
  const stuck = lifecycle.oldestPending().filter(({ since }) => Date.now() - since.getTime() > stuckAfterMs);
  if (stuck.length > 0) {
    const detail = stuck.map(
      ({ wallet, nonce, since }) =>
        `${wallet} has nonce ${nonce} unmined for ${Math.round((Date.now() - since.getTime()) / 1000)} s`,
    );
    return { ready: false, detail: `stuck: ${detail.join("; ")}` };
  }
  try {
    const [paused, ...balances] = await Promise.all([
      swap.getFunction("paused")() as Promise<boolean>,
      ...wallets.map((w) => provider.getBalance(w.address)),
    ]);
    const empty = wallets.filter((_, i) => balances[i] === 0n).map((w) => w.address);
    if (empty.length > 0) return { ready: false, detail: `no gas money in ${empty.join(", ")}` };
    if (paused) return { ready: false, detail: `the swap is paused${endpoints()}` };
    return { ready: true, detail: `chain reachable, wallets funded${endpoints()}` };
  } catch (error) {
    return {
      ready: false,
      detail: `${isChainUnreachable(error) ? "chain unreachable" : "deployment unreadable"}${endpoints()}`,
    };
  }
}

/**
 * The watch's last reading in a line: each wallet's balances (an alarm raised says "low, under"
 * its threshold), how many trades of typical gas its native balance pays for, its pause; the
 * swap's reserves ("watch at block 812: 0xAb…: native 1.5 (about 140 trades), TTK 90 (low, under
 * 100); swap: USDC 5000; paused: 0xAb… since … (outside transaction 0x…, nonce 7)").
 */
export function watchDetail(state: WatchState): string {
  if (state.block === undefined && state.at === undefined) return "watch: no reading yet";
  const amount = (b: WatchState["reserves"][number]) =>
    `${b.asset} ${exactUnits(b.units, b.decimals)}${b.low && b.threshold ? ` (low, under ${exactUnits(b.threshold.min, b.decimals)})` : ""}`;
  const wallets = state.wallets.map((w) => {
    const balances = w.balances.map((b) =>
      b.asset === "native" && w.tradesLeft !== undefined && !b.low
        ? `${amount(b)} (about ${w.tradesLeft} trades)`
        : amount(b),
    );
    return `${w.wallet}: ${balances.join(", ")}`;
  });
  const paused = state.wallets.flatMap((w) =>
    w.pause === undefined
      ? []
      : [
          `${w.wallet} since ${w.pause.since.toISOString()} (outside transaction ${w.pause.hash ?? "hash unknown"}, nonce ${w.pause.nonce})`,
        ],
  );
  const swap = state.reserves.length === 0 ? "" : `; swap: ${state.reserves.map(amount).join(", ")}`;
  return `watch at block ${state.block ?? "?"}: ${wallets.join("; ")}${swap}${paused.length > 0 ? `; paused: ${paused.join(", ")}` : ""}`;
}

/** What the wallet gauges read: the wallets, their assets (the token and the stable coins), the journal's open nonces. */
export interface WalletSourceParts {
  lifecycle: Pick<Lifecycle, "oldestPending">;
  wallets: readonly TransactionSigner[];
  provider: JsonRpcApiProvider;
  journal: NonceLedger;
  token: string;
  tokenSymbol: string;
  stableCoins: StableCoin[];
  /** The wallet watch's last reading: the balances it read, so a scrape asks the node nothing. */
  watch?: () => WatchState | undefined;
}

/** What the metrics read at each scrape: unconfirmed nonces, balances, the head (adapters/observability/metrics.ts). */
export function walletSource(parts: WalletSourceParts): WalletSource {
  const { lifecycle, wallets, provider, journal, token, tokenSymbol, stableCoins } = parts;
  const assets = [
    { symbol: tokenSymbol, address: token, decimals: 18 },
    ...stableCoins.map((coin) => ({
      symbol: coin.symbol,
      address: coin.address as string,
      decimals: coin.decimals,
    })),
  ].map((asset) => ({
    ...asset,
    balanceOf: new Contract(asset.address, ERC20_ABI, provider).getFunction("balanceOf"),
  }));
  return {
    async unconfirmed() {
      const oldest = new Map(lifecycle.oldestPending().map((p) => [p.wallet.toLowerCase(), p.since]));
      return Promise.all(
        wallets.map(async (w) => {
          const since = oldest.get(w.address.toLowerCase());
          return {
            wallet: w.address,
            count: (await journal.openSlots(w.address)).length,
            ...(since === undefined ? {} : { oldestSince: since }),
          };
        }),
      );
    },
    async balances() {
      // The watch read them at most a few blocks ago: no call at the scrape.
      const watched = parts.watch?.();
      if (watched?.at !== undefined)
        return watched.wallets.flatMap((w) =>
          w.balances.map((b) => ({
            wallet: w.wallet,
            asset: b.asset === "native" ? "ETH" : b.asset,
            amount: Number(formatUnits(b.units, b.decimals)),
          })),
        );
      const rows = await Promise.all(
        wallets.flatMap((w) => [
          provider
            .getBalance(w.address)
            .then((wei) => ({ wallet: w.address, asset: "ETH", amount: Number(formatUnits(wei, 18)) })),
          ...assets.map(async (asset) => {
            const units = (await asset.balanceOf(w.address)) as bigint;
            return { wallet: w.address, asset: asset.symbol, amount: Number(formatUnits(units, asset.decimals)) };
          }),
        ]),
      );
      return rows;
    },
    async headTimestamp() {
      return (await provider.getBlock("latest"))?.timestamp ?? 0;
    },
  };
}
