import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

import { Ajv2020 } from "ajv/dist/2020.js";
import { expect } from "chai";

import {
  type AccessContext,
  accessFileJsonSchema,
  parseAccessFile,
  parseWindow,
} from "../../../adapters/config/access-file.js";
import { LIMIT_USD_DECIMALS } from "../../../core/index.js";

const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const DAI = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const CUSTOMER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const CONTEXT: AccessContext = { wallets: [WALLET], coins: new Map([[DAI, "DAI"]]) };

/** The example file, with real hashes and this chain's addresses. */
function example() {
  return {
    keys: [
      {
        name: "desk-eu",
        sha256: sha("desk-eu-key-0123456789"),
        roles: ["trader"],
        kinds: ["sell", "buy"],
        wallets: [WALLET],
        coins: [DAI],
        destinataries: [CUSTOMER],
        allowFrom: ["10.0.0.0/8"],
        expiresAt: "2027-01-01T00:00:00Z",
      },
      { name: "backoffice", sha256: sha("backoffice-key-0123456789"), roles: ["viewer"], sees: ["desk-eu"] },
    ],
    limits: [
      { name: "desk-eu daily", per: "key", keys: ["desk-eu"], window: "24h", maxUsd: "250000", maxTrades: 5000 },
      { name: "any customer daily", per: "destinatary", window: "24h", maxUsd: "10000" },
      { name: "hot wallet hourly", per: "wallet", window: "1h", maxUsd: "50000" },
    ],
    denylist: "denied-addresses.txt",
  };
}

const DENYLIST = `# OFAC SDN, digital currency addresses (ETH)\n0x8589427373D6D84E98730D7795D8f6f8731FDA16\n\n  0x722122dF12D4e14e13Ac3b6895a86e84145b6967  # Tornado\n`;

function parse(document: unknown, denylist = DENYLIST, context = CONTEXT) {
  const problems: string[] = [];
  const policy = parseAccessFile(
    {
      text: typeof document === "string" ? document : JSON.stringify(document),
      readDenylist: (path) => {
        if (path !== "denied-addresses.txt") throw Object.assign(new Error("no"), { code: "ENOENT" });
        return denylist;
      },
    },
    context,
    problems,
  );
  return { policy, problems };
}

function problemsOf(document: unknown, denylist?: string): string[] {
  const { policy, problems } = parse(document, denylist);
  expect(policy, "a file with a problem is refused whole").to.equal(undefined);
  return problems;
}

