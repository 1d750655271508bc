/**
 * Where a webhook may go. A destination that is, or resolves to, a loopback, private,
 * link-local or otherwise internal address is refused (unless WEBHOOK_ALLOW_PRIVATE=true), so
 * that a webhook cannot be turned against the service's own network. The check runs on the
 * address the connection is then made to (resolved once, and pinned), so a name that resolves
 * to a public address when checked and a private one when connecting (DNS rebinding) gains nothing.
 */
import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";

const internal = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8], // private
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local (cloud metadata services)
  ["172.16.0.0", 12], // private
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.168.0.0", 16], // private
  ["198.18.0.0", 15], // benchmarking
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const)
  internal.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 128], // unspecified
  ["::1", 128], // loopback
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
] as const)
  internal.addSubnet(net, prefix, "ipv6");

/** Whether `address` (an IP literal) is loopback, private, link-local or otherwise internal. */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return internal.check(address, "ipv4");
  if (family !== 6) return true;
  if (internal.check(address, "ipv6")) return true;
  // An IPv4 address carried inside IPv6 is checked as that IPv4 address.
  const words = ipv6Words(address);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible)
  if (zero(0, 5) && (words[5] === 0xffff || words[5] === 0)) return internal.check(v4(words[6]!, words[7]!), "ipv4");
  // 64:ff9b::a.b.c.d (NAT64, RFC 6052): the gateway would connect to a.b.c.d
  if (words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6)) return internal.check(v4(words[6]!, words[7]!), "ipv4");
  // 2002:AABB:CCDD::/48 (6to4, RFC 3056)
  if (words[0] === 0x2002) return internal.check(v4(words[1]!, words[2]!), "ipv4");
  // 2001:0::/32 (Teredo, RFC 4380): a tunnel to a client behind a NAT, never a webhook endpoint
  return words[0] === 0x2001 && words[1] === 0;
}

/** The eight 16-bit words of an IPv6 address (isIP said 6), an embedded dotted quad included. */
function ipv6Words(address: string): number[] {
  let text = address.toLowerCase().split("%")[0]!;
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const middle = tail === undefined ? [] : Array(8 - left.length - right.length).fill("0");
  return [...left, ...middle, ...right].map((word) => Number.parseInt(word, 16));
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
