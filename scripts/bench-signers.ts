/**
 * `npm run bench -- --only signers` (and the full run): what it costs to keep the wallet's key out
 * of the service's memory. Three services as `npm start` runs them (logs on, each with its own
 * embedded chain), the same in all but the signer: the in-process key, SoftHSM through PKCS#11
 * (a token made as `npm run signer -- pkcs11 init` makes one), and AWS KMS through the real SDK
 * against the local KMS-protocol server (scripts/kms-local-server.ts, in this process).
 *
 * In alternating rounds (key, SoftHSM, KMS, then the next order), so a neighbour's load drifting
 * during the run hits all three:
 * - sequential sells, one at a time: the p50 latency; the signer's difference to the key's is
 *   what it adds to each trade;
 * - concurrent sells: sells per second and the p99 latency, and the service's CPU time per sell
 *   (/proc, user + system, with the PKCS#11 token's own process, a child of the service: the KMS
 *   server's signing runs in this process, not the service's);
 * - last, each chain mining a block every 1000 ms (as CHAIN_BLOCK_TIME_MS=1000 does): a burst of
 *   100 concurrent buys sent just after a block, and the blocks its receipts span, once per round.
 *   The goal: no more with SoftHSM than with the key.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

import { kmsEnv, startKmsServer, type KmsServer } from "./kms-local-server.js";
import { initDevToken, newKey } from "./signer-pkcs11.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const API_KEY = "bench-signers-key-0123456789abcdef";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

interface Service {
  name: string;
  child: ChildProcess;
  apiUrl: string;
  rpcUrl: string;
  wallet: string;
  dai: string;
  out: () => string;
}

export interface SignerSizes {
  rounds: number;
  sequential: number;
  concurrent: number;
  concurrency: number;
  burst: number;
}

interface Tally {
  sequentialMs: number[];
  concurrentMs: number[];
  seconds: number;
  sells: number;
  cpuMicros: number;
  bursts: number[];
  /** Each burst's time from its first request to its last answer, in ms. */
  burstMs: number[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** utime + stime of a process, in µs (fields 14 and 15 of /proc/<pid>/stat, clock ticks of 10 ms). */
function processMicros(pid: number | string): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/**
 * The service's CPU time in µs: its own process and the PKCS#11 token's (pkcs11-host, a child of
 * the service that makes the PKCS#11 calls), not the embedded chain's process.
 */
function cpuMicros(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const children = readdirSync(`/proc/${pid}/task`).flatMap((task) =>
    readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(" ").filter(Boolean),
  );
  const signers = children.filter((child) => readFileSync(`/proc/${child}/cmdline`, "utf8").includes("pkcs11-host"));
  return processMicros(pid) + signers.reduce((sum, child) => sum + processMicros(child), 0);
}

async function rpc<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = (await response.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function start(name: string, env: Record<string, string>, dir: string): Promise<Service> {
  const metricsPort = String(await freePort()); // metrics on, as npm start has them
  const log = openSync(join(dir, `${name.replace(/\W+/g, "-")}.log`), "w");
  const child = spawn(
    process.execPath,
    ["--max-semi-space-size=16", "--heap-growing-percent=30", "--import", "tsx", "scripts/start.ts"],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        PORT: "0",
        CHAIN_PORT: "0",
        METRICS_PORT: metricsPort,
        API_KEYS: API_KEY,
        ...env,
      },
      stdio: ["ignore", log, "pipe"],
    },
  );
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const until = Date.now() + 120_000;
  while (!err.includes("is ready") && child.exitCode === null && Date.now() < until) await sleep(50);
  const field = (label: string) => new RegExp(`${label}: +(\\S+)`).exec(err)?.[1];
  const [apiUrl, rpcUrl, wallet, dai] = [field("API"), field("Chain"), field("Wallet"), field("DAI")];
  if (!apiUrl || !rpcUrl || !wallet || !dai) {
    child.kill("SIGKILL");
    throw new Error(`the ${name} service did not start:\n${err}`);
  }
  return { name, child, apiUrl, rpcUrl, wallet, dai, out: () => err };
}

