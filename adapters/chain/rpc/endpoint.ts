/**
 * One JSON-RPC endpoint of the provider (rpc-provider.ts): its keep-alive agent (HTTP) or its
 * connection (WebSocket), its health as `/readyz` and the logs show it, and what counts as a
 * failure of the endpoint rather than an answer of the node. URLs are shown redacted: providers
 * put API keys in them.
 */
import * as http from "node:http";
import * as https from "node:https";

import { WsTransport } from "./ws-transport.js";

/** An endpoint as `/readyz` and the logs show it: its redacted URL, and why it is down. */
export interface EndpointStatus {
  /** The URL without user info, path or query (where providers put API keys). */
  url: string;
  up: boolean;
  /** Why it went down: the transport failure's message. */
  reason?: string;
}

/** Longest rest of a failing endpoint between two health probes. */
export const MAX_REST_MS = 60_000;

/** One JSON-RPC endpoint: its own keep-alive agent (HTTP) or connection (WebSocket), and its health. */
export class Endpoint {
  readonly agent: http.Agent | undefined;
  readonly ws: WsTransport | undefined;
  readonly label: string;
  up = true;
  reason: string | undefined;
  /** The current rest, doubled by each failed probe. */
  restMs = 0;
  probeTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly url: URL,
    maxSockets: number,
    ws: { maxAnswerBytes: number; restMs: number },
  ) {
    const agentOptions = { keepAlive: true, maxSockets };
    if (url.protocol === "ws:" || url.protocol === "wss:") {
      this.ws = new WsTransport(url, {
        maxAnswerBytes: ws.maxAnswerBytes,
        reconnectMs: ws.restMs,
        maxReconnectMs: MAX_REST_MS,
      });
    } else this.agent = url.protocol === "https:" ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
    this.label = redactUrl(url.href);
  }

  status(): EndpointStatus {
    return { url: this.label, up: this.up, ...(this.reason === undefined ? {} : { reason: this.reason }) };
  }
}

/** A failure of the transport to one endpoint (not a JSON-RPC error): the next endpoint may do better. */
export class EndpointFailure extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
  }
}

/** An RPC URL for logs and errors: user info, path and query removed (providers put API keys there). */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    const path = parsed.pathname.length > 1 ? "/…" : "";
    return `${parsed.protocol}//${parsed.host}${path}`;
  } catch {
    return "(unparsable url)";
  }
}

/** A transport failure in a few words, for /readyz and the logs (never a URL). */
export function describe(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code !== undefined && /^E[A-Z]+$/.test(code) ? code : error.message.slice(0, 120);
}
