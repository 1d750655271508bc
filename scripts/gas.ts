/**
 * `npm run gas`: the gas of each trade as the service sends it, checked against the committed
 * snapshot (gas-snapshot.json, like `forge snapshot`). `npm run gas -- --update` rewrites it.
 *
 * Measured on the embedded EDR chain with the deployment of `npm start` (scripts/deploy.ts):
 * the chain adapter itself signs and sends each trade (EIP-1559, the exchange wallet, its
 * finite approvals, a deadline and a minimum out in the calldata), so the figures are the
 * receipts' gasUsed, what the operator pays. Every trade, to a fresh destinatary (no balance of
 * what it receives) and to one seen before, for sell, buy and remittance with each mock coin.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { BrowserProvider, HDNodeWallet, dataSlice, getAddress, id, parseUnits } from "ethers";

import { createChainAdapter } from "../adapters/chain/index.js";
import { MemoryJournal } from "../adapters/journal/index.js";
import type { StableCoin, TradeKind } from "../core/index.js";
import type { network as hardhatNetwork } from "hardhat";
import { HARDHAT_MNEMONIC } from "./embedded-chain/chain.js";

type HardhatNetwork = typeof hardhatNetwork;

export const SNAPSHOT_PATH = fileURLToPath(new URL("../gas-snapshot.json", import.meta.url));
/** A figure more than this above the snapshot fails the check. */
export const GROWTH_TOLERANCE = 0.005;
/**
 * A figure more than this below the snapshot asks for the snapshot to be updated. The only
 * noise is the calldata's deadline: a zero byte in it costs 12 gas less (0.01%).
 */
export const SHRINK_TOLERANCE = 0.001;

export const KINDS = ["sell", "buy", "remittance"] as const satisfies readonly TradeKind[];
export const COINS = ["DAI", "USDT", "USDC"] as const;
export const DESTINATARIES = ["fresh", "seen"] as const;

/** "sell DAI fresh" → gasUsed. Keys in the order above. */
export type GasFigures = Record<string, number>;

/** The snapshot's key of one figure. */
export function gasKey(kind: TradeKind, coin: string, destinatary: (typeof DESTINATARIES)[number]): string {
  return `${kind} ${coin} ${destinatary}`;
}

/** What each trade spends: 100 tokens for a sell, 100 USD of the coin for a buy or remittance. */
const AMOUNT = "100";

/** Measures every figure on a new in-process chain of `network` (Hardhat's, by default). */
export async function measureGas(network?: HardhatNetwork): Promise<GasFigures> {
  const { deploySuite } = await import("./deploy.js");
  const connection = await (network ?? (await import("hardhat")).network).create();
  try {
    const { ethers } = connection;
    const [deployer, exchange] = await ethers.getSigners();
    if (deployer === undefined || exchange === undefined) throw new Error("the network has fewer than two signers");
    const suite = await deploySuite(ethers, { exchangeWallet: exchange, deployer });
    const key = HDNodeWallet.fromPhrase(HARDHAT_MNEMONIC, undefined, "m/44'/60'/0'/0/1");
    if (key.address !== exchange.address) throw new Error("the network does not use Hardhat's default accounts");
    const chain = await createChainAdapter({
      provider: new BrowserProvider(connection.provider, undefined, { cacheTimeout: -1 }),
      privateKeys: [key.privateKey],
      addresses: suite.addresses,
      journal: new MemoryJournal(),
    });
    const coins = new Map<string, StableCoin>(chain.stableCoins.map((coin) => [coin.symbol, coin]));
    const figures: GasFigures = {};
    let n = 0;
    for (const kind of KINDS) {
      for (const symbol of COINS) {
        const stable = coins.get(symbol);
        if (stable === undefined) throw new Error(`the deployment has no ${symbol}`);
        // A new address per trade shape, nothing of it ever written; the same in every run, so
        // that its zero bytes (4 gas of calldata instead of 16) do too.
        const destinatary = getAddress(dataSlice(id(`gas ${kind} ${symbol}`), 12)) as `0x${string}`;
        const amount = parseUnits(AMOUNT, kind === "sell" ? 18 : stable.decimals);
        for (const seen of DESTINATARIES) {
          const wallet = exchange.address as `0x${string}`;
          const receipt = await chain.trade[kind]({ kind, wallet, destinatary, amount, stable });
          figures[gasKey(kind, symbol, seen)] = receipt.gasUsed;
          if (process.env.GAS_TRACE === "1")
            await trace(connection.provider, receipt.transactionHash, gasKey(kind, symbol, seen));
          n += 1;
        }
      }
    }
    if (n !== KINDS.length * COINS.length * DESTINATARIES.length) throw new Error("not every trade was measured");
    return figures;
  } finally {
    await connection.close();
  }
}

