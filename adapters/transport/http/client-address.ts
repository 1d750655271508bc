/**
 * Whose request it is: the client's address, as the refused-key throttle (rate-limit.ts) and the
 * limit on connections per address (connections.ts) count it.
 *
 * The address is the TCP peer's, unless the peer is a trusted proxy (TRUSTED_PROXIES: a reverse
 * proxy, an ingress, a load balancer that sets X-Forwarded-For). Only then is X-Forwarded-For
 * read, from the right: each proxy appends the address it took the request from, so the rightmost
 * address that is not itself a trusted proxy is the client, and whatever the client wrote there
 * itself, further left, is never looked at. From any other peer the header is ignored: a client
 * cannot choose its address by writing one.
 */
import { BlockList, isIP, SocketAddress } from "node:net";

import type { NodeServerRequest } from "../request/index.js";

/** An IP address or a CIDR (address/prefix length), as TRUSTED_PROXIES lists them. */
const CIDR = /^([^/\s]+)\/(\d{1,3})$/;

/**
 * Reads TRUSTED_PROXIES: addresses and CIDRs, IPv4 or IPv6, separated by commas. Each entry comes
 * back written the canonical way (IPv6 in lower case and shortened); each that is neither an
 * address nor a CIDR is named in `problems`.
 */
export function parseTrustedProxies(text: string): { proxies: string[]; problems: string[] } {
  const proxies: string[] = [];
  const problems: string[] = [];
  if (text.trim() === "") return { proxies, problems };
  for (const raw of text.split(",")) {
    const entry = raw.trim();
    const canonical = canonicalEntry(entry);
    if (canonical !== undefined) proxies.push(canonical);
    else
      problems.push(
        `${entry === "" ? "an empty entry" : `"${entry.slice(0, 64)}"`} is not an IP address or a CIDR (such as 10.0.0.0/8, 192.0.2.7 or fd00::/8)`,
      );
  }
  return { proxies, problems };
}

/** `entry` written the canonical way, or undefined when it is neither an address nor a CIDR. */
function canonicalEntry(entry: string): string | undefined {
  const cidr = CIDR.exec(entry);
  const address = cidr === null ? entry : cidr[1]!;
  const family = isIP(address);
  if (family === 0) return undefined;
  const canonical = new SocketAddress({ address, family: family === 4 ? "ipv4" : "ipv6" }).address;
  if (cidr === null) return canonical;
  const prefix = Number(cidr[2]);
  return prefix <= (family === 4 ? 32 : 128) ? `${canonical}/${prefix}` : undefined;
}

/** The trusted proxies, and the rule that finds the client's address behind them. */
export class TrustedProxies {
  readonly #list = new BlockList();
  readonly #empty: boolean;

  /**
   * @param entries - addresses and CIDRs, as parseTrustedProxies reads them
   * @throws TypeError naming an entry that is neither
   */
  constructor(entries: readonly string[]) {
    const { proxies, problems } = parseTrustedProxies(entries.join(","));
    if (problems.length > 0) throw new TypeError(`trusted proxies: ${problems.join("; ")}`);
    for (const entry of proxies) {
      const [address, prefix] = entry.split("/");
      const type = isIP(address!) === 4 ? "ipv4" : "ipv6";
      if (prefix === undefined) this.#list.addAddress(address!, type);
      else this.#list.addSubnet(address!, Number(prefix), type);
    }
    this.#empty = proxies.length === 0;
  }

  /** Whether `address` (a peer's, or one X-Forwarded-For names) is a trusted proxy. IPv4-mapped IPv6 counts as IPv4. */
  has(address: string): boolean {
    if (this.#empty) return false;
    const family = isIP(address);
    return family !== 0 && this.#list.check(address, family === 4 ? "ipv4" : "ipv6");
  }

  /**
   * The client's address for a request that came from `peer` with `forwardedFor` (its
   * X-Forwarded-For header, or headers): the peer itself unless it is trusted; else the rightmost
   * forwarded address that is not trusted; the farthest one when all are; and the last trusted
   * hop when the header runs into something that is not an address (a proxy writes only addresses,
   * so that is the client's own writing). An IPv4 address a dual-stack socket reports as
   * `::ffff:a.b.c.d` is given as `a.b.c.d`.
   */
  clientAddress(peer: string, forwardedFor: string | string[] | undefined): string {
    if (forwardedFor === undefined || !this.has(peer)) return unmapped(peer);
    const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor).split(",");
    let client = peer;
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = forwardedAddress(hops[i]!);
      if (hop === undefined) break;
      client = hop;
      if (!this.has(hop)) break;
    }
    return unmapped(client);
  }
}

/** An address X-Forwarded-For names: plain, or with a port (`192.0.2.7:4711`, `[2001:db8::7]:4711`), canonical; undefined if not one. */
function forwardedAddress(text: string): string | undefined {
  let hop = text.trim();
  if (hop.startsWith("[")) {
    const end = hop.indexOf("]");
    if (end < 0) return undefined;
    hop = hop.slice(1, end);
  } else if (hop.indexOf(":") > 0 && hop.indexOf(":") === hop.lastIndexOf(":")) {
    hop = hop.slice(0, hop.indexOf(":")); // IPv4 with a port: an IPv6 address has two colons at least
  }
  const family = isIP(hop);
  if (family === 0) return undefined;
  return family === 4 ? hop : new SocketAddress({ address: hop, family: "ipv6" }).address;
}

/** `::ffff:a.b.c.d` (IPv4 on a dual-stack socket) as `a.b.c.d`; any other address as it is. */
function unmapped(address: string): string {
  return address.startsWith("::ffff:") && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/** The client's address of a request, by `proxies`' rule; the peer's when no proxy is trusted. */
export function clientAddressOf(req: NodeServerRequest, proxies: TrustedProxies | undefined): string {
  const peer = req.socket?.remoteAddress ?? "";
  return proxies === undefined ? unmapped(peer) : proxies.clientAddress(peer, req.headers["x-forwarded-for"]);
}
