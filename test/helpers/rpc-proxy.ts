/**
 * A JSON-RPC proxy in front of a node that a test steers call by call: `intercept` decides what
 * happens to each request (forwarded, its answer dropped after forwarding, a 502 after
 * forwarding, or held back for a while), and `rewrite` changes the results of the calls it
 * forwards: an endpoint that loses an answer, stops answering, lags, or is simply wrong.
 * (test/helpers/fault-proxy.ts injects faults by a seeded schedule instead.)
 */
import * as http from "node:http";

export interface RpcCall {
  id: unknown;
  method: string;
  params?: unknown[];
}

/** What happens to a request: forwarded and answered; forwarded, then its connection closed unanswered; forwarded, then a 502; or answered `ms` late. */
export type Verdict = "pass" | "drop" | "502" | { holdMs: number };

export interface RpcProxy {
  url: string;
  /** Decides each request's fate from its calls (default: every one passes). */
  intercept(rule: (calls: RpcCall[]) => Verdict): void;
  /** Changes each forwarded call's result (default: as the node answered). Errors are left alone. */
  rewrite(rule: (call: RpcCall, result: unknown) => unknown): void;
  close(): Promise<void>;
}

export async function startRpcProxy(upstream: string): Promise<RpcProxy> {
  let intercept: (calls: RpcCall[]) => Verdict = () => "pass";
  let rewrite: (call: RpcCall, result: unknown) => unknown = (_, result) => result;

  const rewritten = (calls: RpcCall[], text: string): string => {
    try {
      const parsed = JSON.parse(text) as { id: unknown; result?: unknown } | Array<{ id: unknown; result?: unknown }>;
      for (const answer of Array.isArray(parsed) ? parsed : [parsed]) {
        const call = calls.find((c) => c.id === answer.id);
        if (call !== undefined && "result" in answer) answer.result = rewrite(call, answer.result);
      }
      return JSON.stringify(parsed);
    } catch {
      return text;
    }
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let calls: RpcCall[] = [];
      try {
        const parsed = JSON.parse(body) as RpcCall | RpcCall[];
        calls = Array.isArray(parsed) ? parsed : [parsed];
      } catch {
        // not JSON: forwarded as it is
      }
      const verdict = intercept(calls);
      const answer = (status: number, text: string) => {
        if (!res.destroyed) res.writeHead(status, { "content-type": "application/json" }).end(text);
      };
      fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body })
        .then((response) => response.text())
        .then(
          (text) => {
            if (verdict === "drop") req.socket.destroy();
            else if (verdict === "502") answer(502, "<html><body>502 Bad Gateway</body></html>");
            else if (verdict === "pass") answer(200, rewritten(calls, text));
            else setTimeout(() => answer(200, rewritten(calls, text)), verdict.holdMs).unref();
          },
          () => req.socket.destroy(),
        );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    intercept(rule) {
      intercept = rule;
    },
    rewrite(rule) {
      rewrite = rule;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