describe("ACCESS_FILE, the access file", function () {
  it("reads the issue's example: keys by hash with roles and scopes, limits with their windows, the denylist", function () {
    const { policy, problems } = parse(example());
    expect(problems).to.deep.equal([]);
    const [desk, backoffice] = policy!.keys;
    expect(desk!.name).to.equal("desk-eu");
    expect(desk!.sha256).to.deep.equal([sha("desk-eu-key-0123456789")]);
    expect(desk!.id, "the id a key had before the access file").to.equal(sha("desk-eu-key-0123456789").slice(0, 32));
    expect([...desk!.roles]).to.deep.equal(["trader"]);
    expect([...desk!.kinds!]).to.deep.equal(["sell", "buy"]);
    expect([...desk!.wallets!]).to.deep.equal([WALLET.toLowerCase()]);
    expect([...desk!.coins!]).to.deep.equal([DAI.toLowerCase()]);
    expect([...desk!.destinataries!]).to.deep.equal([CUSTOMER.toLowerCase()]);
    expect(desk!.allowFrom).to.deep.equal(["10.0.0.0/8"]);
    expect(desk!.expiresAt).to.equal(Date.UTC(2027, 0, 1));
    expect(desk!.sees).to.be.instanceOf(Set).and.have.property("size", 0);
    expect([...(backoffice!.sees as Set<string>)]).to.deep.equal(["desk-eu"]);
    expect(backoffice!.kinds).to.equal(undefined);
    const [daily, customer, hourly] = policy!.limits;
    expect(daily).to.deep.include({ name: "desk-eu daily", per: "key", windowMs: 86_400_000, window: "24h" });
    expect(daily!.maxUsd).to.equal(250_000n * 10n ** BigInt(LIMIT_USD_DECIMALS));
    expect(daily!.maxTrades).to.equal(5000);
    expect([...daily!.keys!]).to.deep.equal(["desk-eu"]);
    expect(customer!.maxTrades).to.equal(undefined);
    expect(hourly!.windowMs).to.equal(3_600_000);
    expect([...policy!.denylist]).to.deep.equal([
      "0x8589427373d6d84e98730d7795d8f6f8731fda16",
      "0x722122df12d4e14e13ac3b6895a86e84145b6967",
    ]);
    expect(policy!.version).to.match(/^[0-9a-f]{16}$/);
  });

  it('takes two hashes under one name during a rotation, and `sees: ["*"]` as every key', function () {
    const file = example();
    (file.keys[0] as { sha256: unknown }).sha256 = [sha("old-key-0123456789"), sha("new-key-0123456789")];
    file.keys[1]!.sees = ["*"];
    const { policy, problems } = parse(file);
    expect(problems).to.deep.equal([]);
    expect(policy!.keys[0]!.sha256).to.have.length(2);
    expect(policy!.keys[0]!.id, "the first hash's id").to.equal(sha("old-key-0123456789").slice(0, 32));
    expect(policy!.keys[1]!.sees).to.equal("all");
  });

  it("keeps a name's id through a rotation: an id given keeps it once the first hash is gone, and may be no other key's", function () {
    const file = example() as unknown as { keys: Record<string, unknown>[]; $schema?: string };
    const oldId = sha("old-key-0123456789").slice(0, 32);
    file.keys[0]!.sha256 = sha("new-key-0123456789");
    file.keys[0]!.id = oldId;
    file.$schema = "./access-file.schema.json";
    const { policy, problems } = parse(file);
    expect(problems).to.deep.equal([]);
    expect(policy!.keys[0]!.id).to.equal(oldId);
    file.keys[1]!.id = oldId;
    expect(problemsOf(file)).to.deep.equal([`keys[1].id: ${oldId} is already the id of keys[0]`]);
    file.keys[1]!.id = "ABC";
    expect(problemsOf(file)).to.deep.equal([
      "keys[1].id: must be a key id: 32 lower-case hex digits (the first 32 of a key's SHA-256)",
    ]);
  });

  it("gives each version of the file, or of its denylist, a version of its own", function () {
    const first = parse(example()).policy!.version;
    expect(parse(example()).policy!.version).to.equal(first);
    expect(parse(example(), `${DENYLIST}0x0000000000000000000000000000000000000001\n`).policy!.version).to.not.equal(
      first,
    );
    const other = example();
    other.limits[0]!.maxUsd = "250001";
    expect(parse(other).policy!.version).to.not.equal(first);
  });

  it("names every problem by its place in the file, all at once, and refuses the file whole", function () {
    const file = example() as unknown as { keys: Record<string, unknown>[]; limits: Record<string, unknown>[] };
    file.keys[0]!.wallets = ["0x0000000000000000000000000000000000000001"];
    file.keys[0]!.coins = [CUSTOMER];
    file.keys[0]!.allowFrom = ["10.0.0.0/33"];
    file.keys[1]!.sees = ["desk-us"];
    file.keys.push({ name: "desk-eu", sha256: sha("desk-eu-key-0123456789"), roles: ["admin"] });
    file.limits[1]!.window = "1 day";
    file.limits[2]!.keys = ["desk-eu"];
    file.limits.push({ name: "nothing", per: "all", window: "1h" });
    expect(problemsOf(file)).to.have.members([
      'keys[2].name: "desk-eu" is already the name of keys[0]',
      "keys[2].sha256: the same key as keys[0]'s",
      "keys[0].wallets[0]: 0x0000000000000000000000000000000000000001 is not an exchange wallet of this service",
      `keys[0].coins[0]: ${CUSTOMER} is not a stable coin of this service`,
      'keys[0].allowFrom[0]: "10.0.0.0/33" is not a CIDR (10.0.0.0/8, 2001:db8::/32) or an address',
      'keys[1].sees[0]: "desk-us" is the name of no key',
      'limits[1].window: "1 day" is not a duration (a whole number of s, m, h or d, at most 366d: 30m, 1h, 24h, 7d)',
      'limits[2].keys: only a limit with per "key" names keys (this one is per "wallet")',
      "limits[3]: must set maxUsd, maxTrades or both",
    ]);
  });

  it("refuses unknown fields, fields of the wrong type, and lists that are not arrays", function () {
    const file = example() as unknown as { keys: Record<string, unknown>[]; limits: Record<string, unknown>[] };
    file.keys[0]!.role = "trader";
    file.keys[1]!.roles = "viewer";
    file.keys[1]!.kinds = [];
    file.limits[0]!.maxUsd = 250000;
    file.limits[1]!.per = "customer";
    (file as Record<string, unknown>).approvers = [];
    expect(problemsOf(file)).to.have.members([
      'keys[0]: unknown field "role"',
      "keys[1].roles: must be an array",
      "keys[1].kinds: must list at least one (leave it out for any)",
      "limits[0].maxUsd: must be a string",
      "limits[1].per: must be one of key, wallet, destinatary, all",
      'unknown field "approvers"',
    ]);
  });

  it("refuses a hash that is not a key's lower-case SHA-256, a bad expiry, a bad amount, and never echoes a key", function () {
    const file = example() as unknown as { keys: Record<string, unknown>[]; limits: Record<string, unknown>[] };
    file.keys[0]!.sha256 = "desk-eu-key-0123456789";
    file.keys[1]!.sha256 = sha("backoffice-key-0123456789").toUpperCase();
    file.keys[1]!.expiresAt = "2027-01-01 00:00";
    file.limits[0]!.maxUsd = "1,000";
    const problems = problemsOf(file);
    expect(problems).to.have.members([
      'keys[0].sha256: must be the lower-case hex SHA-256 of the key, 64 digits (printf %s "$KEY" | sha256sum)',
      'keys[1].sha256: must be the lower-case hex SHA-256 of the key, 64 digits (printf %s "$KEY" | sha256sum)',
      "keys[1].expiresAt: must be an RFC 3339 time with an offset, such as 2027-01-01T00:00:00Z",
      'limits[0].maxUsd: must be a decimal string such as "250000" or "99.5" (at most 18 decimals)',
    ]);
    expect(problems.join("\n")).to.not.include("desk-eu-key-0123456789");
  });

  it("names the denylist's line that is not an address, and a denylist it cannot read", function () {
    expect(problemsOf(example(), "0x8589427373D6D84E98730D7795D8f6f8731FDA16\nnot-an-address\n")).to.deep.equal([
      "denylist line 2: is not an address (0x followed by 40 hex digits)",
    ]);
    const file = example();
    file.denylist = "missing.txt";
    expect(problemsOf(file)).to.deep.equal(["denylist: cannot read missing.txt (ENOENT)"]);
  });

  it("refuses `sees` on a key that reads only its own trades: a trader's", function () {
    const file = example();
    (file.keys[0] as { sees?: string[] }).sees = ["backoffice"];
    expect(problemsOf(file)).to.deep.equal([
      "keys[0].sees: only a viewer or an approver reads other keys' trades (an admin reads every trade); this key's roles are trader",
    ]);
  });

  it("refuses an expiry the calendar does not have, and an id that is another entry's key's", function () {
    const file = example() as unknown as { keys: Record<string, unknown>[] };
    file.keys[0]!.expiresAt = "2026-04-31T00:00:00Z";
    file.keys[1]!.expiresAt = "2027-02-29T12:00:00+01:00";
    (file.keys[1] as Record<string, unknown>).id = sha("desk-eu-key-0123456789").slice(0, 32);
    expect(problemsOf(file)).to.have.members([
      "keys[0].expiresAt: is not a valid time",
      "keys[1].expiresAt: is not a valid time",
      `keys[1].id: ${sha("desk-eu-key-0123456789").slice(0, 32)} is the id of a key of keys[0]`,
      `keys[1].id: ${sha("desk-eu-key-0123456789").slice(0, 32)} is already the id of keys[0]`,
    ]);
    file.keys[0]!.expiresAt = "2028-02-29T23:59:59-05:00";
    delete file.keys[1]!.expiresAt;
    delete (file.keys[1] as Record<string, unknown>).id;
    expect(parse(file).problems).to.deep.equal([]);
  });

  it("refuses a file that is not JSON, or holds no key, saying where and never quoting it", function () {
    const problems = problemsOf('{"keys": [{"name": "desk", "sha256": my-secret-key-here}]}');
    expect(problems).to.have.length(1);
    expect(problems[0]).to.equal("is not valid JSON (a JSON linter, such as jq, shows where)");
    expect(problems[0]).to.not.include("secret");
    expect(problemsOf("{ keys: [")[0]).to.match(/^is not valid JSON/);
    expect(problemsOf({ keys: [] })).to.deep.equal(["keys: must list at least one key"]);
  });

  it("reads windows as whole numbers of s, m, h or d, up to 366 days", function () {
    expect(parseWindow("30s")).to.equal(30_000);
    expect(parseWindow("30m")).to.equal(1_800_000);
    expect(parseWindow("7d")).to.equal(604_800_000);
    for (const bad of ["0h", "1.5h", "24", "1w", "1 day", "367d", "01h", ""])
      expect(parseWindow(bad), bad).to.equal(undefined);
  });

  it("publishes its JSON Schema in docs/, which accepts the example and refuses an unknown field", function () {
    const published = JSON.parse(
      readFileSync(new URL("../../../docs/access-file.schema.json", import.meta.url), "utf8"),
    );
    expect(published, "docs/access-file.schema.json is stale: run scripts/access-schema.ts").to.deep.equal(
      accessFileJsonSchema(),
    );
    const validate = new Ajv2020({ strict: false }).compile(published);
    expect(validate(example()), JSON.stringify(validate.errors)).to.equal(true);
    expect(validate({ ...example(), approvers: [] })).to.equal(false);
    expect(validate({ ...example(), approvals: [{ name: "large", aboveUsd: "25000", expiresAfter: "1h" }] })).to.equal(
      true,
    );
  });

  describe("approval rules", function () {
    /** The example with an approver key that sees desk-eu, and `approvals`. */
    function withApprovals(approvals: unknown[], approvers = 1) {
      const file = example() as ReturnType<typeof example> & { approvals?: unknown[] };
      for (let i = 0; i < approvers; i++)
        file.keys.push({
          name: `risk-${i}`,
          sha256: sha(`risk-key-${i}-0123456789`),
          roles: ["approver"],
          sees: ["desk-eu"],
        });
      file.approvals = approvals;
      return file;
    }

    it("reads the issue's rule: its threshold in exact USD, its keys, approvers and expiry", function () {
      const { policy, problems } = parse(
        withApprovals(
          [
            { name: "large payouts", aboveUsd: "25000", keys: ["desk-eu"], approvers: 1, expiresAfter: "1h" },
            { name: "any key, two eyes", aboveUsd: "100000.5", approvers: 2, expiresAfter: "30m" },
          ],
          2,
        ),
      );
      expect(problems).to.deep.equal([]);
      const [first, second] = policy!.approvals!;
      expect(first).to.deep.equal({
        name: "large payouts",
        aboveUsd: 25_000n * 10n ** BigInt(LIMIT_USD_DECIMALS),
        keys: new Set(["desk-eu"]),
        approvers: 1,
        expiresAfterMs: 3_600_000,
        expiresAfter: "1h",
      });
      expect(second!.keys, "absent: every key").to.equal(undefined);
      expect(second!.aboveUsd).to.equal(100_000n * 10n ** 18n + 5n * 10n ** 17n);
      expect(second!.approvers).to.equal(2);
      // A file without rules holds nothing.
      expect(parse(example()).policy!.approvals).to.equal(undefined);
    });

    it("refuses a rule naming no key, a bad expiry or threshold, a name twice, and more approvers than approver keys", function () {
      const problems = problemsOf(
        withApprovals([
          { name: "a", aboveUsd: "1", keys: ["nobody"], expiresAfter: "1 hour" },
          { name: "a", aboveUsd: "1", approvers: 2, expiresAfter: "1h" },
        ]),
      );
      expect(problems).to.deep.equal([
        'approvals[0].keys[0]: "nobody" is the name of no key',
        'approvals[0].expiresAfter: "1 hour" is not a duration (a whole number of s, m, h or d, at most 366d: 30m, 1h, 7d)',
        'approvals[1].name: "a" is already the name of approvals[0]',
        "approvals[1].approvers: 2 distinct approver keys must approve, and the file has 1 key with the approver role",
      ]);
      expect(problemsOf(withApprovals([{ name: "b", aboveUsd: "1e6", expiresAfter: "1h" }]))).to.deep.equal([
        'approvals[0].aboveUsd: must be a decimal string such as "25000" or "99.5" (at most 18 decimals)',
      ]);
      expect(problemsOf(withApprovals([{ name: "c", aboveUsd: "1", expiresAfter: "1h", approvers: 0 }]))).to.deep.equal(
        ["approvals[0].approvers: must be at least 1"],
      );
    });
  });
});
