/**
 * A request body Connect cannot decode (binary protobuf that does not parse, or a compressed
 * message without a `grpc-encoding` to say how) is the client's error, but connect-es answers
 * it `internal`, which tells a client to blame the server and retry. For the service's own
 * RPCs this wraps each handler and answers those cases `invalid_argument` instead, in each
 * protocol's own form: gRPC's `grpc-status`, gRPC-Web's trailer frame, Connect's error body.
 * Every other answer passes through untouched.
 */
import { Code } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";

/** The messages connect-es gives the decoding failures it reports as `internal`. */
const CLIENT_FAULT = /^(?:parse binary: |received compressed envelope, but do not know how to decompress)/;
const INTERNAL = String(Code.Internal);
const INVALID_ARGUMENT = String(Code.InvalidArgument);

/** Wraps every handler of `handlers` in place. */
export function answerUndecodableRequestsAsInvalid(handlers: UniversalHandler[]): void {
  handlers.forEach((handler, i) => {
    handlers[i] = Object.assign(
      (request: Parameters<UniversalHandler>[0]) => handler(request).then(reclassify),
      handler,
    );
  });
}

function clientFault(message: string | null | undefined): boolean {
  if (!message) return false;
  try {
    return CLIENT_FAULT.test(decodeURIComponent(message));
  } catch {
    return false;
  }
}

function reclassify(response: UniversalServerResponse): UniversalServerResponse | Promise<UniversalServerResponse> {
  // gRPC: in the headers of a trailers-only answer, or in the trailers.
  for (const headers of [response.header, response.trailer]) {
    if (headers?.get("grpc-status") === INTERNAL && clientFault(headers.get("grpc-message")))
      headers.set("grpc-status", INVALID_ARGUMENT);
  }
  // Connect: an error body (JSON, a few hundred bytes) with HTTP 500.
  if (
    response.status === 500 &&
    response.body !== undefined &&
    /^application\/json/.test(response.header?.get("content-type") ?? "")
  ) {
    return reclassifyConnect(response, response.body);
  }
  // gRPC-Web: the status travels in a trailer frame (flag 0x80) at the end of the body.
  const body = response.body;
  if (
    body !== undefined &&
    !(body instanceof Uint8Array) &&
    /^application\/grpc-web/.test(response.header?.get("content-type") ?? "")
  ) {
    return { ...response, body: rewriteTrailerFrames(body) };
  }
  return response;
}

async function reclassifyConnect(
  response: UniversalServerResponse,
  raw: Uint8Array | AsyncIterable<Uint8Array>,
): Promise<UniversalServerResponse> {
  const bytes = raw instanceof Uint8Array ? Buffer.from(raw) : Buffer.concat(await collect(raw));
  try {
    const error = JSON.parse(bytes.toString("utf8")) as { code?: string; message?: string };
    if (error.code === "internal" && typeof error.message === "string" && CLIENT_FAULT.test(error.message)) {
      const body = Buffer.from(JSON.stringify({ ...error, code: "invalid_argument" }));
      response.header?.set("content-length", String(body.length));
      return { ...response, status: 400, body: once(body) };
    }
  } catch {
    // not a JSON error body: passed on as it was
  }
  return { ...response, body: once(bytes) };
}

async function* rewriteTrailerFrames(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    if (chunk.length < 5 || chunk[0] !== 0x80) {
      yield chunk;
      continue;
    }
    const text = Buffer.from(chunk.subarray(5)).toString("latin1");
    const message = /^grpc-message: ?(.*)$/im.exec(text)?.[1]?.trim();
    if (!/^grpc-status: ?13\r?$/im.test(text) || !clientFault(message)) {
      yield chunk;
      continue;
    }
    const trailers = Buffer.from(
      text.replace(/^grpc-status: ?13(\r?)$/im, `grpc-status: ${INVALID_ARGUMENT}$1`),
      "latin1",
    );
    const frame = Buffer.alloc(5 + trailers.length);
    frame[0] = 0x80;
    frame.writeUInt32BE(trailers.length, 1);
    trailers.copy(frame, 5);
    yield frame;
  }
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(Buffer.from(chunk));
  return chunks;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
