/**
 * Where a webhook may go. A destination that is, or resolves to, a loopback, private,
 * link-local or otherwise internal address is refused (unless WEBHOOK_ALLOW_PRIVATE=true), so
 * that a webhook cannot be turned against the service's own network. The check runs on the
 * address the connection is then made to (resolved once, and pinned), so a name that resolves
 * to a public address when checked and a private one when connecting (DNS rebinding) gains nothing.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

import ipaddr from "ipaddr.js";

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

/** Global unicast: the only IPv6 space IANA allocates from (IANA IPv6 Address Space, RFC 4291). */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR("2000::/3");
/** IPv4-compatible, ::a.b.c.d (RFC 4291 §2.5.5.1, deprecated). */
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR("::/96");
/** The local-use NAT64 prefix (RFC 8215), which ipaddr.js names "rfc6052" with the well-known 64:ff9b::/96. */
const LOCAL_USE_NAT64 = ipaddr.IPv6.parseCIDR("64:ff9b:1::/48");

/**
 * Whether `address` (an IP literal) is loopback, private, link-local or otherwise internal or
 * special-purpose. A string that is not an IP literal counts as internal.
 *
 * The blocks come from ipaddr.js's `range()`, which follows IANA's special-purpose registries:
 * anything but "unicast" is refused, including the globally reachable anycast services (AS112, AMT,
 * PCP, TURN) that no webhook receiver lives at. An IPv6 address that carries an IPv4 address is
 * classified by the IPv4 address it reaches. IPv6 outside 2000::/3 is refused: IANA allocates none
 * of it, and its newest special-purpose blocks come from there before libraries list them (the one
 * block of the registry ipaddr.js 2.5.0 lacks, 100:0:0:1::/64, RFC 9780, is refused by this rule).
 */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return isInternalIPv4(ipaddr.IPv4.parse(address));
  if (family === 6) return isInternalIPv6(ipaddr.IPv6.parse(address));
  return true;
}

function isInternalIPv4(ip: IPv4): boolean {
  return ip.range() !== "unicast";
}

function isInternalIPv6(ip: IPv6): boolean {
  switch (ip.range()) {
    case "ipv4Mapped": // ::ffff:a.b.c.d (RFC 4291 §2.5.5.2): a dual-stack socket connects to a.b.c.d
    case "rfc6145": // ::ffff:0:a.b.c.d (RFC 2765 §2.1): a stateless translator delivers to a.b.c.d
      return isInternalIPv4(carried(ip, 6));
    case "rfc6052":
      // 64:ff9b::a.b.c.d (RFC 6052): a NAT64 gateway connects to a.b.c.d. In 64:ff9b:1::/48 the
      // network that uses it places the IPv4 address (RFC 6052 §2.2), so it reaches that network's own
      // translator, and whatever it maps to: internal
      return ip.match(LOCAL_USE_NAT64) || isInternalIPv4(carried(ip, 6));
    case "6to4": // 2002:AABB:CCDD::/48 (RFC 3056): a 6to4 relay tunnels to AA.BB.CC.DD
      return isInternalIPv4(carried(ip, 1));
    case "teredo":
      // 2001::/32 (RFC 4380): a tunnel to a client behind a NAT, never a webhook receiver; refused
      // whole, whatever server and client it names
      return true;
    case "unicast":
      if (ip.match(IPV4_COMPATIBLE)) return isInternalIPv4(carried(ip, 6));
      return !ip.match(GLOBAL_UNICAST);
    default:
      // every other range: loopback, unspecified, link-local, unique local, site-local (fec0::/10,
      // RFC 3879: it reaches the site's own network), multicast, discard, documentation, ...
      return true;
  }
}

/** The IPv4 address in the two 16-bit words of `ip` from `word`. */
function carried(ip: IPv6, word: number): IPv4 {
  const high = ip.parts[word] ?? 0;
  const low = ip.parts[word + 1] ?? 0;
  return new ipaddr.IPv4([high >> 8, high & 255, low >> 8, low & 255]);
}

/** The host of a URL without IPv6 brackets. */
export function urlHost(url: URL): string {
  return url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
}

export type Resolver = (host: string) => Promise<Array<{ address: string; family: number }>>;

export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

export class DestinationRefusedError extends Error {
  override readonly name = "DestinationRefusedError";
}

/**
 * The address to connect to for `url`: its host resolved, every address it resolves to checked.
 * @throws DestinationRefusedError when one is internal and internal ones are not allowed
 */
export async function resolveDestination(
  url: URL,
  { allowPrivate, resolve = systemResolver }: { allowPrivate: boolean; resolve?: Resolver },
): Promise<{ address: string; family: number }> {
  const host = urlHost(url);
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await resolve(host);
  const first = addresses[0];
  if (first === undefined) throw new DestinationRefusedError(`${host} resolves to no address`);
  if (!allowPrivate) {
    const bad = addresses.find((a) => isInternalAddress(a.address));
    if (bad !== undefined)
      throw new DestinationRefusedError(
        `${host} resolves to ${bad.address}, an internal address (set WEBHOOK_ALLOW_PRIVATE=true to allow)`,
      );
  }
  return first;
}
