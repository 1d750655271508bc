/**
 * The PKCS#11 signer (adapters/chain/signers/pkcs11.ts) against a real token: SoftHSM, from
 * Debian's packages (scripts/ensure-softhsm.sh installs it). Addresses from CKA_EC_POINT, signed
 * transactions that ethers reads back to the wallet, a low `s` always, the start refused with the
 * variable to fix (and never the PIN), and sessions opened again when the token logs out or
 * closes them (the tests' shim in front of SoftHSM does that to the signer's own process,
 * test/helpers/pkcs11-shim.ts); a token pulled out answers unavailable.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { expect } from "chai";
import { Transaction, Wallet, getBytes, randomBytes, recoverAddress } from "ethers";

import {
  openPkcs11Signers,
  pkcs11Modules,
  SignerStartError,
  type OpenedSigners,
  type Pkcs11SignerSettings,
} from "../../../adapters/chain/index.js";
import { signEip1559With } from "../../../adapters/chain/tx/index.js";
import { parseEnvironment } from "../../../adapters/config/env/schema.js";
import { signerConfig } from "../../../adapters/config/env/signer.js";
import { pkcs11Shim } from "../../helpers/pkcs11-shim.js";
import { softHsmToken, type TestToken } from "../../helpers/softhsm.js";

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const TX = {
  chainId: 31337n,
  maxFeePerGas: 3_000_000_000n,
  maxPriorityFeePerGas: 1_000_000_000n,
  gasLimit: 90_000n,
  value: 0n,
  data: "0x1234",
  to: Wallet.createRandom().address,
};

describe("PKCS#11 signer on SoftHSM", function () {
  this.timeout(60_000);
  let token: TestToken;
  let key: { label: string; address: string; id: string };
  let other: { label: string; address: string; id: string };
  const opened: OpenedSigners[] = [];
  /** What the signers wrote to the server's log. */
  const logged: string[] = [];
  const log = {
    warn: (fields: object, message: string) => logged.push(`${message} ${JSON.stringify(fields)}`),
    error: (fields: object, message: string) => logged.push(`${message} ${JSON.stringify(fields)}`),
  };

  const settings = (overrides: Partial<Pkcs11SignerSettings> = {}): Pkcs11SignerSettings => ({
    module: token.module,
    token: { label: token.label },
    pin: token.pin,
    keys: [{ label: key.label }],
    keyVariable: "PKCS11_KEY_LABELS",
    addresses: [key.address],
    sessions: 4,
    timeoutMs: 5_000,
    log,
    ...overrides,
  });
  const open = async (overrides: Partial<Pkcs11SignerSettings> = {}) => {
    const signers = await openPkcs11Signers(settings(overrides));
    opened.push(signers);
    return signers;
  };
  const refusal = async (overrides: Partial<Pkcs11SignerSettings>) => {
    try {
      await open(overrides);
    } catch (error) {
      return error as SignerStartError;
    }
    throw new Error("the signer opened");
  };

  before(async function () {
    token = await softHsmToken(`unit-${process.pid}`);
    key = await token.newKey("wallet-1");
    other = await token.newKey("wallet-2");
  });

  afterEach(async function () {
    for (const signers of opened.splice(0)) await signers.close();
  });

  it("derives each wallet's address from its public key and signs transactions that recover to it", async function () {
    const { signers } = await open({
      keys: [{ label: key.label }, { id: other.id }],
      addresses: [key.address, other.address],
    });
    expect(signers.map((s) => s.address)).to.deep.equal([key.address, other.address]);
    for (const [nonce, signer] of signers.entries()) {
      const signed = await signEip1559With(signer, { ...TX, nonce });
      const parsed = Transaction.from(signed.rawTx);
      expect(parsed.from).to.equal(signer.address);
      expect(parsed.hash).to.equal(signed.txHash);
    }
  });

  it("answers a low s and the right recovery id for every digest, many at once", async function () {
    const { signers } = await open();
    const digests = Array.from({ length: 64 }, () => getBytes(randomBytes(32)));
    const signatures = await Promise.all(digests.map((digest) => signers[0]!.signDigest(digest)));
    const parities = new Set<number>();
    for (const [i, signature] of signatures.entries()) {
      expect(BigInt(signature.s) <= N / 2n, "low s").to.equal(true);
      expect(recoverAddress(digests[i]!, signature)).to.equal(key.address);
      parities.add(signature.yParity);
    }
    expect([...parities].sort(), "both recovery ids occur over 64 digests").to.deep.equal([0, 1]);
  });

  it("refuses to start on a wrong PIN, naming PKCS11_PIN_FILE and never the PIN", async function () {
    const error = await refusal({ pin: "wrong-pin-4711" });
    expect(error).to.be.instanceOf(SignerStartError);
    expect(error.message).to.match(/^PKCS11_PIN_FILE: the token "unit-\d+" refused the PIN \(CKR_PIN_INCORRECT\)$/);
    expect(error.message).to.not.include("wrong-pin-4711");
    expect(error.message).to.not.include(token.pin);
  });

  it("refuses to start on a missing token, a missing key, a missing module and a key of another wallet, naming each variable", async function () {
    expect((await refusal({ token: { label: "no-such-token" } })).message).to.match(
      /^PKCS11_TOKEN_LABEL: no token labelled "no-such-token" \(tokens present: .*"unit-\d+"/,
    );
    expect((await refusal({ token: { slot: 424242 } })).message).to.equal("PKCS11_SLOT: no token in slot 424242");
    expect((await refusal({ keys: [{ label: "nope" }] })).message).to.match(
      /^PKCS11_KEY_LABELS: the token "unit-\d+" has no key pair labelled "nope"$/,
    );
    expect((await refusal({ module: "/nonexistent/libvendor.so" })).message).to.match(
      /^PKCS11_MODULE: cannot load \/nonexistent\/libvendor\.so/,
    );
    const wrong = await refusal({ keys: [{ label: other.label }] });
    expect(wrong.message).to.equal(
      `EXCHANGE_ADDRESSES: the key labelled "${other.label}" on the token "${token.label}" is the key of ${other.address}, not of ${key.address}`,
    );
    expect((await refusal({ addresses: [] })).variable).to.equal("EXCHANGE_ADDRESSES");
  });

  it("refuses to start, naming what to install, on a machine where the optional binding pkcs11js is missing", async function () {
    // pkcs11js compiles at install, and is skipped where no compiler is: the signer's process is
    // started here with a resolve hook that answers as Node does for a package not installed.
    const dir = mkdtempSync(join(tmpdir(), "no-pkcs11js-"));
    const hook = join(dir, "hide-pkcs11js.mjs");
    writeFileSync(
      hook,
      `import { register } from "node:module";\n` +
        `register("data:text/javascript," + encodeURIComponent(${JSON.stringify(
          'export async function resolve(specifier, context, next) { if (specifier === "pkcs11js") throw Object.assign(new Error("Cannot find package \'pkcs11js\'"), { code: "ERR_MODULE_NOT_FOUND" }); return next(specifier, context); }',
        )}));\n`,
    );
    const saved = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = `${saved ?? ""} --import ${pathToFileURL(hook).href}`.trim();
    try {
      const error = await refusal({});
      expect(error).to.be.instanceOf(SignerStartError);
      expect(error.message).to.match(/^SIGNER: pkcs11 needs the npm package pkcs11js/);
      expect(error.message).to.include("build-essential");
      expect(error.message).to.include("npm install");
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("opens the token by its slot id from PKCS11_SLOT, in decimal or in hex as pkcs11-tool prints it, and signs", async function () {
    const modules = await pkcs11Modules();
    const lib = modules.load(token.module);
    let slotId: bigint;
    try {
      const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === token.label)!;
      slotId = slot.readBigUInt64LE(0);
    } finally {
      modules.unload(token.module);
    }
    for (const written of [slotId.toString(), `0x${slotId.toString(16)}`]) {
      const { PKCS11_TOKEN_LABEL: _, ...env } = token.env;
      const problems: string[] = [];
      const config = signerConfig(
        parseEnvironment({ ...env, PKCS11_SLOT: written, PKCS11_KEY_IDS: key.id, EXCHANGE_ADDRESSES: key.address }),
        problems,
      );
      expect(problems, `PKCS11_SLOT=${written}`).to.deep.equal([]);
      if (config?.kind !== "pkcs11") throw new Error("not a pkcs11 configuration");
      const { signers } = await open(config);
      const digest = getBytes(randomBytes(32));
      expect(recoverAddress(digest, await signers[0]!.signDigest(digest)), `PKCS11_SLOT=${written}`).to.equal(
        key.address,
      );
    }
  });

  it("opens its sessions again when the token logs out, or another part of the application closes them all", async function () {
    // The signer's process is its own PKCS#11 application: the shim logs it out, or closes its sessions, under it.
    const shim = pkcs11Shim(this, token);
    try {
      const { signers } = await open({ module: shim.module });
      const signer = signers[0]!;
      await signer.signDigest(getBytes(randomBytes(32)));
      shim.next("logout");
      const afterLogout = getBytes(randomBytes(32));
      expect(recoverAddress(afterLogout, await signer.signDigest(afterLogout))).to.equal(key.address);
      shim.next("close-all");
      const afterClose = await Promise.all([1, 2, 3, 4, 5, 6].map(() => signer.signDigest(getBytes(randomBytes(32)))));
      expect(afterClose).to.have.length(6);
      const logins = shim.calls().filter((call) => call.startsWith("C_Login "));
      // One login each: at the start, after the logout, after the sessions were closed (the last
      // session closed logs the application out), however many signatures met the fault.
      expect(logins).to.deep.equal(["C_Login 0x0", "C_Login 0x0", "C_Login 0x0"]);
    } finally {
      shim.remove();
    }
  });

  it("answers unavailable, naming the wallet and not the PIN, once the token is pulled out", async function () {
    const gone = await softHsmToken(`gone-${process.pid}`);
    const gk = await gone.newKey("k");
    const { signers } = await open({
      token: { label: gone.label },
      pin: gone.pin,
      keys: [{ label: "k" }],
      addresses: [gk.address],
    });
    await signers[0]!.signDigest(getBytes(randomBytes(32)));
    gone.remove();
    const thrown = await signers[0]!.signDigest(getBytes(randomBytes(32))).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(thrown?.name).to.equal("ChainUnavailableError");
    // The client is told which wallet cannot sign; the token and why are for the server's log.
    expect(thrown?.message).to.equal(`chain unavailable: the signer of ${gk.address} cannot sign; nothing was sent`);
    expect(logged.join("\n")).to.include(`"signer":"PKCS#11 token \\"${gone.label}\\""`);
    expect(logged.join("\n")).to.not.include(gone.pin);
  });
});
