/**
 * HTTP/2's guards on each stream: a request starts on the turn after its HEADERS (a stream the
 * client reset at once, the rapid-reset flood, never runs); a body that has not arrived in time
 * resets its stream; and an answer sent in full while the body still comes asks the client to
 * stop sending it.
 */
import * as http2 from "node:http2";

import type { NodeHandlerFn, NodeServerRequest, NodeServerResponse } from "../request/index.js";

export interface Http2Streams {
  /** Starts `handler` on an HTTP/2 request, on the next turn, watching its body's deadline. */
  start(req: http2.Http2ServerRequest, res: NodeServerResponse): void;
  /** Stops the deadline sweep (at the end of the shutdown). */
  stop(): void;
}

export function http2Streams(bodyMs: number, handler: NodeHandlerFn): Http2Streams {
  /**
   * HTTP/2 streams whose request body is still coming, with the time it must have arrived by:
   * swept a few times per bodyMs by one timer for all, so a frame costs no timer refresh.
   */
  const bodyDeadlines = new Map<http2.ServerHttp2Stream, number>();
  function onBodyEnd(this: http2.Http2ServerRequest) {
    bodyDeadlines.delete(this.stream);
  }
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [stream, deadline] of bodyDeadlines) {
        if (stream.destroyed || stream.closed) bodyDeadlines.delete(stream);
        else if (now >= deadline) {
          bodyDeadlines.delete(stream);
          stream.close(http2.constants.NGHTTP2_CANCEL);
        }
      }
    },
    Math.max(10, Math.min(1_000, bodyMs / 4)),
  ).unref();
  /** An HTTP/2 request whose handler was put off a turn: run unless the client reset the stream meanwhile. */
  const runDeferred = (req: NodeServerRequest, res: NodeServerResponse) => {
    const stream = (req as http2.Http2ServerRequest).stream;
    if (stream.destroyed || stream.closed || res.writableEnded) return;
    handler(req, res);
  };
  return {
    start(req, res) {
      // HTTP/2: a stream the client reset at once (HEADERS then RST_STREAM, the rapid-reset
      // flood) is seen before the reset is: the handler starts on the next turn, if the stream
      // still stands. And a body that does not arrive in time resets its stream.
      // A request whose HEADERS ended the stream has no body to wait for.
      const { stream } = req;
      if (!req.complete && !stream.endAfterHeaders) {
        bodyDeadlines.set(stream, Date.now() + bodyMs);
        req.on("end", onBodyEnd);
        stream.once("wantTrailers", onAnswerEnding);
      }
      setImmediate(runDeferred, req, res);
    },
    stop: () => clearInterval(sweep),
  };
}

/**
 * An HTTP/2 answer at its end (`this` is its stream). Every Http2ServerResponse ends with
 * trailers (or an empty end) on "wantTrailers", which Node sends from a setImmediate: resetting
 * the stream before would lose them (gRPC's grpc-status). Checked on the turn after.
 */
function onAnswerEnding(this: http2.ServerHttp2Stream) {
  if (!this.readableEnded) setImmediate(stopRequestBody, this);
}

/**
 * An answer sent in full while the client still sends the request's body: RST_STREAM NO_ERROR
 * asks it to stop (RFC 9113, section 8.1), rather than let it send a body nobody reads. Node does
 * this itself only for a stream whose body was never read.
 */
function stopRequestBody(stream: http2.ServerHttp2Stream): void {
  if (!stream.closed && !stream.destroyed && stream.state.remoteClose === 0) {
    stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }
}
