/**
 * CORS for browsers on other origins: the JSON routes, Connect and gRPC-Web. Off unless
 * CORS_ORIGINS lists origins ("*" for any). A key travels in the `api_key` header and never in
 * a cookie, so no credentials mode is needed, and none is allowed.
 *
 * - A preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin: 204, allowing
 *   GET and POST and the headers the routes and the RPC protocols use (connect-es's list plus
 *   `api_key`, `idempotency-key`, `x-request-id`), cached by the browser for two hours. From any
 *   other origin: 403 with `{"code", "message"}` naming the origin.
 * - Any other request from an allowed origin: the answer allows that origin and exposes
 *   `grpc-status`, `grpc-message`, the request id and `retry-after`, so that gRPC-Web clients
 *   read their status and callers their request id.
 */
import { cors as connectCors } from "@connectrpc/connect";

import {
  API_KEY_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  QUOTE_ID_HEADER,
  type NodeServerRequest,
  type NodeServerResponse,
} from "../../request/index.js";

const ALLOW_METHODS = ["GET", "POST", "OPTIONS"].join(", ");
const ALLOW_HEADERS = [
  ...new Set([
    API_KEY_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    QUOTE_ID_HEADER,
    "x-request-id",
    ...connectCors.allowedHeaders.map((h) => h.toLowerCase()),
  ]),
].join(", ");
const EXPOSE_HEADERS = [
  ...new Set([...connectCors.exposedHeaders.map((h) => h.toLowerCase()), "x-request-id", "retry-after"]),
].join(", ");
/** How long a browser may reuse a preflight's answer, in seconds (Chromium caps it at 7200). */
const MAX_AGE_S = "7200";

/** The CORS policy for `origins` ("*" = any origin), or undefined when the list is empty (CORS off). */
export function corsPolicy(
  origins: readonly string[],
): ((req: NodeServerRequest, res: NodeServerResponse) => boolean) | undefined {
  if (origins.length === 0) return undefined;
  const any = origins.includes("*");
  const allowed = new Set(origins.map((o) => o.toLowerCase()));

  /** Applies the policy; true when it answered the request itself (a preflight). */
  return (req, res) => {
    const origin = req.headers.origin;
    if (origin === undefined) return false;
    res.setHeader("vary", "Origin");
    const ok = any || allowed.has(origin.toLowerCase());
    const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
    if (!preflight) {
      if (ok) {
        res.setHeader("access-control-allow-origin", origin);
        res.setHeader("access-control-expose-headers", EXPOSE_HEADERS);
      }
      return false;
    }
    if (!ok) {
      const body = JSON.stringify({
        code: "permission_denied",
        message: `Origin: ${origin.slice(0, 200)} is not allowed (CORS_ORIGINS)`,
      });
      res.writeHead(403, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
      return true;
    }
    res.writeHead(204, {
      "access-control-allow-origin": origin,
      "access-control-allow-methods": ALLOW_METHODS,
      "access-control-allow-headers": ALLOW_HEADERS,
      "access-control-max-age": MAX_AGE_S,
      "content-length": "0",
    });
    res.end();
    return true;
  };
}
