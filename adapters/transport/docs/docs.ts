/**
 * GET /docs: Swagger UI over /api/v1/openapi.json, served by the service itself from the
 * swagger-ui-dist package (no CDN, nothing fetched from elsewhere), with no key. A Content
 * Security Policy lets the page load nothing but this origin's files.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

import type { NodeServerRequest, NodeServerResponse } from "../request/index.js";

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

/** The docs handler: answers and returns true for /docs and its files, false for anything else. */
export function docsHandler(): (req: NodeServerRequest, res: NodeServerResponse, path: string) => boolean {
  const dist = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const files = new Map<string, { type: string; body: Buffer | string }>([
    ["/docs", { type: "text/html; charset=utf-8", body: PAGE }],
    ["/docs/", { type: "text/html; charset=utf-8", body: PAGE }],
    ["/docs/init.js", { type: "text/javascript; charset=utf-8", body: INIT }],
  ]);
  // Read on first use: most processes never serve the page.
  const lazy = new Map([
    ["/docs/swagger-ui-bundle.js", { type: "text/javascript; charset=utf-8", file: "swagger-ui-bundle.js" }],
    ["/docs/swagger-ui.css", { type: "text/css; charset=utf-8", file: "swagger-ui.css" }],
    ["/docs/favicon-32x32.png", { type: "image/png", file: "favicon-32x32.png" }],
  ]);
  return (req, res, path) => {
    if (path !== "/docs" && !path.startsWith("/docs/")) return false;
    let found = files.get(path);
    const pending = lazy.get(path);
    if (found === undefined && pending !== undefined) {
      found = { type: pending.type, body: readFileSync(join(dist, pending.file)) };
      files.set(path, found);
    }
    if (found === undefined || (req.method !== "GET" && req.method !== "HEAD")) {
      const body = JSON.stringify(
        found === undefined
          ? { code: "not_found", message: `no route for ${req.method} ${path.slice(0, 200)}` }
          : { code: "unimplemented", message: `method ${req.method} is not allowed on ${path}; use GET` },
      );
      res.writeHead(found === undefined ? 404 : 405, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
      });
      res.end(body);
      return true;
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
    return true;
  };
}
