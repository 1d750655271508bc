/**
 * Imported first, and alone, by scripts/start.ts: stops at once, with one line, on a Node.js
 * that cannot run the service (see adapters/node-version.ts). Keep it free of anything but
 * that module: it must load on any Node.js.
 */
import { nodeVersionProblem } from "../adapters/node-version.js";

const problem = nodeVersionProblem(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
