/**
 * The Node.js the service runs on. The trade journal is node:sqlite, imported statically:
 * unflagged from 22.13, and it uses DatabaseSync#isTransaction, added in 22.16.0 and 24.0.0
 * (never in 23.x). On an older Node.js the start fails on that import (ERR_UNKNOWN_BUILTIN_MODULE)
 * or every journal write fails, so scripts/require-node.ts checks first and stops with one line.
 *
 * package.json `engines` names this version (`^22.16.0 || >=24`); its `devEngines` (>=20.19) is the
 * floor for `npm install`, since npm scripts and `npx` run on the Node 24 the `node` devDependency
 * brings. The production build (`npm ci --omit=dev`) has no such binary and runs on the system's
 * Node.js, hence this check.
 */
export const MIN_NODE_VERSION = "22.16.0";

/** "v22.1.0", "24.0.0-pre" → [22, 1, 0], [24, 0, 0]. */
function parse(version: string): number[] {
  return version
    .trim()
    .replace(/^v/, "")
    .split(".")
    .slice(0, 3)
    .map((part) => Number.parseInt(part, 10) || 0);
}

/** Whether `version` ("20.19.0", "v22.1.0") is `minimum` or newer (major, minor, patch). */
export function supportsNode(version: string, minimum = MIN_NODE_VERSION): boolean {
  const have = parse(version);
  const need = parse(minimum);
  for (let i = 0; i < 3; i++) {
    const h = have[i] ?? 0;
    const n = need[i] ?? 0;
    if (h !== n) return h > n;
  }
  return true;
}

/** The one line to stop with when `version` cannot run the service; undefined when it can. */
export function nodeVersionProblem(version: string): string | undefined {
  const wanted = MIN_NODE_VERSION.replace(/\.0$/, "");
  if (!supportsNode(version)) return `token-trading-service needs Node.js ${wanted} or newer; this is ${version}`;
  if (parse(version)[0] === 23)
    return `token-trading-service needs Node.js ${wanted} or newer, and not 23.x (its node:sqlite lacks isTransaction); this is ${version}`;
  return undefined;
}
