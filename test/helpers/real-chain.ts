/**
 * The service on anvil as an operator runs it (production mode, RPC_URL, an independent node
 * mining a block a second), with quick timings: what the lifecycle suites on a real chain share.
 * A second instance on the same chain and journal, the wallet's reverted transactions, and the
 * JSON routes' calls come with it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { expect } from "chai";
import { pino } from "pino";

import { startService, type RunningService } from "../../adapters/main.js";
import { hardhatAccount } from "../../scripts/embedded-chain/chain.js";
import { getJson, LogSink, postJson } from "../adapters/transport/helpers.js";
import { deployOnAnvil, startAnvil, type Anvil } from "./anvil.js";
import { anvilServiceEnv } from "./anvil-service.js";
import { freePort } from "./service-defaults.js";
import { waitFor } from "./wait.js";

export const KEY = "anvil-test-key-0123456789abcdef";
export const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
export const EXCHANGE = hardhatAccount(1);
export const GWEI = 10n ** 9n;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Answer = Awaited<ReturnType<typeof postJson>>;
type Route = "token/sell" | "token/buy" | "remmitance" | "token/quote";

export interface RealChain {
  anvil: Anvil;
  service: RunningService;
  logs: LogSink;
  addresses: Awaited<ReturnType<typeof deployOnAnvil>>;
  dir: string;
  /** The environment the service was started with. */
  env: Record<string, string>;
  /** The block the test began at: reverted() looks from here. */
  startBlock: number;
  nonce(tag?: "latest" | "pending"): Promise<number>;
  /** Stops making blocks (transactions wait in the pool). */
  pause(): Promise<void>;
  /** A block every `blockTimeMs` again (a second by default). */
  resume(): Promise<void>;
  /** A sell of 2 tokens for USDC to CUSTOMER (the body's fields may be changed). */
  sell(idempotencyKey?: string, body?: Record<string, unknown>): Promise<Answer>;
  /** A call of `route` (a body of the SPEC's fields, USDC and CUSTOMER unless given) on `service` (default: the first). */
  post(
    route: Route,
    body: Record<string, unknown>,
    headers?: Record<string, string>,
    service?: RunningService,
  ): Promise<Answer>;
  trade(hash: string): ReturnType<typeof getJson>;
  /** Another instance of the service on the same chain, deployment and journal (with `env` on top). */
  another(env?: Record<string, string>): Promise<RunningService>;
  /** The exchange wallet's transactions mined since the test began that reverted (hashes). */
  reverted(): Promise<string[]>;
  close(): Promise<void>;
}

/** anvil with the suite deployed, mining a block every `blockTimeMs` (1000), and the service on it as an operator runs it, with quick timings. */
export async function realChain(
  env: Record<string, string> = {},
  anvilOptions: { state?: string; blockTimeMs?: number } = {},
): Promise<RealChain> {
  const { blockTimeMs = 1000, ...options } = anvilOptions;
  const anvil = await startAnvil({ blockTime: 1, ...options });
  const addresses = await deployOnAnvil(anvil, blockTimeMs);
  const dir = mkdtempSync(join(tmpdir(), "anvil-service-"));
  writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
  const logs = new LogSink();
  const serviceEnv = {
    ...anvilServiceEnv(anvil, dir, KEY, EXCHANGE.privateKey),
    DATA_DIR: join(dir, "data"),
    RESUBMIT_AFTER_MS: "2000",
    ...env,
  };
  const start = async (extra: Record<string, string> = {}) =>
    startService({
      env: { ...serviceEnv, METRICS_PORT: String(await freePort()), ...extra },
      log: pino({ level: "info" }, logs),
    });
  const service = await start();
  const others: RunningService[] = [];
  const startBlock = Number(await anvil.rpc<string>("eth_blockNumber"));
  const post: RealChain["post"] = (route, body, headers = {}, on = service) =>
    postJson(
      `${on.apiUrl}/api/v1/${route}`,
      { userAddress: EXCHANGE.address, destinatary: CUSTOMER, usdAddress: addresses.stableCoins.USDC, ...body },
      { apiKey: KEY, headers },
    );
  return {
    anvil,
    service,
    logs,
    addresses,
    dir,
    env: serviceEnv,
    startBlock,
    nonce: async (tag = "latest") =>
      Number(await anvil.rpc<string>("eth_getTransactionCount", [EXCHANGE.address, tag])),
    pause: async () => {
      await anvil.rpc("evm_setAutomine", [false]);
      await anvil.rpc("evm_setIntervalMining", [0]);
    },
    resume: async () => void (await anvil.rpc("evm_setIntervalMining", [blockTimeMs / 1000])),
    sell: (idempotencyKey, body = {}) =>
      post("token/sell", { amount: "2", ...body }, idempotencyKey ? { "idempotency-key": idempotencyKey } : {}),
    post,
    trade: (hash) => getJson(`${service.apiUrl}/api/v1/trades/${hash}`, { apiKey: KEY }),
    async another(extra = {}) {
      const other = await start(extra);
      others.push(other);
      return other;
    },
    reverted: () => revertedSince(anvil, EXCHANGE.address, startBlock),
    async close() {
      for (const other of others) await other.close().catch(() => {});
      await service.close().catch(() => {});
      await anvil.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The hashes of `wallet`'s transactions mined from block `from` on that reverted (status 0). */
export async function revertedSince(anvil: Anvil, wallet: string, from: number): Promise<string[]> {
  const head = Number(await anvil.rpc<string>("eth_blockNumber"));
  const reverted: string[] = [];
  for (let block = from; block <= head; block++) {
    const { transactions } = await anvil.rpc<{ transactions: Array<{ hash: string; from: string }> }>(
      "eth_getBlockByNumber",
      [`0x${block.toString(16)}`, true],
    );
    for (const tx of transactions) {
      if (tx.from.toLowerCase() !== wallet.toLowerCase()) continue;
      const receipt = await anvil.rpc<{ status: string }>("eth_getTransactionReceipt", [tx.hash]);
      if (Number(receipt.status) !== 1) reverted.push(tx.hash);
    }
  }
  return reverted;
}

/** The hash a 504 "trade pending" names. */
export function pendingHash(answer: { status: number; body: { code?: string; message?: string } }): string {
  expect(answer.status, JSON.stringify(answer.body)).to.equal(504);
  expect(answer.body.code).to.equal("deadline_exceeded");
  return /transaction (0x[0-9a-f]{64})/.exec(answer.body.message ?? "")![1]!;
}

/** Asks again with the same call until the answer is not 504 (pending). */
export async function outcome(ask: () => Promise<Answer>, what: string, ms = 60_000): Promise<Answer> {
  return waitFor(
    `the outcome of ${what}`,
    async () => {
      const answer = await ask();
      return answer.status === 504 ? undefined : answer;
    },
    ms,
  );
}

/** `owner`'s balance of the ERC-20 at `token`, at the latest block. */
export async function balanceOf(anvil: Anvil, token: string, owner: string): Promise<bigint> {
  const data = `0x70a08231${owner.slice(2).toLowerCase().padStart(64, "0")}`;
  return BigInt(await anvil.rpc<string>("eth_call", [{ to: token, data }, "latest"]));
}
