import { createHash } from "node:crypto";

import { expect } from "chai";

import type { AccessKey, AccessPolicy } from "../../../core/index.js";
import { createAccessKeyVerifier } from "../../../adapters/transport/index.js";

const sha = (key: string) => createHash("sha256").update(key).digest("hex");
const DESK = "desk-key-0123456789abcdef";
const NEXT = "desk-key-next-0123456789ab";
const OFFICE = "office-key-0123456789abcd";

function key(overrides: Partial<AccessKey> & { name: string }): AccessKey {
  const sha256 = overrides.sha256 ?? [sha(overrides.name)];
  return { sha256, id: sha256[0]!.slice(0, 32), roles: new Set(["trader"]), sees: new Set(), ...overrides };
}

function policy(keys: AccessKey[]): AccessPolicy {
  return { version: "v", keys, limits: [], denylist: new Set() };
}

describe("the api_key check with an access file", function () {
  it("answers each of a name's keys with its entry and the entry's one id, so that a rotation keeps idempotency keys and quotes", function () {
    const desk = key({ name: "desk-eu", sha256: [sha(DESK), sha(NEXT)] });
    const verifier = createAccessKeyVerifier(() => policy([desk]));
    for (const presented of [DESK, NEXT]) {
      const check = verifier.check(presented);
      expect(check.ok).to.equal(true);
      if (!check.ok) continue;
      // The id of the entry's first hash (the key the name had before the rotation), whichever key was sent.
      expect(check.scope).to.equal(sha(DESK).slice(0, 32));
      expect(check.caller).to.deep.equal({ id: sha(DESK).slice(0, 32), key: desk });
    }
  });

  it("refuses an unknown, expired or out-of-place key exactly as a wrong one, saying why only to the log", function () {
    let now = Date.UTC(2026, 11, 31, 23, 59, 59);
    const verifier = createAccessKeyVerifier(
      () =>
        policy([
          key({
            name: "desk-eu",
            sha256: [sha(DESK)],
            expiresAt: Date.UTC(2027, 0, 1),
            allowFrom: ["10.0.0.0/8", "2001:db8::/32"],
          }),
        ]),
      () => now,
    );
    expect(verifier.check("")).to.deep.equal({ ok: false, message: "missing api_key header" });
    expect(verifier.check(OFFICE)).to.deep.equal({ ok: false, message: "invalid api_key" });
    expect(verifier.check(DESK, { clientAddress: "10.1.2.3" }).ok).to.equal(true);
    expect(verifier.check(DESK, { clientAddress: "2001:db8::7" }).ok).to.equal(true);
    expect(verifier.check(DESK, { clientAddress: "::ffff:10.1.2.3" }).ok).to.equal(true);
    expect(verifier.check(DESK, { clientAddress: "192.0.2.7" })).to.deep.equal({
      ok: false,
      message: "invalid api_key",
      rule: "key_address",
      reason: 'api key "desk-eu" may not be used from 192.0.2.7',
    });
    expect(verifier.check(DESK).ok, "no address known: refused").to.equal(false);
    now = Date.UTC(2027, 0, 1);
    expect(verifier.check(DESK, { clientAddress: "10.1.2.3" })).to.deep.equal({
      ok: false,
      message: "invalid api_key",
      rule: "key_expired",
      reason: 'api key "desk-eu" expired',
    });
  });

  it("reads the policy on every check: a key removed by a reload is refused on its next request", function () {
    let current = policy([
      key({ name: "desk-eu", sha256: [sha(DESK)] }),
      key({ name: "office", sha256: [sha(OFFICE)] }),
    ]);
    const verifier = createAccessKeyVerifier(() => current);
    expect(verifier.check(OFFICE).ok).to.equal(true);
    current = policy([key({ name: "desk-eu", sha256: [sha(DESK)] })]);
    expect(verifier.check(OFFICE)).to.deep.equal({ ok: false, message: "invalid api_key" });
    expect(verifier.check(DESK).ok).to.equal(true);
  });
});
