/** A path of plain segments (letters, digits, `_`, `-`), which URL parsing would leave as it is. */
const PLAIN_PATH = /^(?:\/[\w-]+)*\/?$/;

/**
 * The path of a request target, without its query: what `new URL(target, base).pathname`
 * gives, computed without parsing a URL for the plain paths every route has. Any other
 * target (dot segments, percent-escapes, `//`, the absolute form) is parsed by URL,
 * and one URL cannot parse (such as `/\`, a host-relative URL with no host) is
 * returned as it came, so it matches no route; this never throws.
 */
export function requestPath(target: string | undefined): string {
  const raw = target ?? "/";
  const query = raw.indexOf("?");
  const path = query === -1 ? raw : raw.slice(0, query);
  if (PLAIN_PATH.test(path)) return path;
  try {
    return new URL(raw, "http://localhost").pathname;
  } catch {
    return path;
  }
}
