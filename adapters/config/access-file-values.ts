/**
 * The values of the access file's fields that need more than a pattern: a limit's window, an
 * allowFrom CIDR, an expiry's calendar, a USD maximum, and the denylist's lines
 * (access-file.ts checks the file with them).
 */
import { isIP } from "node:net";

import { LIMIT_USD_DECIMALS } from "../../core/index.js";

/** The longest rolling window a limit may have. */
const MAX_WINDOW_MS = 366 * 86_400_000;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A window as the file writes it ("24h") in ms, or undefined when it is not a duration. */
export function parseWindow(text: string): number | undefined {
  const match = /^([1-9][0-9]{0,8})([smhd])$/.exec(text);
  if (match === null) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  return ms <= MAX_WINDOW_MS ? ms : undefined;
}

/** An allowFrom entry: a CIDR, or one address (as /32 or /128), as Node's BlockList takes it; undefined when neither. */
export function parseCidr(text: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } | undefined {
  const match = /^([^/\s]+)(?:\/(\d{1,3}))?$/.exec(text);
  if (match === null) return undefined;
  const version = isIP(match[1]!);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  const prefix = match[2] === undefined ? max : Number(match[2]);
  return prefix <= max ? { address: match[1]!, prefix, family: version === 4 ? "ipv4" : "ipv6" } : undefined;
}

/**
 * An RFC 3339 time (the schema checked its form) as ms since the epoch, or NaN when a field is out
 * of its calendar's range: Date.parse takes 2026-04-31 for 2026-05-01, a key expiring a day late.
 */
export function calendarTime(text: string): number {
  const [, y, mo, d, h, mi, s, , oh, om] =
    /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:Z|[+-](\d{2}):(\d{2}))$/.exec(text) ?? [];
  const [year, month, day] = [Number(y), Number(mo), Number(d)];
  const days = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const inRange =
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= days &&
    Number(h) <= 23 &&
    Number(mi) <= 59 &&
    Number(s) <= 59 &&
    (oh === undefined || (Number(oh) <= 23 && Number(om) <= 59));
  return inRange ? Date.parse(text) : Number.NaN;
}

/** "250000.5" at LIMIT_USD_DECIMALS, exact. */
export function usdUnits(text: string): bigint {
  const [whole = "0", part = ""] = text.split(".");
  return BigInt(whole) * 10n ** BigInt(LIMIT_USD_DECIMALS) + BigInt(part.padEnd(LIMIT_USD_DECIMALS, "0"));
}

/** The denylist's addresses, lower-case: one a line, `#` starts a comment. */
export function parseDenylist(text: string, problems: string[]): Set<string> {
  const addresses = new Set<string>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.replace(/#.*$/, "").trim();
    if (line === "") return;
    if (!/^0x[0-9a-fA-F]{40}$/.test(line))
      problems.push(`denylist line ${index + 1}: is not an address (0x followed by 40 hex digits)`);
    else addresses.add(line.toLowerCase());
  });
  return addresses;
}
