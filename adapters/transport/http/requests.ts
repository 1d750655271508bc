/**
 * Every request's way in, before the handler: counted in flight; refused unstarted (503) when the
 * server is closing (HTTP/1.1), when its connection pipelines too deep, or when the server holds
 * too many; an HTTP/2 request started a turn later (http2.ts). And every response's end, one
 * listener for all, which lets go of what the request held and tells the handler.
 */
import type * as http2 from "node:http2";
import type * as net from "node:net";

import type { NodeHandlerFn, NodeServerRequest, NodeServerResponse } from "../request/index.js";
import type { Connections } from "./connections.js";
import { refuseUnstarted, stopParsing } from "./http1.js";
import { http2Streams } from "./http2.js";

/**
 * A request handler, and what it wants told when a response it was given has closed (answered,
 * or its connection gone): one listener per response, the server's, serves both.
 */
export type ServedHandler = NodeHandlerFn & { answered?: (res: NodeServerResponse) => void };

export interface RequestGate {
  /** The servers' request listener. */
  onRequest(req: NodeServerRequest, res: NodeServerResponse): void;
  /** Requests being answered right now. */
  inFlight(): number;
  /** Stops the timers it keeps (at the end of the shutdown). */
  stop(): void;
}

/** Where a response keeps its HTTP/1.1 socket for onResponseClose. */
const kSocket = Symbol("http1 socket");
type WithSocket = NodeServerResponse & { [kSocket]?: net.Socket };

export function requestGate(handler: ServedHandler, connections: Connections): RequestGate {
  const { limits, http1Active } = connections;
  let inFlight = 0;
  /** HTTP/1.1 connections read no further for pipelining too deep: closed once answered. */
  const overPipelined = new WeakSet<net.Socket>();
  const streams = http2Streams(limits.bodyMs, handler);
  const { answered } = handler;
  /**
   * A response's end, one listener for every response (`this` is the response): what it held is
   * let go, and the handler is told.
   */
  function onResponseClose(this: WithSocket) {
    inFlight--;
    const http1Socket = this[kSocket];
    if (http1Socket !== undefined) {
      const left = (http1Active.get(http1Socket) ?? 1) - 1;
      http1Active.set(http1Socket, left);
      // A response that started before the shutdown had no "Connection: close".
      if ((connections.closing || overPipelined.has(http1Socket)) && left === 0) connections.endSoon(http1Socket);
    }
    answered?.(this);
  }

  const onRequest = (req: NodeServerRequest, res: NodeServerResponse) => {
    inFlight++;
    const http1Socket = req.httpVersionMajor === 1 ? req.socket : undefined;
    const pipelined = http1Socket === undefined ? 0 : (http1Active.get(http1Socket) ?? 0) + 1;
    if (http1Socket !== undefined) {
      http1Active.set(http1Socket, pipelined);
      (res as WithSocket)[kSocket] = http1Socket;
    }
    res.on("close", onResponseClose);
    if (connections.closing && http1Socket !== undefined) {
      // A request that reaches a closing keep-alive connection (pipelined, or sent as the
      // server decided to close) is not started: its connection may end before an answer could
      // be written, and a trade executed but never answered might be paid twice by a retry.
      // Refused before anything runs, it is safe to send again. (HTTP/2 refuses new streams
      // itself once the GOAWAY is out.)
      refuseUnstarted(res, "the service is shutting down: the request was not started; send it again", true);
      return;
    }
    if (http1Socket !== undefined && pipelined > limits.pipelinedPerConnection) {
      refusePipelined(http1Socket, res, limits.pipelinedPerConnection, overPipelined);
      return;
    }
    if (inFlight > limits.requestsInFlight) {
      refuseUnstarted(
        res,
        "the service is overloaded: the request was not started; retry shortly",
        http1Socket !== undefined,
      );
      return;
    }
    if (http1Socket === undefined) streams.start(req as http2.Http2ServerRequest, res);
    else handler(req, res);
  };
  return { onRequest, inFlight: () => inFlight, stop: streams.stop };
}

/**
 * A client that pipelines deeper than `limit` is not reading its answers: it is read no further,
 * and what it sent beyond the limit is refused unstarted; the connection then closes.
 */
function refusePipelined(
  socket: net.Socket,
  res: NodeServerResponse,
  limit: number,
  overPipelined: WeakSet<net.Socket>,
): void {
  socket.pause();
  if (!overPipelined.has(socket)) {
    stopParsing(socket);
  }
  overPipelined.add(socket);
  refuseUnstarted(res, `more than ${limit} requests in flight on one connection: this one was not started`, true);
}
