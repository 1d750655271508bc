/**
 * Which addresses a webhook may go to, block by block: every special-purpose block of IANA's IPv4
 * and IPv6 registries (as updated 2025-10-09), the non-unicast space of IANA's address-space
 * registries, and the IPv6 forms that carry an IPv4 address, classified by the address they reach.
 *
 * The table is written from the registries, not from the code under test; ipaddr.js is used here
 * only to read a block's first address, and node:net's BlockList to tell whether a neighbouring
 * address lies in another block of the table.
 */
import { BlockList } from "node:net";

import { expect } from "chai";
import ipaddr from "ipaddr.js";

import { isInternalAddress } from "../../../adapters/webhooks/destination.js";

interface Block {
  cidr: string;
  name: string;
  /** The RFC that assigned the block, as the registry cites it. */
  rfc: string;
  /**
   * For a block whose addresses carry an IPv4 address (a tunnel or a translator delivers to it):
   * addresses inside carrying internal IPv4 addresses, refused, and public ones, taken.
   */
  carries?: { internal: string[]; public: string[] };
}

/** IANA IPv4 Special-Purpose Address Registry, every entry, and multicast from the IPv4 Address Space. */
const IPV4: Block[] = [
  { cidr: "0.0.0.0/8", name: '"This network"', rfc: "RFC 791, §3.2" },
  { cidr: "0.0.0.0/32", name: '"This host on this network"', rfc: "RFC 1122, §3.2.1.3" },
  { cidr: "10.0.0.0/8", name: "Private-Use", rfc: "RFC 1918" },
  { cidr: "100.64.0.0/10", name: "Shared Address Space", rfc: "RFC 6598" },
  { cidr: "127.0.0.0/8", name: "Loopback", rfc: "RFC 1122, §3.2.1.3" },
  { cidr: "169.254.0.0/16", name: "Link Local", rfc: "RFC 3927" },
  { cidr: "172.16.0.0/12", name: "Private-Use", rfc: "RFC 1918" },
  { cidr: "192.0.0.0/24", name: "IETF Protocol Assignments", rfc: "RFC 6890, §2.1" },
  { cidr: "192.0.0.0/29", name: "IPv4 Service Continuity Prefix", rfc: "RFC 7335" },
  { cidr: "192.0.0.8/32", name: "IPv4 dummy address", rfc: "RFC 7600" },
  { cidr: "192.0.0.9/32", name: "Port Control Protocol Anycast", rfc: "RFC 7723" },
  { cidr: "192.0.0.10/32", name: "Traversal Using Relays around NAT Anycast", rfc: "RFC 8155" },
  { cidr: "192.0.0.170/32", name: "NAT64/DNS64 Discovery", rfc: "RFC 8880, RFC 7050 §2.2" },
  { cidr: "192.0.0.171/32", name: "NAT64/DNS64 Discovery", rfc: "RFC 8880, RFC 7050 §2.2" },
  { cidr: "192.0.2.0/24", name: "Documentation (TEST-NET-1)", rfc: "RFC 5737" },
  { cidr: "192.31.196.0/24", name: "AS112-v4", rfc: "RFC 7535" },
  { cidr: "192.52.193.0/24", name: "AMT", rfc: "RFC 7450" },
  { cidr: "192.88.99.0/24", name: "Deprecated (6to4 Relay Anycast)", rfc: "RFC 7526" },
  { cidr: "192.88.99.2/32", name: "6a44-relay anycast address", rfc: "RFC 6751" },
  { cidr: "192.168.0.0/16", name: "Private-Use", rfc: "RFC 1918" },
  { cidr: "192.175.48.0/24", name: "Direct Delegation AS112 Service", rfc: "RFC 7534" },
  { cidr: "198.18.0.0/15", name: "Benchmarking", rfc: "RFC 2544" },
  { cidr: "198.51.100.0/24", name: "Documentation (TEST-NET-2)", rfc: "RFC 5737" },
  { cidr: "203.0.113.0/24", name: "Documentation (TEST-NET-3)", rfc: "RFC 5737" },
  { cidr: "240.0.0.0/4", name: "Reserved", rfc: "RFC 1112, §4" },
  { cidr: "255.255.255.255/32", name: "Limited Broadcast", rfc: "RFC 8190, RFC 919 §7" },
  // IANA IPv4 Address Space Registry
  { cidr: "224.0.0.0/4", name: "Multicast", rfc: "RFC 5771" },
];

/**
 * IANA IPv6 Special-Purpose Address Registry, every entry; the IPv6 forms of an IPv4 address that
 * are not in it; and every block of the IPv6 Address Space Registry outside 2000::/3 (global
 * unicast, the only space IANA allocates from).
 */
