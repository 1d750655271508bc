/**
 * The PKCS#11 signer's pool of sessions (adapters/chain/signers/pkcs11-token.ts), in the signer's
 * own process: signatures waiting for a session when the token logs out or closes every session
 * are still served, one login per re-open however many signatures met it, and a caller that gave
 * up while waiting leaves the queue without the token signing for it. SoftHSM behind the tests'
 * shim (test/helpers/pkcs11-shim.ts), which makes those faults in that process and traces its calls.
 */
import { expect } from "chai";
import { getBytes, randomBytes, recoverAddress } from "ethers";

import { openPkcs11Signers, type OpenedSigners, type TransactionSigner } from "../../../adapters/chain/index.js";
import { pkcs11Shim, type Shim } from "../../helpers/pkcs11-shim.js";
import { softHsmToken, type TestToken } from "../../helpers/softhsm.js";

const digest = () => getBytes(randomBytes(32));

describe("PKCS#11 signer: its pool of sessions", function () {
  this.timeout(60_000);
  let token: TestToken;
  let key: { label: string; address: string };
  let shim: Shim;
  let opened: OpenedSigners | undefined;

  before(async function () {
    token = await softHsmToken(`pool-${process.pid}`);
    key = await token.newKey("wallet");
  });
  afterEach(async function () {
    shim?.remove();
    await opened?.close();
    opened = undefined;
  });

  const open = async (sessions: number, timeoutMs: number): Promise<TransactionSigner> => {
    opened = await openPkcs11Signers({
      module: shim.module,
      token: { label: token.label },
      pin: token.pin,
      keys: [{ label: key.label }],
      keyVariable: "PKCS11_KEY_LABELS",
      addresses: [key.address],
      sessions,
      timeoutMs,
    });
    return opened.signers[0]!;
  };
  /** Signs `count` digests at once; the failures, numbered. */
  const burst = async (signer: TransactionSigner, count: number) => {
    const digests = Array.from({ length: count }, digest);
    const results = await Promise.allSettled(digests.map((d) => signer.signDigest(d)));
    for (const [i, r] of results.entries())
      if (r.status === "fulfilled") expect(recoverAddress(digests[i]!, r.value)).to.equal(key.address);
    return results.flatMap((r, i) => (r.status === "rejected" ? [`#${i}: ${(r.reason as Error).message}`] : []));
  };

  for (const fault of ["logout", "close-all"] as const)
    it(`serves every signature waiting for a session when the token ${fault === "logout" ? "logs out" : "closes every session"} meanwhile, with one login`, async function () {
      shim = pkcs11Shim(this, token);
      const signer = await open(2, 5_000);
      await signer.signDigest(digest());
      const loginsBefore = shim.calls().filter((call) => call.startsWith("C_Login ")).length;
      shim.next(fault);
      // Eight at once on two sessions: six wait, as two wallets' send queues asking for SIGNER_CONCURRENCY each would.
      expect(await burst(signer, 8), "every signature served once the sessions are open again").to.deep.equal([]);
      const logins = shim.calls().filter((call) => call.startsWith("C_Login ")).length - loginsBefore;
      expect(logins, "logins after the fault: one re-open").to.equal(1);
      expect(shim.violations()).to.equal("");
    });

  it("does not sign for callers that gave up while they waited for a session", async function () {
    shim = pkcs11Shim(this, token, { maxHoldMs: 150 });
    const signer = await open(1, 500);
    await signer.signDigest(digest());
    const before = shim.calls().filter((call) => call.startsWith("C_Sign ")).length;
    shim.hold("C_Sign"); // a slow token: each signature takes 150 ms, one session
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => signer.signDigest(digest())));
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // what the token would still do for them
    const signed = results.filter((r) => r.status === "fulfilled").length;
    const made = shim.calls().filter((call) => call.startsWith("C_Sign ")).length - before;
    const inits = shim.calls().filter((call) => call.startsWith("C_SignInit ")).length;
    expect(signed, "some answered within 500 ms").to.be.at.least(1);
    expect(signed, "not all eight in 500 ms").to.be.below(8);
    // Those answered, and at most the one in the token when the rest gave up.
    expect(made, "signatures the token made").to.be.at.most(signed + 1);
    expect(inits, "C_SignInit calls: the first signature, and the ones the token made").to.equal(1 + made);
  });
});
