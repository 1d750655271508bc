/**
 * JSON-RPC calls per trade (issue 29), for `npm run bench` (`--only rpc` runs this alone) and
 * the anvil test that holds the service to its budget (test/scripts/bench-rpc.anvil.test.ts).
 *
 * The service runs as an operator runs it (production mode, RPC_URL, defaults otherwise) in
 * front of anvil mining a block a second, through a proxy that counts every JSON-RPC call it
 * forwards, by method (a batch counts each of its calls). After a few warm-up sells (the first
 * allowance top-up, the first gas figures), two windows are counted, every call the service
 * makes meanwhile included (its lifecycle monitor's too):
 * - sequential: sells one after the other, each awaited;
 * - a burst: 50 sells at once, from the first request to the last answer.
 *
 * Then the same again (same anvil, a service of its own) with RPC_URL a ws:// URL: the service
 * talks to anvil's WebSocket through a counting WebSocket proxy (test/helpers/ws-proxy.ts) that
 * counts each call it forwards (a batch counts each of its calls) and not what anvil pushes
 * (the newHeads notifications the block watcher takes instead of asking for the head).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { pino } from "pino";

import { hardhatAccount } from "./embedded-chain/chain.js";
import { deployOnAnvil, startAnvil, type Anvil } from "../test/helpers/anvil.js";
import { startWsProxy } from "../test/helpers/ws-proxy.js";
import type { DeploymentAddresses } from "../adapters/chain/index.js";

/** Hardhat account #2: receives the stable coins. */
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const API_KEY = "bench-rpc-key-0123456789abcdef";

/** Calls counted in one window: in all, and by method. */
export interface RpcWindow {
  trades: number;
  calls: number;
  byMethod: Record<string, number>;
  seconds: number;
}

/** The two windows over HTTP, and over a WebSocket when measured. */
export interface RpcResult {
  sequential: RpcWindow;
  burst: RpcWindow;
  ws?: { sequential: RpcWindow; burst: RpcWindow };
}

export interface RpcBenchOptions {
  /** Sequential sells counted. Default 20. */
  sequential?: number;
  /** Sells sent at once. Default 50. */
  burst?: number;
  /** Also measure with RPC_URL a ws:// URL. Default true. */
  websocket?: boolean;
  progress?: (line: string) => void;
}

/** A proxy in front of `upstream` that counts the JSON-RPC calls it forwards, by method. */
async function countingProxy(
  upstream: string,
): Promise<{ url: string; counts: Map<string, number>; close(): Promise<void> }> {
  const counts = new Map<string, number>();
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      try {
        const parsed = JSON.parse(body.toString("utf8")) as { method?: string } | Array<{ method?: string }>;
        for (const call of Array.isArray(parsed) ? parsed : [parsed]) {
          const method = call.method ?? "?";
          counts.set(method, (counts.get(method) ?? 0) + 1);
        }
      } catch {
        // not JSON: forwarded as it is, counted as nothing
      }
      const forward = http.request(
        upstream,
        { method: "POST", agent, headers: { "content-type": "application/json", "content-length": body.length } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, { "content-type": "application/json" });
          answer.pipe(res);
        },
      );
      forward.on("error", () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      agent.destroy();
    },
  };
}

function snapshot(counts: Map<string, number>): Map<string, number> {
  return new Map(counts);
}

function since(before: Map<string, number>, after: Map<string, number>, trades: number, seconds: number): RpcWindow {
  const byMethod: Record<string, number> = {};
  let calls = 0;
  for (const [method, n] of after) {
    const d = n - (before.get(method) ?? 0);
    if (d > 0) {
      byMethod[method] = d;
      calls += d;
    }
  }
  return { trades, calls, byMethod, seconds };
}

/** Anvil (1 s blocks), the suite, the service through the counting proxy (HTTP, then WebSocket); counts the two windows. */
export async function measureRpc(options: RpcBenchOptions = {}): Promise<RpcResult> {
  const anvil = await startAnvil({ blockTime: 1 });
  try {
    const addresses = await deployOnAnvil(anvil, 1000);
    const http = await measureOn(anvil, addresses, "http", options);
    if (options.websocket === false) return http;
    return { ...http, ws: await measureOn(anvil, addresses, "ws", options) };
  } finally {
    await anvil.stop();
  }
}

