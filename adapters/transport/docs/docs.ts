/**
 * GET /docs: Swagger UI over /api/v1/openapi.json, served by the service itself from the
 * swagger-ui-dist package (no CDN, nothing fetched from elsewhere), with no key. A Content
 * Security Policy lets the page load nothing but this origin's files.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

import type { NodeServerRequest, NodeServerResponse, RouteHandler } from "../request/index.js";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Token trading service API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// validatorUrl null: Swagger UI's badge would otherwise ask validator.swagger.io about the document.
const INIT = `window.ui = SwaggerUIBundle({ url: "/api/v1/openapi.json", dom_id: "#ui", deepLinking: true, validatorUrl: null });\n`;

/** Only this origin; Swagger UI sets styles inline and shows its logo as a data: URL. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/** /docs and its files, for the service's router. */
export interface DocsRoutes {
  /** The handler of each file's path (the page at /docs and /docs/). */
  paths: ReadonlyMap<string, RouteHandler>;
  /** Whether a path is under /docs: one none of `paths` has is `other`'s. */
  owns(path: string): boolean;
  /** Any other path under /docs: 404. */
  other: RouteHandler;
}

export function docsRoutes(): DocsRoutes {
  const dist = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const page = { type: "text/html; charset=utf-8", body: PAGE };
  const files: Array<[string, () => { type: string; body: Buffer | string }]> = [
    ["/docs", () => page],
    ["/docs/", () => page],
    ["/docs/init.js", () => ({ type: "text/javascript; charset=utf-8", body: INIT })],
    // Read on first use: most processes never serve the page.
    ["/docs/swagger-ui-bundle.js", lazyFile(dist, "swagger-ui-bundle.js", "text/javascript; charset=utf-8")],
    ["/docs/swagger-ui.css", lazyFile(dist, "swagger-ui.css", "text/css; charset=utf-8")],
    ["/docs/favicon-32x32.png", lazyFile(dist, "favicon-32x32.png", "image/png")],
  ];
  const paths = new Map<string, RouteHandler>(
    files.map(([path, file]) => [path, (req, res) => serveFile(req, res, path, file())]),
  );
  return {
    paths,
    owns: (path) => path === "/docs" || path.startsWith("/docs/"),
    other: (req, res, context) =>
      answerError(res, 404, "not_found", `no route for ${req.method} ${context.path.slice(0, 200)}`),
  };
}

/** A file of swagger-ui-dist, read when first asked for. */
function lazyFile(dist: string, name: string, type: string): () => { type: string; body: Buffer } {
  let file: { type: string; body: Buffer } | undefined;
  return () => {
    file ??= { type, body: readFileSync(join(dist, name)) };
    return file;
  };
}

/** A file to a GET or HEAD; 405 to any other method. */
function serveFile(
  req: NodeServerRequest,
  res: NodeServerResponse,
  path: string,
  found: { type: string; body: Buffer | string },
): void {
  if (req.method !== "GET" && req.method !== "HEAD") {
    answerError(res, 405, "unimplemented", `method ${req.method} is not allowed on ${path}; use GET`);
    return;
  }
  res.writeHead(200, {
    "content-type": found.type,
    "content-length": Buffer.byteLength(found.body),
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "cache-control": "public, max-age=3600",
  });
  if (req.method === "HEAD") res.end();
  else res.end(found.body);
}

function answerError(res: NodeServerResponse, status: number, code: string, message: string): void {
  const body = JSON.stringify({ code, message });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
