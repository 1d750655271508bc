/**
 * Helpers for the tests that run the whole service on the embedded chain (load and fuzz):
 * start/stop, a non-caching provider, ERC-20 reads, a seeded random source, and the swap's
 * conversions written out independently with BigInt.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Contract, JsonRpcProvider } from "ethers";

import { startService, type RunningService } from "../../../adapters/main.js";
import { startEmbeddedChain } from "../../../scripts/embedded-chain/chain.js";
import { defaultLog, freePort } from "../../helpers/service-defaults.js";

export interface EmbeddedService {
  service: RunningService;
  /** A provider on the embedded chain's JSON-RPC server that never caches. */
  provider: JsonRpcProvider;
  wallet: string;
  close(): Promise<void>;
}

/** startService as `npm start` runs it (embedded chain, free ports, metrics and access logs on), with `env` on top. */
export async function startEmbeddedService(apiKey: string, env: Record<string, string> = {}): Promise<EmbeddedService> {
  const dir = mkdtempSync(join(tmpdir(), "chain-test-"));
  let service: RunningService;
  try {
    service = await startService({
      env: {
        PORT: "0",
        METRICS_PORT: String(await freePort()),
        CHAIN_PORT: "0",
        // An access file lists the keys itself (API_KEYS must then be unset).
        ...(env.ACCESS_FILE === undefined && { API_KEYS: apiKey }),
        ...env,
      },
      embeddedChain: async () => startEmbeddedChain,
      log: defaultLog(),
      rootDir: dir,
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const provider = new JsonRpcProvider(service.rpcUrl, undefined, { staticNetwork: true, cacheTimeout: -1 });
  return {
    service,
    provider,
    wallet: service.wallets[0]!,
    async close() {
      provider.destroy();
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const ERC20 = ["function balanceOf(address) view returns (uint256)", "function totalSupply() view returns (uint256)"];

export function erc20(address: string, provider: JsonRpcProvider) {
  const contract = new Contract(address, ERC20, provider);
  return {
    balanceOf: (owner: string) => contract.getFunction("balanceOf")(owner) as Promise<bigint>,
    totalSupply: () => contract.getFunction("totalSupply")() as Promise<bigint>,
  };
}

/** A uniform-enough BigInt in [min, max] drawn from `random`. */
export function randomBigInt(random: () => number, min: bigint, max: bigint): bigint {
  const span = max - min + 1n;
  let value = 0n;
  // 32 random bits at a time, 64 bits past the span, then reduced (negligible bias).
  const bits = span.toString(2).length + 64;
  for (let have = 0; have < bits; have += 32) value = (value << 32n) | BigInt(Math.floor(random() * 2 ** 32));
  return min + (value % span);
}

/**
 * Base units as decimal text, e.g. (1234500n, 6) → "1.2345". `extraZeros` appends that many
 * zeros to the fraction (which the service must accept: trailing zeros carry no value).
 */
export function toDecimalText(units: bigint, decimals: number, extraZeros = 0): string {
  const scale = 10n ** BigInt(decimals);
  const fraction = (units % scale).toString().padStart(decimals, "0").replace(/0+$/, "") + "0".repeat(extraZeros);
  return `${units / scale}${fraction === "" ? "" : `.${fraction}`}`;
}

/** The token/USD feed of the embedded chain: 1.25 with 8 decimals. */
export const PRICE_1_25 = 125_000_000n;

/** Stable coin paid for `tokens` (18 decimals): tokens * price * 10^d / 10^26, rounded down. */
export function stableOutFor(tokens: bigint, price: bigint, stableDecimals: number): bigint {
  return (tokens * price * 10n ** BigInt(stableDecimals)) / 10n ** 26n;
}

/** Tokens (18 decimals) minted for `usd` in a stable coin's base units: usd * 10^26 / (price * 10^d), rounded down. */
export function tokensOutFor(usd: bigint, price: bigint, stableDecimals: number): bigint {
  return (usd * 10n ** 26n) / (price * 10n ** BigInt(stableDecimals));
}
