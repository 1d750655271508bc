/**
 * The server side of a WebSocket (RFC 6455), just enough for the tests' scripted JSON-RPC nodes
 * and proxies (test/helpers/ws-proxy.ts): Node has a WebSocket client but no server, and the
 * project takes no dependency for one. Text and binary messages (fragmented or not), ping, and
 * close; no extensions (permessage-deflate is declined by not echoing it).
 */
import { createHash } from "node:crypto";
import type * as http from "node:http";
import type { Duplex } from "node:stream";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** One client connection. */
export interface WsPeer {
  /** Sends one text message. */
  send(text: string): void;
  /** Closes with a close frame, as a node shutting down cleanly does. */
  close(): void;
  /** Cuts the TCP connection without a close frame, as a crashed node or a dropped link does. */
  destroy(): void;
  readonly closed: boolean;
  /** Each text message received. */
  onMessage: (text: string) => void;
  /** Once, when the connection is gone (either side). */
  onClose: () => void;
}

export interface AcceptOptions {
  /** Answers the upgrade with HTTP 503 instead while this says so (a node refusing connections). */
  refuse?: () => boolean;
}

/** Serves WebSocket upgrades on `server`: `onPeer` gets each connection once it is open. */
export function acceptWebSockets(
  server: http.Server,
  onPeer: (peer: WsPeer, request: http.IncomingMessage) => void,
  options: AcceptOptions = {},
): void {
  server.on("upgrade", (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const key = request.headers["sec-websocket-key"];
    if (options.refuse?.() === true || typeof key !== "string") {
      socket.end("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    const accept = createHash("sha1").update(`${key}${GUID}`).digest("base64");
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    // Bytes that came with the upgrade are the first frames' (read once the peer listens, on a later tick).
    if (head.length > 0) socket.unshift(head);
    onPeer(wrap(socket), request);
  });
}

/** A frame from the server: never masked. */
function frame(opcode: number, payload: Buffer): Buffer {
  const length = payload.length;
  let header: Buffer;
  if (length < 126) header = Buffer.from([0x80 | opcode, length]);
  else if (length < 65_536) {
    header = Buffer.alloc(4);
    header.writeUInt8(0x80 | opcode, 0);
    header.writeUInt8(126, 1);
    header.writeUInt16BE(length, 2);
  } else {
    header = Buffer.alloc(10);
    header.writeUInt8(0x80 | opcode, 0);
    header.writeUInt8(127, 1);
    header.writeBigUInt64BE(BigInt(length), 2);
  }
  return Buffer.concat([header, payload]);
}

function wrap(socket: Duplex): WsPeer {
  let buffered = Buffer.alloc(0);
  let fragments: Buffer[] = [];
  let closed = false;
  const peer: WsPeer = {
    send(text) {
      if (!closed) socket.write(frame(0x1, Buffer.from(text, "utf8")));
    },
    close() {
      if (closed) return;
      socket.end(frame(0x8, Buffer.from([0x03, 0xe8]))); // 1000: normal closure
      gone();
    },
    destroy() {
      socket.destroy();
      gone();
    },
    get closed() {
      return closed;
    },
    onMessage: () => {},
    onClose: () => {},
  };
  const gone = () => {
    if (closed) return;
    closed = true;
    peer.onClose();
  };
  socket.on("close", gone);
  socket.on("error", () => socket.destroy());
  socket.on("data", (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      if (buffered.length < 2) return;
      const fin = (buffered[0]! & 0x80) !== 0;
      const opcode = buffered[0]! & 0x0f;
      const masked = (buffered[1]! & 0x80) !== 0;
      let length = buffered[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffered.length < 4) return;
        length = buffered.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buffered.length < 10) return;
        length = Number(buffered.readBigUInt64BE(2));
        offset = 10;
      }
      const maskAt = offset;
      if (masked) offset += 4;
      if (buffered.length < offset + length) return;
      const payload = Buffer.from(buffered.subarray(offset, offset + length));
      if (masked) for (let i = 0; i < payload.length; i++) payload[i]! ^= buffered[maskAt + (i % 4)]!;
      buffered = buffered.subarray(offset + length);
      if (opcode === 0x8) {
        if (!closed) socket.end(frame(0x8, payload.subarray(0, 2)));
        gone();
        return;
      }
      if (opcode === 0x9) {
        if (!closed) socket.write(frame(0xa, payload));
        continue;
      }
      if (opcode === 0xa) continue;
      fragments.push(payload);
      if (!fin) continue;
      const message = Buffer.concat(fragments).toString("utf8");
      fragments = [];
      if (!closed) peer.onMessage(message);
    }
  });
  return peer;
}
