/**
 * The Node.js the service needs: 20.19 or newer (package.json `engines`). Production
 * starts (dist/scripts/start.js) check it first and stop with one clear line, rather than
 * failing later on a missing API.
 */
export const MIN_NODE_VERSION = "20.19.0";

/** Whether `version` ("20.19.0", "v22.1.0") is at least MIN_NODE_VERSION. */
export function supportsNode(version: string, minimum = MIN_NODE_VERSION): boolean {
  const parse = (v: string) => v.replace(/^v/, "").split(".").map((part) => Number.parseInt(part, 10) || 0);
  const have = parse(version);
  const need = parse(minimum);
  for (let i = 0; i < need.length; i++) {
    if ((have[i] ?? 0) !== need[i]) return (have[i] ?? 0) > need[i]!;
  }
  return true;
}