/** The service on `anvil` through a counting proxy of `transport`; counts the two windows. */
async function measureOn(
  anvil: Anvil,
  addresses: DeploymentAddresses,
  transport: "http" | "ws",
  options: RpcBenchOptions,
): Promise<{ sequential: RpcWindow; burst: RpcWindow }> {
  const progress = (line: string) => options.progress?.(`${line} (${transport === "ws" ? "WebSocket" : "HTTP"})`);
  const { startService } = await import("../adapters/main.js");
  const exchange = hardhatAccount(1);
  const dir = mkdtempSync(join(tmpdir(), "bench-rpc-"));
  let proxy: { url: string; counts: Map<string, number>; close(): Promise<void> } | undefined;
  let service: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    writeFileSync(join(dir, "deployment.json"), JSON.stringify(addresses));
    proxy = transport === "ws" ? await startWsProxy(`ws://127.0.0.1:${anvil.port}`) : await countingProxy(anvil.url);
    const metricsPort = await new Promise<number>((resolve) => {
      const probe = http.createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    service = await startService({
      env: {
        RPC_URL: proxy.url,
        DEPLOYMENT_FILE: join(dir, "deployment.json"),
        EXCHANGE_PRIVATE_KEYS: exchange.privateKey,
        API_KEYS: API_KEY,
        HOST: "127.0.0.1",
        PORT: "0",
        METRICS_PORT: String(metricsPort),
        DATA_DIR: join(dir, "data"),
      },
      log: pino({ level: "silent" }),
    });
    const apiUrl = service.apiUrl;
    const sell = async () => {
      const response = await fetch(`${apiUrl}/api/v1/token/sell`, {
        method: "POST",
        headers: { "content-type": "application/json", api_key: API_KEY },
        body: JSON.stringify({
          userAddress: exchange.address,
          destinatary: CUSTOMER,
          amount: "1",
          usdAddress: addresses.stableCoins.USDC,
        }),
      });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`a sell answered ${response.status}: ${text}`);
    };
    progress("rpc: warm-up sells…");
    for (let i = 0; i < 3; i++) await sell();

    const sequentialCount = options.sequential ?? 20;
    progress(`rpc: ${sequentialCount} sequential sells at 1 s blocks…`);
    let before = snapshot(proxy.counts);
    let started = performance.now();
    for (let i = 0; i < sequentialCount; i++) await sell();
    const sequential = since(before, proxy.counts, sequentialCount, (performance.now() - started) / 1000);

    const burstCount = options.burst ?? 50;
    progress(`rpc: a burst of ${burstCount} sells…`);
    before = snapshot(proxy.counts);
    started = performance.now();
    await Promise.all(Array.from({ length: burstCount }, () => sell()));
    const burst = since(before, proxy.counts, burstCount, (performance.now() - started) / 1000);
    return { sequential, burst };
  } finally {
    await service?.close().catch(() => {});
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The windows as a markdown table: calls per trade, and the methods that make them up; over
 * HTTP, and over a WebSocket in two more columns when measured.
 */
export function rpcTable({ sequential, burst, ws }: RpcResult): string {
  const windows = [sequential, burst, ...(ws === undefined ? [] : [ws.sequential, ws.burst])];
  const perTrade = (w: RpcWindow) => w.calls / w.trades;
  const methods = [...new Set(windows.flatMap((w) => Object.keys(w.byMethod)))].sort();
  const cell = (w: RpcWindow, method: string) => ((w.byMethod[method] ?? 0) / w.trades).toFixed(2);
  const verdict = (value: number, target: number) => `≤ ${target} ${value <= target ? "✅ met" : "❌ missed"}`;
  const row = (cells: string[]) => `| ${cells.join(" | ")} |`;
  const targets = windows.map((w, i) => verdict(perTrade(w), i % 2 === 0 ? 4 : 1.5));
  const over = (w: RpcWindow, i: number) =>
    `${i < 2 ? "" : "WebSocket: "}${i % 2 === 0 ? `Sequential (${w.trades} sells, ${w.seconds.toFixed(1)} s)` : `Burst (${w.trades} at once, ${w.seconds.toFixed(1)} s)`}`;
  return [
    "",
    "JSON-RPC calls per sell, counted by a proxy in front of anvil (1 s blocks), the service in production mode (its lifecycle monitor included):",
    ...(ws === undefined
      ? []
      : [
          "over HTTP (RPC_URL an http:// URL), and over a WebSocket (RPC_URL a ws:// URL: heads pushed by eth_subscribe newHeads; the notifications are not calls and are not counted).",
        ]),
    "",
    `| |${windows.map((w, i) => ` ${over(w, i)} |`).join("")}`,
    `|---|${windows.map(() => "---:").join("|")}|`,
    row(["**Calls per trade**", ...windows.map((w) => `**${perTrade(w).toFixed(2)}**`)]),
    row(["Target", ...targets]),
    ...methods.map((method) => row([method, ...windows.map((w) => cell(w, method))])),
    "",
  ].join("\n");
}
