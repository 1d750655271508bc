/**
 * A webhook receiver as a client would run one: a node:http server that verifies every
 * delivery with the `standardwebhooks` package and keeps what it accepted.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

import { Webhook } from "standardwebhooks";

export interface ReceivedEvent {
  id: string;
  type: string;
  timestamp: string;
  data: { id: string; status: string; transactionHash: string | null; [key: string]: unknown };
  /** When it arrived (ms since the epoch). */
  at: number;
}

/** How the receiver answers: 204, an error status, a redirect, or never. */
export type ReceiverMode = "up" | "down" | "redirect" | "hang";

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

export interface WebhookReceiver {
  url: string;
  secret: string;
  mode: ReceiverMode;
  /** Every delivery that verified, in arrival order (duplicates included). */
  received: ReceivedEvent[];
  /** Deliveries whose signature did not verify. */
  rejected: number;
  /** Every request, whatever the mode. */
  requests: number;
  /** The raw request of each delivery: body and headers, for checks with another secret. */
  raw: Array<{ body: string; headers: Record<string, string> }>;
  /** How long each verified delivery is held before the 204, so that deliveries overlap if they can. */
  holdMs: number;
  /** The webhook-id of each request that arrived while another request with that id was still unanswered. */
  overlaps: string[];
  /** Resolves once `predicate` holds, polling; rejects after `timeoutMs`. */
  until(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  /** How many deliveries have arrived and are not answered yet. */
  unanswered(): number;
  close(): Promise<void>;
}

export async function startWebhookReceiver(secret = newWebhookSecret()): Promise<WebhookReceiver> {
  const verifier = new Webhook(secret);
  const hanging: http.ServerResponse[] = [];
  const receiver: WebhookReceiver = {
    url: "",
    secret,
    mode: "up",
    received: [],
    rejected: 0,
    requests: 0,
    raw: [],
    holdMs: 0,
    overlaps: [],
    async until(predicate, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error(`the receiver waited ${timeoutMs} ms in vain`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    unanswered: () => [...inFlight.values()].reduce((a, b) => a + b, 0),
    async close() {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  // Requests of each webhook-id unanswered yet: from arrival to the end of the answer.
  const inFlight = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const id = req.headers["webhook-id"];
    if (typeof id === "string") {
      if ((inFlight.get(id) ?? 0) > 0) receiver.overlaps.push(id);
      inFlight.set(id, (inFlight.get(id) ?? 0) + 1);
      res.once("close", () => inFlight.set(id, inFlight.get(id)! - 1));
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      receiver.requests += 1;
      if (receiver.mode === "hang") {
        hanging.push(res);
        return;
      }
      if (receiver.mode === "down") {
        res.writeHead(503).end();
        return;
      }
      if (receiver.mode === "redirect") {
        res.writeHead(302, { location: `${receiver.url}/elsewhere` }).end();
        return;
      }
      const body = Buffer.concat(chunks).toString("utf8");
      const headers = {
        "webhook-id": String(req.headers["webhook-id"]),
        "webhook-timestamp": String(req.headers["webhook-timestamp"]),
        "webhook-signature": String(req.headers["webhook-signature"]),
      };
      receiver.raw.push({ body, headers });
      try {
        const payload = verifier.verify(body, headers) as Omit<ReceivedEvent, "id" | "at">;
        receiver.received.push({ ...payload, id: headers["webhook-id"], at: Date.now() });
        if (receiver.holdMs > 0) setTimeout(() => res.writeHead(204).end(), receiver.holdMs);
        else res.writeHead(204).end();
      } catch {
        receiver.rejected += 1;
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}