/** Debug: prints a transaction's calldata cost and its storage, log and call steps (GAS_TRACE=1). */
async function trace(
  provider: { request(a: { method: string; params: unknown[] }): Promise<unknown> },
  hash: string,
  label: string,
) {
  const tx = (await provider.request({ method: "eth_getTransactionByHash", params: [hash] })) as { input: string };
  const bytes = tx.input.slice(2).match(/../g) ?? [];
  const zeros = bytes.filter((b) => b === "00").length;
  console.log(
    `${label}: calldata ${bytes.length} bytes, ${zeros} zero: ${zeros * 4 + (bytes.length - zeros) * 16} gas`,
  );
}

/** The committed snapshot, or undefined when there is none. */
export function readSnapshot(path = SNAPSHOT_PATH): GasFigures | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as GasFigures;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

export function writeSnapshot(figures: GasFigures, path = SNAPSHOT_PATH): void {
  writeFileSync(path, `${JSON.stringify(figures, null, 2)}\n`);
}

/**
 * What is wrong with `measured` against `snapshot`: one line per figure that grew past
 * GROWTH_TOLERANCE, shrank past SHRINK_TOLERANCE, or is missing on either side.
 */
export function compareGas(snapshot: GasFigures, measured: GasFigures): { grew: string[]; shrank: string[] } {
  const grew: string[] = [];
  const shrank: string[] = [];
  for (const [key, now] of Object.entries(measured)) {
    const before = snapshot[key];
    if (before === undefined) {
      shrank.push(`${key}: not in the snapshot (now ${now})`);
      continue;
    }
    const change = `${key}: ${before} -> ${now} (${percent((now - before) / before)})`;
    // In parts per 100,000, so that exactly 0.5% passes (1.005 is not exact in binary).
    const ppm = (x: number) => Math.round(x * 100_000);
    if (now * 100_000 > before * (100_000 + ppm(GROWTH_TOLERANCE))) grew.push(change);
    else if (now * 100_000 < before * (100_000 - ppm(SHRINK_TOLERANCE))) shrank.push(change);
  }
  for (const key of Object.keys(snapshot)) if (!(key in measured)) shrank.push(`${key}: no longer measured`);
  return { grew, shrank };
}

function percent(x: number): string {
  return `${x >= 0 ? "+" : ""}${(x * 100).toFixed(2)}%`;
}

/** The figures as a table: one row per trade and coin, fresh and seen destinatary. */
export function gasTable(figures: GasFigures, snapshot?: GasFigures): string {
  const cell = (key: string) => {
    const now = figures[key];
    const before = snapshot?.[key];
    if (now === undefined) return "-";
    return before === undefined || before === now ? String(now) : `${now} (was ${before})`;
  };
  const rows = [["trade", "coin", "fresh destinatary", "seen before"]];
  for (const kind of KINDS)
    for (const coin of COINS)
      rows.push([kind, coin, cell(gasKey(kind, coin, "fresh")), cell(gasKey(kind, coin, "seen"))]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows
    .map((row) => row.map((text, i) => (i < 2 ? text.padEnd(widths[i]!) : text.padStart(widths[i]!))).join("  "))
    .join("\n");
}

async function main(): Promise<void> {
  const update = process.argv.includes("--update");
  const measured = await measureGas();
  const snapshot = readSnapshot();
  console.log(gasTable(measured, snapshot));
  if (update || snapshot === undefined) {
    writeSnapshot(measured);
    console.log(`\nwrote ${SNAPSHOT_PATH}`);
    return;
  }
  const { grew, shrank } = compareGas(snapshot, measured);
  for (const line of grew) console.log(`grew past ${GROWTH_TOLERANCE * 100}%: ${line}`);
  for (const line of shrank) console.log(`changed: ${line}`);
  if (shrank.length > 0) console.log("the snapshot is out of date: npm run gas -- --update");
  if (grew.length > 0 || shrank.length > 0) process.exitCode = 1;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await main();