const IPV6: Block[] = [
  { cidr: "::1/128", name: "Loopback Address", rfc: "RFC 4291" },
  { cidr: "::/128", name: "Unspecified Address", rfc: "RFC 4291" },
  {
    cidr: "::ffff:0:0/96",
    name: "IPv4-mapped Address",
    rfc: "RFC 4291",
    carries: {
      internal: ["::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:a9fe:a9fe", "::ffff:192.0.2.1", "::FFFF:7F00:1"],
      public: ["::ffff:8.8.8.8", "::ffff:808:808"],
    },
  },
  {
    cidr: "64:ff9b::/96",
    name: "IPv4-IPv6 Translat.",
    rfc: "RFC 6052",
    carries: {
      internal: ["64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::100.64.0.1", "64:ff9b::198.51.100.7"],
      public: ["64:ff9b::8.8.8.8", "64:ff9b::808:808"],
    },
  },
  { cidr: "64:ff9b:1::/48", name: "IPv4-IPv6 Translat. (local use)", rfc: "RFC 8215" },
  { cidr: "100::/64", name: "Discard-Only Address Block", rfc: "RFC 6666" },
  { cidr: "100:0:0:1::/64", name: "Dummy IPv6 Prefix", rfc: "RFC 9780" },
  { cidr: "2001::/23", name: "IETF Protocol Assignments", rfc: "RFC 2928" },
  // A tunnel to a client behind a NAT, never a webhook receiver: refused whole, whatever it carries
  // (2001:0:<server>:<flags>:<port>:<client>, this one to client 8.8.8.8 through RFC 4380's server).
  { cidr: "2001::/32", name: "TEREDO", rfc: "RFC 4380, RFC 8190" },
  { cidr: "2001:1::1/128", name: "Port Control Protocol Anycast", rfc: "RFC 7723" },
  { cidr: "2001:1::2/128", name: "Traversal Using Relays around NAT Anycast", rfc: "RFC 8155" },
  { cidr: "2001:1::3/128", name: "DNS-SD Service Registration Protocol Anycast", rfc: "RFC 9665" },
  { cidr: "2001:2::/48", name: "Benchmarking", rfc: "RFC 5180" },
  { cidr: "2001:3::/32", name: "AMT", rfc: "RFC 7450" },
  { cidr: "2001:4:112::/48", name: "AS112-v6", rfc: "RFC 7535" },
  { cidr: "2001:10::/28", name: "Deprecated (previously ORCHID)", rfc: "RFC 4843" },
  { cidr: "2001:20::/28", name: "ORCHIDv2", rfc: "RFC 7343" },
  { cidr: "2001:30::/28", name: "Drone Remote ID Protocol Entity Tags (DETs) Prefix", rfc: "RFC 9374" },
  { cidr: "2001:db8::/32", name: "Documentation", rfc: "RFC 3849" },
  {
    cidr: "2002::/16",
    name: "6to4",
    rfc: "RFC 3056",
    carries: {
      internal: ["2002:7f00:1::", "2002:c0a8:101::1", "2002:a9fe:a9fe:1::1", "2002:cb00:7101::1"],
      public: ["2002:808:808::1", "2002:808:808:ffff:ffff:ffff:ffff:ffff"],
    },
  },
  { cidr: "2620:4f:8000::/48", name: "Direct Delegation AS112 Service", rfc: "RFC 7534" },
  { cidr: "3fff::/20", name: "Documentation", rfc: "RFC 9637" },
  { cidr: "5f00::/16", name: "Segment Routing (SRv6) SIDs", rfc: "RFC 9602" },
  { cidr: "fc00::/7", name: "Unique-Local", rfc: "RFC 4193, RFC 8190" },
  { cidr: "fe80::/10", name: "Link-Local Unicast", rfc: "RFC 4291" },
  // Not in the special-purpose registry
  {
    cidr: "::/96",
    name: "IPv4-compatible (deprecated)",
    rfc: "RFC 4291, §2.5.5.1",
    carries: { internal: ["::127.0.0.1", "::10.0.0.1", "::a9fe:a9fe"], public: ["::8.8.8.8", "::808:808"] },
  },
  {
    cidr: "::ffff:0:0:0/96",
    name: "IPv4-translated (SIIT)",
    rfc: "RFC 2765, §2.1",
    carries: {
      internal: ["::ffff:0:127.0.0.1", "::ffff:0:10.0.0.1", "::ffff:0:a9fe:a9fe"],
      public: ["::ffff:0:8.8.8.8", "::ffff:0:808:808"],
    },
  },
  { cidr: "fec0::/10", name: "Site-local (deprecated)", rfc: "RFC 3879" },
  { cidr: "ff00::/8", name: "Multicast", rfc: "RFC 4291, §2.7" },
  // IANA IPv6 Address Space Registry: reserved by the IETF, outside 2000::/3 (RFC 4291)
  ...["::/8", "100::/8", "200::/7", "400::/6", "800::/5", "1000::/4", "4000::/3", "6000::/3", "8000::/3"].map(
    reservedV6,
  ),
  ...["a000::/3", "c000::/3", "e000::/4", "f000::/5", "f800::/6", "fe00::/9"].map(reservedV6),
];

