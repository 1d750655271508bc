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
  const lower = address.toLowerCase();
  // An IPv4 address written as IPv6 (::ffff:a.b.c.d, or its hex form) is checked as IPv4.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return internal.check(mapped[1]!, "ipv4");
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const [hi, lo] = [Number.parseInt(hex[1]!, 16), Number.parseInt(hex[2]!, 16)];
    return internal.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, "ipv4");
  }
  return internal.check(address, "ipv6");
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
