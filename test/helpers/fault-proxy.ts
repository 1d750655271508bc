/**
 * A JSON-RPC proxy that misbehaves on purpose, for the chaos suite (test/chaos/): it stands in
 * front of a node (anvil) as the first of the service's endpoints and, per request, injects one
 * fault picked by a seeded PRNG from a weighted mix, or a fixed one:
 * - `drop`: forwards, waits for the node's answer (and `holdMs`), then closes the connection
 *   without answering: a gateway timing out after the node accepted;
 * - `502`: forwards, then answers HTTP 502 with a body that is not JSON;
 * - `late`: forwards, then answers only after `lateMs` (longer than the service's RPC_TIMEOUT_MS);
 * - `lag`: forwards, but answers eth_blockNumber, eth_getBlockByNumber("latest"/"pending") and
 *   eth_getTransactionCount(addr, "latest"/"pending") as the node answered them `lagMs` ago;
 * - `cut`: closes the connection before forwarding anything;
 * - `pass`: forwards.
 * Single calls and batches alike. With scope "sends" only requests carrying
 * eth_sendRawTransaction get a fault (the others pass); with "all", every request but the
 * service's health probe (a lone eth_chainId).
 */
import * as http from "node:http";

import { Transaction } from "ethers";
import { seededRandom } from "./random.js";

export const FAULTS = ["pass", "drop", "502", "late", "lag", "cut"] as const;
export type Fault = (typeof FAULTS)[number];
export type FaultMix = Partial<Record<Fault, number>>;

export interface FaultSchedule {
  /** Weights of the faults picked by the PRNG; unset faults weigh 0. */
  mix?: FaultMix;
  /** Every faultable request gets this fault (overrides `mix`). */
  fixed?: Fault;
  /** Which requests may get a fault: those carrying eth_sendRawTransaction, or all. */
  scope?: "sends" | "all";
}

export interface FaultProxyOptions extends FaultSchedule {
  upstream: string;
  seed: number;
  /** drop and 502: how long after the node's answer the fault happens. Default 0. */
  holdMs?: number;
  /** late: how long after the request the answer comes. Default 3000. */
  lateMs?: number;
  /** lag: how old the lagging view is. Default 4000. */
  lagMs?: number;
}

/** A fault injected into a request: when, what it carried, and the transactions it forwarded. */
export interface FaultEvent {
  at: number;
  fault: Fault;
  methods: string[];
  txs: Array<{ hash: string; nonce: number }>;
}

export interface FaultProxy {
  url: string;
  /** Faults injected so far, by kind (`pass`: requests forwarded untouched). */
  counts: Record<Fault, number>;
  /** Every fault other than pass, in order. */
  events: FaultEvent[];
  /** Changes the schedule; `{ fixed: "pass" }` turns faults off. */
  schedule(schedule: FaultSchedule): void;
  close(): Promise<void>;
}

/** The fault at `r` (in [0, 1)) of the mix's cumulative weights. */
function weighted(mix: FaultMix, r: number): Fault {
  const weights = FAULTS.map((fault) => Math.max(0, mix[fault] ?? 0));
  let left = r * weights.reduce((a, b) => a + b, 0);
  for (const [i, weight] of weights.entries()) {
    if (left < weight) return FAULTS[i]!;
    left -= weight;
  }
  return "pass";
}

interface Call {
  jsonrpc: "2.0";
  id: unknown;
  method: string;
  params?: unknown[];
}
type Answer = { id: unknown; result?: unknown; error?: unknown };

