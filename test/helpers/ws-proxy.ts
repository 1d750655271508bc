/**
 * A JSON-RPC WebSocket proxy in front of a node's WebSocket (anvil serves one on its HTTP port):
 * each client connection gets its own connection upstream, messages pass both ways as they are.
 * It counts every JSON-RPC call a client sends, by method (a batch counts each of its calls);
 * what the node pushes (subscription notifications) is not a call and is not counted. For the
 * RPC-call benchmark (scripts/bench-rpc.ts) and the tests that drop a WebSocket on purpose:
 * `drop()` cuts every connection without a close frame, and while `refuse` is set, new
 * connections are refused (HTTP 503 to the upgrade).
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";

import { acceptWebSockets, type WsPeer } from "./ws-server.js";

export interface WsProxy {
  /** ws://127.0.0.1:<port> */
  url: string;
  /** JSON-RPC calls forwarded upstream, by method. */
  counts: Map<string, number>;
  /** Client connections accepted so far. */
  connections: number;
  /** Connections open now. */
  readonly open: number;
  /** While true, new connections are refused. */
  refuse: boolean;
  /** Cuts every open connection (both sides), without a close frame. */
  drop(): void;
  close(): Promise<void>;
}

/** @param upstream the node's ws:// URL */
export async function startWsProxy(upstream: string): Promise<WsProxy> {
  const peers = new Set<WsPeer>();
  const server = http.createServer((_req, res) => res.writeHead(426).end());
  const proxy: WsProxy = {
    url: "",
    counts: new Map(),
    connections: 0,
    get open() {
      return peers.size;
    },
    refuse: false,
    drop() {
      for (const peer of peers) peer.destroy();
    },
    async close() {
      proxy.drop();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const count = (text: string) => {
    try {
      const parsed = JSON.parse(text) as { method?: string } | Array<{ method?: string }>;
      for (const call of Array.isArray(parsed) ? parsed : [parsed]) {
        const method = call.method ?? "?";
        proxy.counts.set(method, (proxy.counts.get(method) ?? 0) + 1);
      }
    } catch {
      // not JSON: forwarded as it is, counted as nothing
    }
  };
  acceptWebSockets(
    server,
    (peer) => {
      proxy.connections += 1;
      peers.add(peer);
      const node = new WebSocket(upstream);
      const waiting: string[] = [];
      node.onopen = () => {
        for (const text of waiting.splice(0)) node.send(text);
      };
      node.onmessage = (event) => peer.send(String(event.data));
      node.onclose = () => peer.destroy();
      node.onerror = () => {};
      peer.onMessage = (text) => {
        count(text);
        if (node.readyState === WebSocket.OPEN) node.send(text);
        else waiting.push(text);
      };
      peer.onClose = () => {
        peers.delete(peer);
        node.close();
      };
    },
    { refuse: () => proxy.refuse },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
