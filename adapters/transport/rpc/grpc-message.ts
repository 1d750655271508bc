import type { NodeServerRequest, NodeServerResponse } from "../request/index.js";

/**
 * The gRPC spec's percent-encoding of `grpc-message`: UTF-8, with only bytes
 * outside 0x20–0x7E, and "%" itself, written as %XX. ("amount: is required" stays
 * readable.)
 */
export function grpcPercentEncode(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

function reencode(headers: unknown): void {
  if (typeof headers !== "object" || headers === null) return;
  const record = headers as Record<string, unknown>;
  for (const name of Object.keys(record)) {
    const value = record[name];
    if (name.toLowerCase() !== "grpc-message" || typeof value !== "string") continue;
    try {
      record[name] = grpcPercentEncode(decodeURIComponent(value));
    } catch {
      // not valid percent-encoding: leave it as it is
    }
  }
}

/**
 * connect-es writes `grpc-message` with encodeURIComponent, which also encodes ":",
 * ",", "/" and the like. That is valid, but @grpc/grpc-js decodes it with
 * decodeURI, which leaves those escapes in place, so a Node gRPC client would read
 * "amount%3A is required". For gRPC requests (not gRPC-Web, whose clients decode
 * fully), this rewrites the header and trailer with the spec's minimal encoding,
 * which every gRPC client decodes the same way.
 */
export function minimalGrpcMessageEncoding(req: NodeServerRequest, res: NodeServerResponse): void {
  const contentType = req.headers["content-type"] ?? "";
  if (!/^application\/grpc(?:[+;]|$)/i.test(contentType)) return;
  const writeHead = res.writeHead.bind(res) as (status: number, headers?: unknown) => unknown;
  const addTrailers = res.addTrailers.bind(res) as (trailers: unknown) => void;
  (res as { writeHead: unknown }).writeHead = (status: number, headers?: unknown) => {
    reencode(headers);
    return writeHead(status, headers);
  };
  (res as { addTrailers: unknown }).addTrailers = (trailers: unknown) => {
    reencode(trailers);
    addTrailers(trailers);
  };
}
