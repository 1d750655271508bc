/**
 * An early answer's tail: an answer sent before the request's body was read (a refused key, a
 * throttled address, an oversize body, an RPC error) leaves an HTTP/1.1 body still coming. The
 * pipeline's refusals (http/), Connect's early answers (rpc/) and the JSON routes (json/) all end
 * such a request the same way, here.
 */
import type { NodeServerRequest } from "./node-types.js";

/**
 * Most bytes of an unwanted body read and thrown away after an early answer: the largest body
 * limit BODY_LIMIT_BYTES accepts, so that any body under the limit is read to its end.
 */
export const DISCARD_LIMIT_BYTES = 1024 * 1024;

/**
 * Longest time an unwanted body is read and thrown away after an early answer. A body under the
 * limit takes far less from a client that is sending it; nginx lingers up to 30 s (lingering_time),
 * but waits 5 s at most for each read (lingering_timeout).
 */
export const LINGER_MS = 3_000;

/**
 * After an early answer (sent before the body was read: a refused key, a throttled address, an
 * oversize body), reads and drops the rest of an HTTP/1.1 body, as nginx does before it reuses or
 * closes a connection. Closing the connection at once, with the body still coming, breaks the
 * client: the kernel answers its bytes with a reset, so a client still writing its body fails
 * the write (connect-node: `internal: write EPIPE`) instead of reading the answer, and the reset
 * can destroy the answer before the client has read it.
 *
 * A body that ends within DISCARD_LIMIT_BYTES and LINGER_MS leaves the connection open for the
 * next request, as any answered request does, or closes it once read when the client asked for
 * that (`Connection: close`: Node's HTTP server would destroy the socket as soon as the answer is
 * written, so its `destroySoon` is put off until then, a lingering close). The socket is not even
 * half-closed before: Node's own HTTP client destroys its socket at the server's FIN, and would
 * then fail writing the rest of its body. Past either bound, the connection is closed.
 */
export function discardRest(req: NodeServerRequest): void {
  if (req.httpVersionMajor !== 1 || req.complete || req.destroyed || !hasBody(req)) return;
  const { socket } = req;
  // Node's HTTP server calls socket.destroySoon() once the answer to a request that closes its
  // connection is written: put off until the body is read.
  const lingering = socket as typeof socket & { destroySoon(): void };
  let closeAsked = false;
  lingering.destroySoon = () => {
    closeAsked = true;
  };
  let dropped = 0;
  const stop = () => {
    clearTimeout(timer);
    req.off("data", onData);
    req.off("end", stop);
    req.off("close", stop);
    // The socket's own destroySoon again (net.Socket's), now if the server asked for it.
    delete (lingering as { destroySoon?: () => void }).destroySoon;
    if (closeAsked) lingering.destroySoon();
  };
  const close = () => {
    stop();
    socket.destroy();
  };
  const onData = (chunk: Buffer | string) => {
    dropped += chunk.length;
    if (dropped > DISCARD_LIMIT_BYTES) close();
  };
  const timer = setTimeout(close, LINGER_MS);
  timer.unref();
  req.on("data", onData);
  req.once("end", stop);
  req.once("close", stop);
  req.on("error", () => {});
  req.resume();
}

/**
 * Whether an HTTP/1.1 request has a body (RFC 9112, section 6.3): a Transfer-Encoding, or a
 * Content-Length other than 0. An answer sent while the parser is still on the headers (a cached
 * price answered at once) sees `req.complete` false even when nothing follows them.
 */
function hasBody(req: NodeServerRequest): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}