function reservedV6(cidr: string): Block {
  return { cidr, name: "Reserved by IETF", rfc: "RFC 4291" };
}

/**
 * Every block of the table, to tell whether a neighbouring address is public: one list a family,
 * since a BlockList also checks an IPv4 address against IPv6 rules, as ::ffff:a.b.c.d.
 */
function blockList(table: Block[], family: "ipv4" | "ipv6"): BlockList {
  const list = new BlockList();
  for (const { cidr } of table) {
    const [base, prefix] = cidr.split("/") as [string, string];
    list.addSubnet(base, Number(prefix), family);
  }
  return list;
}
const special = { ipv4: blockList(IPV4, "ipv4"), ipv6: blockList(IPV6, "ipv6") };

/** A block's first and last address as numbers, and its width in bits. */
function bounds(cidr: string): { first: bigint; last: bigint; bits: number } {
  const [address, prefix] = ipaddr.parseCIDR(cidr);
  const bits = address.kind() === "ipv4" ? 32 : 128;
  const value = address.toByteArray().reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
  const size = 1n << BigInt(bits - prefix);
  const first = value & ~(size - 1n);
  return { first, last: first + size - 1n, bits };
}

/** An address as text: dotted for IPv4, eight uncompressed words for IPv6. */
function text(value: bigint, bits: number): string {
  if (bits === 32) return [24n, 16n, 8n, 0n].map((shift) => (value >> shift) & 255n).join(".");
  return [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((shift) => ((value >> shift) & 0xffffn).toString(16)).join(":");
}

/** Whether an address outside the table is public: for IPv6, also inside 2000::/3. */
function isPublic(value: bigint, bits: number): boolean {
  if (bits === 32) return !special.ipv4.check(text(value, 32), "ipv4");
  return !special.ipv6.check(text(value, 128), "ipv6") && value >> 125n === 1n;
}

describe("webhook destinations", function () {
  for (const [family, table] of [
    ["IPv4", IPV4],
    ["IPv6", IPV6],
  ] as const) {
    describe(`every special-purpose block of ${family}`, function () {
      for (const block of table) {
        it(`refuses ${block.cidr} (${block.name}, ${block.rfc}): its first, last and an inside address`, function () {
          const { first, last, bits } = bounds(block.cidr);
          const inside = block.carries?.internal ?? [text(first + (last - first) / 2n, bits)];
          for (const address of [text(first, bits), text(last, bits), ...inside])
            expect(isInternalAddress(address), address).to.equal(true);
        });

        if (block.carries !== undefined)
          it(`takes ${block.cidr} (${block.name}) when the IPv4 address it reaches is public`, function () {
            for (const address of block.carries!.public) expect(isInternalAddress(address), address).to.equal(false);
          });
      }

      it("takes the public addresses on either side of each block", function () {
        const taken: string[] = [];
        for (const block of table) {
          const { first, last, bits } = bounds(block.cidr);
          for (const neighbour of [first - 1n, last + 1n]) {
            if (neighbour < 0n || neighbour >> BigInt(bits) !== 0n || !isPublic(neighbour, bits)) continue;
            const address = text(neighbour, bits);
            expect(isInternalAddress(address), `${address}, next to ${block.cidr}`).to.equal(false);
            taken.push(address);
          }
        }
        // The other edges border another block, or the end of the address space.
        // The other edges border another block of the table, or the end of the address space.
        expect(taken).to.have.length(family === "IPv4" ? 33 : 13);
      });
    });
  }

  describe("the forms an address is written in", function () {
    it("refuses the four found taken as public: ::ffff:0:a.b.c.d, 64:ff9b:1::/48, fec0::/10 and 100::/64", function () {
      for (const address of ["::ffff:0:127.0.0.1", "::ffff:0:a00:1", "64:ff9b:1::a00:1", "fec0::1", "100::1"])
        expect(isInternalAddress(address), address).to.equal(true);
    });

    it("refuses a local-use NAT64 address whatever IPv4 address it seems to carry", function () {
      // RFC 8215: the network that uses 64:ff9b:1::/48 chooses where in it the IPv4 address sits
      expect(isInternalAddress("64:ff9b:1::8.8.8.8")).to.equal(true);
      expect(isInternalAddress("64:ff9b:1:808:8:800::")).to.equal(true);
    });

    it("reads upper case, a zone and an embedded dotted quad", function () {
      for (const address of ["FE80::1", "fe80::1%eth0", "::FFFF:127.0.0.1", "2002:7F00:1::"])
        expect(isInternalAddress(address), address).to.equal(true);
      expect(isInternalAddress("2606:4700::1111")).to.equal(false);
      expect(isInternalAddress("::FFFF:8.8.8.8")).to.equal(false);
    });

    it("refuses what is not an IP literal", function () {
      for (const address of ["", "localhost", "127.1", "0x7f.0.0.1", "::ffff:127.1", "[::1]"])
        expect(isInternalAddress(address), address).to.equal(true);
    });
  });
});