async function trade(service: Service, route: "sell" | "buy"): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${service.apiUrl}/api/v1/token/${route}`, {
    method: "POST",
    headers: { api_key: API_KEY, "content-type": "application/json" },
    body: JSON.stringify({ userAddress: service.wallet, destinatary: CUSTOMER, amount: "1", usdAddress: service.dai }),
  });
  const body = (await response.json()) as { status?: boolean; blockNumber?: number; message?: string };
  if (response.status !== 200 || body.status !== true)
    throw new Error(`${service.name}: ${route} answered ${response.status} ${JSON.stringify(body)}`);
  return route === "buy" ? Number(body.blockNumber) : performance.now() - started;
}

async function pool<T>(count: number, concurrency: number, task: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        next += 1;
        results.push(await task());
      }
    }),
  );
  return results;
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
};

async function round(service: Service, size: SignerSizes, tally: Tally): Promise<void> {
  for (let i = 0; i < size.sequential; i++) tally.sequentialMs.push(await trade(service, "sell"));
  const cpu = cpuMicros(service.child.pid);
  const started = performance.now();
  tally.concurrentMs.push(...(await pool(size.concurrent, size.concurrency, () => trade(service, "sell"))));
  tally.seconds += (performance.now() - started) / 1000;
  tally.cpuMicros += cpuMicros(service.child.pid) - cpu;
  tally.sells += size.concurrent;
}

/**
 * A burst of buys once the chain mines every 1000 ms: the blocks its receipts span. Sent just after
 * a block was mined, so every signer's burst starts at the same point of the block's second.
 */
async function burst(service: Service, count: number): Promise<number> {
  const head = Number(await rpc<string>(service.rpcUrl, "eth_blockNumber"));
  while (Number(await rpc<string>(service.rpcUrl, "eth_blockNumber")) === head) await sleep(10);
  const blocks = await Promise.all(Array.from({ length: count }, () => trade(service, "buy")));
  return Math.max(...blocks) - Math.min(...blocks) + 1;
}

/** Starts the three services, measures them in alternating rounds, and answers the markdown table. */
export async function measureSigners(size: SignerSizes, progress: (line: string) => void): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "bench-signers-"));
  const loadBefore = loadavg()[0]!;
  let kms: KmsServer | undefined;
  const services: Service[] = [];
  try {
    kms = await startKmsServer();
    const token = await initDevToken(join(dir, "softhsm"), "bench");
    const hsmKey = await newKey(token, "exchange");
    const kmsKey = kms.createKey("exchange");
    progress("bench signers: starting three services (key, SoftHSM, KMS), each with its embedded chain…");
    services.push(await start("in-process key", {}, dir));
    services.push(
      await start(
        "SoftHSM (PKCS#11)",
        {
          SOFTHSM2_CONF: token.conf,
          SIGNER: "pkcs11",
          PKCS11_MODULE: token.module,
          PKCS11_TOKEN_LABEL: token.label,
          PKCS11_PIN_FILE: token.pinFile,
          PKCS11_KEY_LABELS: "exchange",
          EXCHANGE_ADDRESSES: hsmKey.address,
        },
        dir,
      ),
    );
    services.push(
      await start(
        "local KMS server",
        { ...kmsEnv(kms), SIGNER: "aws-kms", KMS_KEY_IDS: "alias/exchange", EXCHANGE_ADDRESSES: kmsKey.address },
        dir,
      ),
    );
    const tallies = services.map(
      (): Tally => ({
        sequentialMs: [],
        concurrentMs: [],
        seconds: 0,
        sells: 0,
        cpuMicros: 0,
        bursts: [],
        burstMs: [],
      }),
    );
    for (const service of services) await pool(10, 5, () => trade(service, "sell")); // warm-up, not measured
    for (let r = 0; r < size.rounds; r++) {
      for (let k = 0; k < services.length; k++) {
        const i = (r + k) % services.length;
        progress(`  round ${r + 1}/${size.rounds}: ${services[i]!.name}`);
        await round(services[i]!, size, tallies[i]!);
      }
    }
    for (const service of services) {
      await rpc(service.rpcUrl, "evm_setAutomine", [false]);
      await rpc(service.rpcUrl, "evm_setIntervalMining", [1000]);
    }
    for (let r = 0; r < size.rounds; r++)
      for (const [i, service] of services.entries()) {
        progress(`  burst ${r + 1}/${size.rounds} of ${size.burst} buys at 1 s blocks: ${service.name}`);
        const started = performance.now();
        tallies[i]!.bursts.push(await burst(service, size.burst));
        tallies[i]!.burstMs.push(performance.now() - started);
      }
    return table(services, tallies, size, loadBefore, loadavg()[0]!);
  } finally {
    for (const service of services) service.child.kill("SIGTERM");
    await Promise.all(
      services.map(
        (s) => new Promise((resolve) => (s.child.exitCode !== null ? resolve(0) : s.child.once("exit", resolve))),
      ),
    );
    await kms?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function table(
  services: Service[],
  tallies: Tally[],
  size: SignerSizes,
  loadBefore: number,
  loadAfter: number,
): string {
  const key = tallies[0]!;
  const keyRate = key.sells / key.seconds;
  const keySeq = percentile(key.sequentialMs, 50);
  const rows = services.map((service, i) => {
    const t = tallies[i]!;
    const rate = t.sells / t.seconds;
    const seq = percentile(t.sequentialMs, 50);
    return (
      `| ${service.name} | ${rate.toFixed(1)} | ${(rate / keyRate).toFixed(2)} | ${percentile(t.concurrentMs, 99).toFixed(0)} | ` +
      `${seq.toFixed(1)} | ${i === 0 ? "—" : `${(seq - keySeq).toFixed(1)}`} | ${(t.cpuMicros / t.sells / 1000).toFixed(2)} | ` +
      `${t.bursts.join(", ")} | ${percentile(t.burstMs, 50).toFixed(0)} |`
    );
  });
  const hsmBlocks = Math.max(...tallies[1]!.bursts);
  const keyBlocks = Math.max(...key.bursts);
  return [
    "",
    `### Signers (${size.rounds} alternating rounds; load average ${loadBefore.toFixed(2)} → ${loadAfter.toFixed(2)})`,
    "",
    `Sells through JSON HTTP on each service's embedded chain (automine): ${size.sequential} one at a time per round (p50), ` +
      `${size.concurrent} at ${size.concurrency} concurrent per round (sells/s, p99). Bursts: ${size.burst} concurrent buys once the chain mines every 1000 ms, each sent just after a block.`,
    "",
    "| Signer | Sells/s | Ratio to the key | p99 ms | p50 one at a time, ms | Added per trade, ms | Service CPU ms/sell (with the token's process) | Blocks per burst | Burst, ms (median) |",
    "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ...rows,
    "",
    `Goal, a burst in no more blocks with SoftHSM than with the key: ${hsmBlocks <= keyBlocks ? "✅ met" : "❌ missed"} (${hsmBlocks} against ${keyBlocks}, the most of each).`,
    "",
  ].join("\n");
}