const LAGGING = new Set(["eth_blockNumber", "eth_getBlockByNumber", "eth_getTransactionCount"]);
/** The calls a lagging view answers from its history, by a key of the call; others are forwarded. */
function lagKey(call: Call): string | undefined {
  if (!LAGGING.has(call.method)) return undefined;
  const params = call.params ?? [];
  const tag = call.method === "eth_getBlockByNumber" ? params[0] : params[1];
  if (call.method !== "eth_blockNumber" && tag !== "latest" && tag !== "pending") return undefined;
  return JSON.stringify([call.method, params]);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const random = seededRandom(options.seed);
  const { holdMs = 0, lateMs = 3_000, lagMs = 4_000 } = options;
  let schedule: FaultSchedule = { mix: options.mix ?? { pass: 1 }, scope: options.scope ?? "all" };
  if (options.fixed !== undefined) schedule.fixed = options.fixed;
  const counts = Object.fromEntries(FAULTS.map((fault) => [fault, 0])) as Record<Fault, number>;
  const events: FaultEvent[] = [];
  /** Recent answers of the lagging calls, oldest first: [when, result]. */
  const history = new Map<string, Array<[number, unknown]>>();

  const pick = (calls: Call[]): Fault => {
    const sends = calls.some((call) => call.method === "eth_sendRawTransaction");
    if (schedule.scope === "sends" && !sends) return "pass";
    // The service's health probe passes: the endpoint comes back after each fault and is trusted
    // again, as a flaky provider that looks healthy is (else it would rest out most of a run).
    if (calls.length === 1 && calls[0]!.method === "eth_chainId") return "pass";
    const fault = schedule.fixed ?? weighted(schedule.mix ?? {}, random());
    // A lagging view of a request without calls that lag is no fault.
    return fault === "lag" && !calls.some((call) => lagKey(call) !== undefined) ? "pass" : fault;
  };

  const forward = async (body: string): Promise<string> => {
    const answer = await fetch(options.upstream, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    return answer.text();
  };

  /** Records the fresh answers of lagging calls; with `lag`, replaces them by the oldest not younger than lagMs. */
  const lagged = (calls: Call[], text: string, lag: boolean): string => {
    let parsed: Answer | Answer[];
    try {
      parsed = JSON.parse(text) as Answer | Answer[];
    } catch {
      return text;
    }
    const answers = Array.isArray(parsed) ? parsed : [parsed];
    const now = Date.now();
    for (const call of calls) {
      const key = lagKey(call);
      const answer = answers.find((a) => a.id === call.id);
      if (key === undefined || answer === undefined || answer.error !== undefined) continue;
      const seen = history.get(key) ?? [];
      history.set(key, seen);
      const old = seen.filter(([at]) => at <= now - lagMs).at(-1) ?? seen[0];
      seen.push([now, answer.result]);
      while (seen.length > 1 && seen[1]![0] <= now - 3 * lagMs) seen.shift();
      if (lag && old !== undefined) answer.result = old[1];
    }
    return JSON.stringify(parsed);
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let calls: Call[];
      try {
        const parsed = JSON.parse(body) as Call | Call[];
        calls = Array.isArray(parsed) ? parsed : [parsed];
      } catch {
        calls = [];
      }
      const fault = pick(calls);
      counts[fault] += 1;
      if (fault !== "pass") {
        const txs = calls
          .filter((call) => call.method === "eth_sendRawTransaction")
          .flatMap((call) => {
            try {
              const tx = Transaction.from(String(call.params?.[0]));
              return [{ hash: tx.hash!, nonce: tx.nonce }];
            } catch {
              return [];
            }
          });
        events.push({ at: Date.now(), fault, methods: calls.map((call) => call.method), txs });
      }
      if (fault === "cut") return void req.socket.destroy();
      const answer = (status: number, text: string) => {
        if (!res.destroyed) res.writeHead(status, { "content-type": "application/json" }).end(text);
      };
      void forward(body).then(
        async (text) => {
          const view = lagged(calls, text, fault === "lag");
          if (fault === "drop" || fault === "502") await sleep(holdMs);
          if (fault === "drop") req.socket.destroy();
          else if (fault === "502") answer(502, "<html><body>502 Bad Gateway</body></html>");
          else if (fault === "late") setTimeout(() => answer(200, view), lateMs).unref();
          else answer(200, view);
        },
        () => req.socket.destroy(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  console.log(`      fault proxy on 127.0.0.1:${port} → ${options.upstream}, seed ${options.seed}`);
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    events,
    schedule(next) {
      schedule = { scope: "all", ...next };
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
