/** Imported first by scripts/start.ts: stops at once, with one line, on a Node.js that is too old. */
import { MIN_NODE_VERSION, supportsNode } from "../adapters/node-version.js";

if (!supportsNode(process.versions.node)) {
  process.stderr.write(`token-trading-service needs Node.js ${MIN_NODE_VERSION} or newer; this is ${process.versions.node}\n`);
  process.exit(1);
}
