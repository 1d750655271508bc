/**
 * The path of a request target, without its query: what `new URL(target, base).pathname`
 * gives, computed without parsing a URL for the plain paths every route and procedure has. Any
 * other target (dot segments, percent-escapes, `//`, the absolute form) is parsed by URL,
 * and one URL cannot parse (such as `/\`, a host-relative URL with no host) is
 * returned as it came, so it matches no route; this never throws.
 */
export function requestPath(target: string | undefined): string {
  const raw = target ?? "/";
  const query = raw.indexOf("?");
  const path = query === -1 ? raw : raw.slice(0, query);
  if (isPlain(path)) return path;
  try {
    return new URL(raw, "http://localhost").pathname;
  } catch {
    return path;
  }
}

const SLASH = 0x2f;
const DOT = 0x2e;

/**
 * Whether URL parsing would leave `path` as it is: empty, or segments each after one `/` (and
 * perhaps a `/` at the end), of letters, digits, `_`, `-` and `.`, none of them the dot segments
 * `.` and `..`. A loop over the characters: a regular expression cost the price answer more.
 */
function isPlain(path: string): boolean {
  if (path.length === 0) return true;
  if (path.charCodeAt(0) !== SLASH) return false;
  let length = 0; // of the segment so far
  let dots = 0; // how many of its characters are dots
  for (let i = 1; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c === SLASH) {
      if (length === 0 || isDotSegment(length, dots)) return false;
      length = 0;
      dots = 0;
      continue;
    }
    if (c === DOT) dots++;
    else if (!isWordOrDash(c)) return false;
    length++;
  }
  return !isDotSegment(length, dots);
}

function isDotSegment(length: number, dots: number): boolean {
  return length === dots && (dots === 1 || dots === 2);
}

/** [A-Za-z0-9_-] */
function isWordOrDash(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2d;
}
